/* The relay's user-space circular buffer (SciStream's "circular buffer"),
 * used where splice() cannot serve: drop-oldest streams, which must count and
 * discard bytes. Single owner (one worker thread); no locking. */
#ifndef SDMZ_RING_H
#define SDMZ_RING_H

#include <stddef.h>
#include <stdint.h>

struct ring {
    uint8_t *buf;
    size_t cap;      /* bytes */
    size_t head;     /* index of the oldest byte */
    size_t len;      /* bytes held */
    uint64_t sent;   /* bytes consumed so far: the output stream offset */
};

int ring_init(struct ring *r, size_t cap);              /* 0 or -1 (ENOMEM) */
void ring_free(struct ring *r);
size_t ring_free_span(const struct ring *r, uint8_t **span);     /* contiguous free */
void ring_commit(struct ring *r, size_t n);
size_t ring_data_span(const struct ring *r, const uint8_t **span); /* contiguous data */
void ring_consume(struct ring *r, size_t n);
/* Change the capacity keeping the content. -1 with errno EBUSY when the
 * content does not fit, ENOMEM when allocation fails; the ring is unchanged. */
int ring_resize(struct ring *r, size_t new_cap);
/* Discard at least `want` bytes of the oldest whole records (record bytes
 * each, counted from the start of the output stream) that have not started
 * to leave. A record already partly sent is kept whole, so the consumer never
 * sees a torn record. The first `keep` bytes count as leaving: a TLS layer
 * has taken them into a record it has not finished sending, and their content
 * stays (moved, not changed). Returns the bytes dropped (0 if no whole record
 * is waiting). */
size_t ring_drop_oldest(struct ring *r, size_t want, size_t record, size_t keep);

#endif
