/* Socket addresses and CIDR prefixes written the way operators write them:
 * 198.18.1.12:5100, [fd53::12]:5100, 198.18.2.0/24. IP literals only: names
 * are resolved by the caller (Ansible), so the daemon never blocks on DNS. */
#ifndef SDMZ_NETADDR_H
#define SDMZ_NETADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct cidr {
    int family;          /* AF_INET or AF_INET6 */
    uint8_t addr[16];
    unsigned prefix_len;
};

/* 0 on success; -1 with a reason in err. */
int netaddr_parse(const char *text, struct sockaddr_storage *out, char *err, size_t errlen);
int cidr_parse(const char *text, struct cidr *out, char *err, size_t errlen);
bool cidr_match(const struct cidr *prefix, const struct sockaddr_storage *addr);
uint16_t netaddr_port(const struct sockaddr_storage *addr);
void netaddr_set_port(struct sockaddr_storage *addr, uint16_t port);
socklen_t netaddr_len(const struct sockaddr_storage *addr);
/* "198.18.1.12:5100" or "[fd53::12]:5100". */
void netaddr_format(const struct sockaddr_storage *addr, char *buf, size_t len);
/* An IP literal without a port ("198.18.1.12", "fd53::12"). */
int netaddr_parse_host(const char *text, struct sockaddr_storage *out);
void netaddr_format_host(const struct sockaddr_storage *addr, char *buf, size_t len);
bool netaddr_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b);
void cidr_format(const struct cidr *prefix, char *buf, size_t len);

#endif
