#include "units.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_scaled(const char *text, uint64_t base, uint64_t *out)
{
    char *end;
    unsigned long long value;
    uint64_t scale = 1;

    if (*text < '0' || *text > '9')
        return -1;
    errno = 0;
    value = strtoull(text, &end, 10);
    if (errno)
        return -1;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': scale = base; end++; break;
    case 'm': case 'M': scale = base * base; end++; break;
    case 'g': case 'G': scale = base * base * base; end++; break;
    default: return -1;
    }
    if (*end != '\0')
        return -1;
    if (value > UINT64_MAX / scale)
        return -1;
    *out = (uint64_t)value * scale;
    return 0;
}

int parse_bytes(const char *text, uint64_t *out)
{
    return parse_scaled(text, 1024, out);
}

int parse_bits(const char *text, uint64_t *out)
{
    return parse_scaled(text, 1000, out);
}

int parse_uint(const char *text, uint64_t max, uint64_t *out)
{
    if (parse_scaled(text, 1, out) < 0 || strpbrk(text, "kKmMgG") || *out > max)
        return -1;
    return 0;
}

int parse_port_range(const char *text, uint16_t lowest, uint16_t *lo, uint16_t *hi)
{
    unsigned a, b;
    char tail;

    if (sscanf(text, "%5u-%5u%c", &a, &b, &tail) != 2 || a < lowest || a == 0 || a > b ||
        b > 65535)
        return -1;
    *lo = (uint16_t)a;
    *hi = (uint16_t)b;
    return 0;
}
