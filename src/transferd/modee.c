#include "modee.h"

#include <stdio.h>

static void put_be64(uint8_t *out, uint64_t value)
{
    for (int i = 7; i >= 0; i--) {
        out[i] = (uint8_t)value;
        value >>= 8;
    }
}

static uint64_t get_be64(const uint8_t *in)
{
    uint64_t value = 0;

    for (int i = 0; i < 8; i++)
        value = value << 8 | in[i];
    return value;
}

void modee_encode(const struct modee_header *header, uint8_t out[MODEE_HEADER_LEN])
{
    out[0] = header->descriptor;
    put_be64(out + 1, header->count);
    put_be64(out + 9, header->offset);
}

int modee_decode(const uint8_t in[MODEE_HEADER_LEN], struct modee_header *header,
                 char *err, size_t errlen)
{
    const uint8_t known = MODEE_CLOSE | MODEE_EOD | MODEE_EOF | MODEE_EOR;

    header->descriptor = in[0];
    header->count = get_be64(in + 1);
    header->offset = get_be64(in + 9);
    if (header->descriptor & (MODEE_RESTART | MODEE_ERRORS)) {
        snprintf(err, errlen, "MODE E block with descriptor 0x%02x (restart or error "
                 "blocks are not used in this direction)", header->descriptor);
        return -1;
    }
    if (header->descriptor & ~known) {
        snprintf(err, errlen, "MODE E block with unknown descriptor 0x%02x", header->descriptor);
        return -1;
    }
    /* The EOF block's offset is a count of connections, not a position. */
    if (!(header->descriptor & MODEE_EOF) &&
        (header->offset > INT64_MAX || header->count > INT64_MAX - header->offset)) {
        snprintf(err, errlen, "MODE E block past the largest file offset");
        return -1;
    }
    return 0;
}
