/* Quantities as operators write them: buffers in bytes with binary suffixes
 * (64K, 4M, 1G = KiB, MiB, GiB), rates in bits per second with decimal
 * suffixes (500M, 10G), the way iperf3 and tc write them. */
#ifndef SDMZ_UNITS_H
#define SDMZ_UNITS_H

#include <stdint.h>

int parse_bytes(const char *text, uint64_t *out);  /* 0 or -1 */
int parse_bits(const char *text, uint64_t *out);   /* 0 or -1 */
int parse_uint(const char *text, uint64_t max, uint64_t *out);
/* "LO-HI" (a firewall's port range), lowest <= LO <= HI <= 65535; 0 or -1. */
int parse_port_range(const char *text, uint16_t lowest, uint16_t *lo, uint16_t *hi);

#endif
