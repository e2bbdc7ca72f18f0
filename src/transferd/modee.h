/* GridFTP extended block mode (MODE E, GFD.20 section 3): every block on a
 * data connection starts with a 17-byte header, a descriptor byte and two
 * big-endian 64-bit fields, the byte count and the file offset. Blocks may
 * arrive out of order and on any connection; EOD closes one connection's
 * share of a transfer and EOF (sent once) says how many EODs to expect. */
#ifndef SDMZ_MODEE_H
#define SDMZ_MODEE_H

#include <stddef.h>
#include <stdint.h>

#define MODEE_HEADER_LEN 17

enum modee_descriptor {
    MODEE_CLOSE = 0x04,    /* the sender closes this connection after the block */
    MODEE_EOD = 0x08,      /* no more data on this connection for this transfer */
    MODEE_RESTART = 0x10,  /* the block is a restart marker */
    MODEE_ERRORS = 0x20,   /* suspected errors in the block */
    MODEE_EOF = 0x40,      /* offset field holds the number of EODs to expect */
    MODEE_EOR = 0x80,
};

struct modee_header {
    uint8_t descriptor;
    uint64_t count;
    uint64_t offset;
};

void modee_encode(const struct modee_header *header, uint8_t out[MODEE_HEADER_LEN]);
/* 0, or -1 with the reason in err: unknown descriptor bits, a block that is
 * a restart marker or flagged with errors, or offset + count past 2^63. */
int modee_decode(const uint8_t in[MODEE_HEADER_LEN], struct modee_header *header,
                 char *err, size_t errlen);

#endif
