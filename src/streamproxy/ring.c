#include "ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ring_init(struct ring *r, size_t cap)
{
    memset(r, 0, sizeof *r);
    if (cap == 0) {
        errno = EINVAL;
        return -1;
    }
    r->buf = malloc(cap);
    if (!r->buf)
        return -1;
    r->cap = cap;
    return 0;
}

void ring_free(struct ring *r)
{
    free(r->buf);
    memset(r, 0, sizeof *r);
}

size_t ring_free_span(const struct ring *r, uint8_t **span)
{
    size_t tail = (r->head + r->len) % r->cap;
    size_t free_total = r->cap - r->len;
    size_t to_end = r->cap - tail;

    *span = r->buf + tail;
    return free_total < to_end ? free_total : to_end;
}

void ring_commit(struct ring *r, size_t n)
{
    r->len += n;
}

size_t ring_data_span(const struct ring *r, const uint8_t **span)
{
    size_t to_end = r->cap - r->head;

    *span = r->buf + r->head;
    return r->len < to_end ? r->len : to_end;
}

void ring_consume(struct ring *r, size_t n)
{
    r->head = (r->head + n) % r->cap;
    r->len -= n;
    r->sent += n;
    if (r->len == 0)
        r->head = 0; /* keeps the next read contiguous */
}

int ring_resize(struct ring *r, size_t new_cap)
{
    uint8_t *buf;
    size_t first, copied = 0;
    const uint8_t *span;

    if (new_cap == 0 || r->len > new_cap) {
        errno = new_cap == 0 ? EINVAL : EBUSY;
        return -1;
    }
    buf = malloc(new_cap);
    if (!buf)
        return -1;
    while (copied < r->len) {
        size_t at = (r->head + copied) % r->cap;
        first = r->cap - at;
        if (first > r->len - copied)
            first = r->len - copied;
        span = r->buf + at;
        memcpy(buf + copied, span, first);
        copied += first;
    }
    free(r->buf);
    r->buf = buf;
    r->cap = new_cap;
    r->head = 0;
    return 0;
}

size_t ring_drop_oldest(struct ring *r, size_t want, size_t record, size_t keep)
{
    size_t partial, records, drop;
    uint64_t leaving = r->sent + keep;

    if (record == 0)
        record = 1;
    /* The kept bytes, then the rest of the record they end in. */
    partial = keep + (size_t)((record - leaving % record) % record);
    if (partial > r->len)
        return 0;
    records = (r->len - partial) / record;
    if (records == 0)
        return 0;
    if (want < record)
        want = record;
    if (records > (want + record - 1) / record)
        records = (want + record - 1) / record;
    drop = records * record;
    /* Move the kept bytes and the partial record's tail forward over the dropped records,
     * last byte first, so it stays in front of the surviving data. */
    for (size_t i = partial; i > 0; i--) {
        size_t from = (r->head + i - 1) % r->cap;
        size_t to = (r->head + drop + i - 1) % r->cap;
        r->buf[to] = r->buf[from];
    }
    r->head = (r->head + drop) % r->cap;
    r->len -= drop;
    return drop;
}
