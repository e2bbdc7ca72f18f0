#include "ftp.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ftp_parse_command(char *line, size_t len, struct ftp_command *out,
                      char *err, size_t errlen)
{
    size_t i, verb_len = 0;

    if (len + 2 > FTP_LINE_MAX) {
        snprintf(err, errlen, "command line longer than %d bytes", FTP_LINE_MAX - 2);
        return -1;
    }
    for (i = 0; i < len; i++) {
        /* NUL, CR and LF inside a line would let one command smuggle a
         * second past the log and the parser. */
        if (line[i] == '\0' || line[i] == '\r' || line[i] == '\n') {
            snprintf(err, errlen, "control character in command line");
            return -1;
        }
    }
    line[len] = '\0';
    while (verb_len < len && line[verb_len] != ' ') {
        if (!isalpha((unsigned char)line[verb_len]) || verb_len >= 4) {
            snprintf(err, errlen, "malformed command verb");
            return -1;
        }
        out->verb[verb_len] = (char)toupper((unsigned char)line[verb_len]);
        verb_len++;
    }
    if (verb_len < 3) {
        snprintf(err, errlen, "malformed command verb");
        return -1;
    }
    out->verb[verb_len] = '\0';
    out->arg = verb_len < len ? line + verb_len + 1 : line + len;
    return 0;
}

/* A decimal number of at most max, ending at one of stops (or the end). */
static const char *parse_decimal(const char *p, uint64_t max, uint64_t *out)
{
    uint64_t value = 0;

    if (!isdigit((unsigned char)*p))
        return NULL;
    while (isdigit((unsigned char)*p)) {
        value = value * 10 + (uint64_t)(*p - '0');
        if (value > max)
            return NULL;
        p++;
    }
    *out = value;
    return p;
}

int ftp_parse_hostport(const char *text, struct sockaddr_storage *out)
{
    struct sockaddr_in *sin = (struct sockaddr_in *)out;
    uint8_t bytes[6];
    const char *p = text;
    uint64_t value;

    for (int i = 0; i < 6; i++) {
        p = parse_decimal(p, 255, &value);
        if (!p)
            return -1;
        bytes[i] = (uint8_t)value;
        if (i < 5 && *p++ != ',')
            return -1;
    }
    if (*p != '\0' && *p != ')')
        return -1;
    memset(out, 0, sizeof *out);
    sin->sin_family = AF_INET;
    memcpy(&sin->sin_addr, bytes, 4);
    sin->sin_port = htons((uint16_t)(bytes[4] << 8 | bytes[5]));
    return 0;
}

void ftp_format_hostport(const struct sockaddr_storage *addr, char *buf, size_t len)
{
    const struct sockaddr_in *sin = (const struct sockaddr_in *)addr;
    const uint8_t *a = (const uint8_t *)&sin->sin_addr;
    uint16_t port = ntohs(sin->sin_port);

    snprintf(buf, len, "%u,%u,%u,%u,%u,%u", a[0], a[1], a[2], a[3],
             (unsigned)(port >> 8), (unsigned)(port & 0xff));
}

int ftp_parse_eprt(const char *text, struct sockaddr_storage *out)
{
    char delim = text[0], host[INET6_ADDRSTRLEN];
    const char *p = text + 1, *end;
    uint64_t proto, port;
    size_t host_len;

    /* RFC 2428: the delimiter is any printable ASCII 33..126 but digits. */
    if (delim < 33 || delim > 126 || isdigit((unsigned char)delim))
        return -1;
    p = parse_decimal(p, 2, &proto);
    if (!p || proto < 1 || *p++ != delim)
        return -1;
    end = strchr(p, delim);
    if (!end || (host_len = (size_t)(end - p)) == 0 || host_len >= sizeof host)
        return -1;
    memcpy(host, p, host_len);
    host[host_len] = '\0';
    p = parse_decimal(end + 1, 65535, &port);
    if (!p || port == 0 || p[0] != delim || p[1] != '\0')
        return -1;
    memset(out, 0, sizeof *out);
    if (proto == 1) {
        struct sockaddr_in *sin = (struct sockaddr_in *)out;
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)port);
        return inet_pton(AF_INET, host, &sin->sin_addr) == 1 ? 0 : -1;
    }
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)out;
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons((uint16_t)port);
    return inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1 ? 0 : -1;
}

