#include "netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_number(const char *text, unsigned long max, unsigned long *out)
{
    char *end;

    if (*text < '0' || *text > '9')
        return -1;
    errno = 0;
    *out = strtoul(text, &end, 10);
    if (errno || *end || *out > max)
        return -1;
    return 0;
}

int netaddr_parse(const char *text, struct sockaddr_storage *out, char *err, size_t errlen)
{
    char host[64];
    const char *port_text;
    unsigned long port;
    size_t host_len;

    memset(out, 0, sizeof *out);
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (!close || close[1] != ':') {
            snprintf(err, errlen, "'%s': expected [IPv6]:PORT", text);
            return -1;
        }
        host_len = (size_t)(close - text - 1);
        if (host_len >= sizeof host)
            goto bad_host;
        memcpy(host, text + 1, host_len);
        port_text = close + 2;
    } else {
        const char *colon = strrchr(text, ':');
        if (!colon || strchr(text, ':') != colon) {
            snprintf(err, errlen, "'%s': expected ADDRESS:PORT", text);
            return -1;
        }
        host_len = (size_t)(colon - text);
        if (host_len >= sizeof host)
            goto bad_host;
        memcpy(host, text, host_len);
        port_text = colon + 1;
    }
    host[host_len] = '\0';
    if (parse_number(port_text, 65535, &port) < 0) {
        snprintf(err, errlen, "'%s': port must be 0-65535", text);
        return -1;
    }
    if (inet_pton(AF_INET, host, &((struct sockaddr_in *)out)->sin_addr) == 1) {
        out->ss_family = AF_INET;
    } else if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)out)->sin6_addr) == 1) {
        out->ss_family = AF_INET6;
    } else {
        goto bad_host;
    }
    netaddr_set_port(out, (uint16_t)port);
    return 0;
bad_host:
    snprintf(err, errlen, "'%s': not an IPv4 or IPv6 address (names are not resolved)", text);
    return -1;
}

int cidr_parse(const char *text, struct cidr *out, char *err, size_t errlen)
{
    char host[64];
    const char *slash = strchr(text, '/');
    size_t host_len = slash ? (size_t)(slash - text) : strlen(text);
    unsigned long len;
    unsigned max;

    memset(out, 0, sizeof *out);
    if (host_len >= sizeof host)
        goto bad;
    memcpy(host, text, host_len);
    host[host_len] = '\0';
    if (inet_pton(AF_INET, host, out->addr) == 1) {
        out->family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, host, out->addr) == 1) {
        out->family = AF_INET6;
        max = 128;
    } else {
        goto bad;
    }
    if (!slash)
        len = max;
    else if (parse_number(slash + 1, max, &len) < 0)
        goto bad;
    out->prefix_len = (unsigned)len;
    /* Host bits must be zero: 198.18.2.5/24 is a typo, not a prefix. */
    for (unsigned bit = out->prefix_len; bit < max; bit++) {
        if (out->addr[bit / 8] & (0x80 >> (bit % 8))) {
            snprintf(err, errlen, "'%s': host bits set beyond /%u", text, out->prefix_len);
            return -1;
        }
    }
    return 0;
bad:
    snprintf(err, errlen, "'%s': expected an IPv4 or IPv6 prefix (ADDRESS/LEN)", text);
    return -1;
}

static const uint8_t *address_bytes(const struct sockaddr_storage *addr, int *family)
{
    static const uint8_t v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)addr;

    if (addr->ss_family == AF_INET) {
        *family = AF_INET;
        return (const uint8_t *)&((const struct sockaddr_in *)addr)->sin_addr;
    }
    /* A dual-stack listener reports IPv4 peers as ::ffff:a.b.c.d. */
    if (memcmp(v6->sin6_addr.s6_addr, v4_mapped, sizeof v4_mapped) == 0) {
        *family = AF_INET;
        return v6->sin6_addr.s6_addr + 12;
    }
    *family = AF_INET6;
    return v6->sin6_addr.s6_addr;
}

bool cidr_match(const struct cidr *prefix, const struct sockaddr_storage *addr)
{
    int family;
    const uint8_t *bytes = address_bytes(addr, &family);
    unsigned full = prefix->prefix_len / 8, rest = prefix->prefix_len % 8;

    if (family != prefix->family)
        return false;
    if (memcmp(bytes, prefix->addr, full) != 0)
        return false;
    if (rest) {
        uint8_t mask = (uint8_t)(0xff << (8 - rest));
        if ((bytes[full] & mask) != prefix->addr[full])
            return false;
    }
    return true;
}

uint16_t netaddr_port(const struct sockaddr_storage *addr)
{
    if (addr->ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)addr)->sin_port);
    return ntohs(((const struct sockaddr_in6 *)addr)->sin6_port);
}

void netaddr_set_port(struct sockaddr_storage *addr, uint16_t port)
{
    if (addr->ss_family == AF_INET)
        ((struct sockaddr_in *)addr)->sin_port = htons(port);
    else
        ((struct sockaddr_in6 *)addr)->sin6_port = htons(port);
}

socklen_t netaddr_len(const struct sockaddr_storage *addr)
{
    return addr->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

void netaddr_format_host(const struct sockaddr_storage *addr, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";

    if (addr->ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)addr)->sin_addr, host, sizeof host);
    else if (addr->ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)addr)->sin6_addr, host, sizeof host);
    snprintf(buf, len, "%s", host);
}

void netaddr_format(const struct sockaddr_storage *addr, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN];

    netaddr_format_host(addr, host, sizeof host);
    snprintf(buf, len, addr->ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", host,
             netaddr_port(addr));
}

int netaddr_parse_host(const char *text, struct sockaddr_storage *out)
{
    memset(out, 0, sizeof *out);
    if (inet_pton(AF_INET, text, &((struct sockaddr_in *)out)->sin_addr) == 1) {
        out->ss_family = AF_INET;
        return 0;
    }
    if (inet_pton(AF_INET6, text, &((struct sockaddr_in6 *)out)->sin6_addr) == 1) {
        out->ss_family = AF_INET6;
        return 0;
    }
    return -1;
}

bool netaddr_same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
                      &((const struct sockaddr_in *)b)->sin_addr, 4) == 0;
    return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                  &((const struct sockaddr_in6 *)b)->sin6_addr, 16) == 0;
}

void cidr_format(const struct cidr *prefix, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN];

    inet_ntop(prefix->family, prefix->addr, host, sizeof host);
    snprintf(buf, len, "%s/%u", host, prefix->prefix_len);
}