void ftp_format_eprt(const struct sockaddr_storage *addr, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "";
    uint16_t port;
    int proto;

    if (addr->ss_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)addr;
        inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof host);
        port = ntohs(sin6->sin6_port);
        proto = 2;
    } else {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)addr;
        inet_ntop(AF_INET, &sin->sin_addr, host, sizeof host);
        port = ntohs(sin->sin_port);
        proto = 1;
    }
    snprintf(buf, len, "|%d|%s|%u|", proto, host, (unsigned)port);
}

int ftp_parse_epsv_reply(const char *text, uint16_t *port)
{
    const char *open = strchr(text, '(');
    uint64_t value;
    char delim;

    if (!open || !open[1])
        return -1;
    delim = open[1];
    if (open[2] != delim || open[3] != delim)
        return -1;
    const char *p = parse_decimal(open + 4, 65535, &value);
    if (!p || value == 0 || p[0] != delim || p[1] != ')')
        return -1;
    *port = (uint16_t)value;
    return 0;
}

int ftp_parse_pasv_reply(const char *text, struct sockaddr_storage *out)
{
    const char *open = strchr(text, '(');

    return open ? ftp_parse_hostport(open + 1, out) : -1;
}

int ftp_parse_parallelism(const char *text, unsigned max, unsigned *streams)
{
    static const char prefix[] = "RETR Parallelism=";
    uint64_t value, ignored;
    const char *p;

    if (strncasecmp(text, prefix, sizeof prefix - 1) != 0)
        return -1;
    p = parse_decimal(text + sizeof prefix - 1, max, &value);
    if (!p || value == 0)
        return -1;
    /* Optional ",min,max" then an optional ';'. */
    for (int i = 0; i < 2 && *p == ','; i++) {
        p = parse_decimal(p + 1, UINT32_MAX, &ignored);
        if (!p)
            return -1;
    }
    if (*p == ';')
        p++;
    if (*p != '\0')
        return -1;
    *streams = (unsigned)value;
    return 0;
}

int ftp_parse_ranges(const char *text, struct ftp_ranges *out)
{
    const char *p = text;

    out->count = 0;
    while (*p) {
        uint64_t start, end;
        p = parse_decimal(p, INT64_MAX, &start);
        if (!p || *p++ != '-')
            return -1;
        p = parse_decimal(p, INT64_MAX, &end);
        if (!p || end < start)
            return -1;
        if (*p == ',')
            p++;
        else if (*p != '\0')
            return -1;
        if (end > start && !ftp_ranges_add(out, start, end))
            return -1;
    }
    return 0;
}

bool ftp_format_ranges(const struct ftp_ranges *ranges, char *buf, size_t len)
{
    size_t used = 0;

    if (len == 0)
        return false;
    buf[0] = '\0';
    for (unsigned i = 0; i < ranges->count; i++) {
        int n = snprintf(buf + used, len - used, "%s%" PRIu64 "-%" PRIu64, i ? "," : "",
                         ranges->r[i].start, ranges->r[i].end);
        if (n < 0 || (size_t)n >= len - used)
            return false;
        used += (size_t)n;
    }
    return true;
}

bool ftp_ranges_add(struct ftp_ranges *ranges, uint64_t start, uint64_t end)
{
    unsigned i = 0, j;

    if (end <= start)
        return true;
    /* Sorted, disjoint, non-adjacent: find the first range that ends at or
     * after start, merge every range that touches [start, end). */
    while (i < ranges->count && ranges->r[i].end < start)
        i++;
    j = i;
    while (j < ranges->count && ranges->r[j].start <= end) {
        if (ranges->r[j].start < start)
            start = ranges->r[j].start;
        if (ranges->r[j].end > end)
            end = ranges->r[j].end;
        j++;
    }
    if (j == i) {
        if (ranges->count == FTP_RANGES_MAX)
            return false;
        memmove(&ranges->r[i + 1], &ranges->r[i], (ranges->count - i) * sizeof ranges->r[0]);
        ranges->count++;
    } else if (j > i + 1) {
        memmove(&ranges->r[i + 1], &ranges->r[j], (ranges->count - j) * sizeof ranges->r[0]);
        ranges->count -= j - i - 1;
    }
    ranges->r[i].start = start;
    ranges->r[i].end = end;
    return true;
}

uint64_t ftp_ranges_covered(const struct ftp_ranges *ranges, uint64_t limit)
{
    uint64_t total = 0;

    for (unsigned i = 0; i < ranges->count; i++) {
        uint64_t start = ranges->r[i].start, end = ranges->r[i].end;
        if (start >= limit)
            break;
        total += (end > limit ? limit : end) - start;
    }
    return total;
}

uint64_t ftp_ranges_end(const struct ftp_ranges *ranges)
{
    return ranges->count ? ranges->r[ranges->count - 1].end : 0;
}

int ftp_parse_partial(const char *text, uint64_t *offset, uint64_t *length,
                      const char **path)
{
    const char *p;

    if (text[0] != 'P' || text[1] != ' ')
        return -1;
    p = parse_decimal(text + 2, INT64_MAX, offset);
    if (!p || *p++ != ' ')
        return -1;
    p = parse_decimal(p, INT64_MAX, length);
    if (!p || *p++ != ' ' || *p == '\0')
        return -1;
    *path = p;
    return 0;
}

static const char *const cksum_names[] = {
    [FTP_CKSUM_ADLER32] = "ADLER32",
    [FTP_CKSUM_MD5] = "MD5",
    [FTP_CKSUM_SHA256] = "SHA256",
};

int ftp_parse_cksum_alg(const char *name, enum ftp_cksum_alg *out)
{
    for (size_t i = 0; i < sizeof cksum_names / sizeof cksum_names[0]; i++) {
        if (strcasecmp(name, cksum_names[i]) == 0) {
            *out = (enum ftp_cksum_alg)i;
            return 0;
        }
    }
    return -1;
}

const char *ftp_cksum_alg_name(enum ftp_cksum_alg alg)
{
    return cksum_names[alg];
}

int ftp_parse_cksm(const char *text, enum ftp_cksum_alg *alg, uint64_t *offset,
                   int64_t *length, const char **path)
{
    char name[16];
    const char *space = strchr(text, ' '), *p;
    uint64_t value;

    if (!space || (size_t)(space - text) >= sizeof name)
        return -1;
    memcpy(name, text, (size_t)(space - text));
    name[space - text] = '\0';
    if (ftp_parse_cksum_alg(name, alg) < 0)
        return -1;
    p = parse_decimal(space + 1, INT64_MAX, offset);
    if (!p || *p++ != ' ')
        return -1;
    if (p[0] == '-' && p[1] == '1') {
        *length = -1;
        p += 2;
    } else {
        p = parse_decimal(p, INT64_MAX, &value);
        if (!p)
            return -1;
        *length = (int64_t)value;
    }
    if (*p++ != ' ' || *p == '\0')
        return -1;
    *path = p;
    return 0;
}

int ftp_reply_code(const char *line)
{
    if (!isdigit((unsigned char)line[0]) || !isdigit((unsigned char)line[1]) ||
        !isdigit((unsigned char)line[2]) || (line[3] != ' ' && line[3] != '-' && line[3] != '\0'))
        return 0;
    int code = (line[0] - '0') * 100 + (line[1] - '0') * 10 + (line[2] - '0');
    return code >= 100 && code <= 599 ? code : 0;
}

int ftp_reply_final_code(const char *line, int expected_code)
{
    int code = ftp_reply_code(line);

    if (code == 0 || line[3] == '-')
        return 0;
    /* Inside a multi-line reply only "CODE " with the opening code ends it. */
    if (expected_code && code != expected_code)
        return 0;
    return code;
}
