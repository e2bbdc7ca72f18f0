#include "relay.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"

/* Fairness: at most this many splice/read rounds per direction per wakeup. */
#define PUMP_ROUNDS 16
#define RING_DROP_FRACTION 4
/* Reads shorter than this are copied instead of spliced (see copy_small). */
#define COPY_BELOW (16u << 10)

int socket_set_pacing(int fd, uint64_t bytes_per_s)
{
    uint64_t value = bytes_per_s ? bytes_per_s : ~0ULL;

    return setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &value, sizeof value);
}

static uint64_t pipe_size_for(uint64_t wanted, uint64_t pipe_max)
{
    return wanted > pipe_max ? pipe_max : wanted;
}

static int direction_open(struct direction *d, int src, int dst, bool drop_when_full,
                          uint64_t buffer, uint64_t pipe_max)
{
    int fds[2];

    d->src = src;
    d->dst = dst;
    d->pipe_r = d->pipe_w = -1;
    d->drop_when_full = drop_when_full;
    d->use_ring = drop_when_full || d->src_tls || d->dst_tls;
    if (d->use_ring)
        return ring_init(&d->ring, buffer);
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0)
        return -1;
    d->pipe_r = fds[0];
    d->pipe_w = fds[1];
    /* Best effort: the effective size is what F_GETPIPE_SZ reports. */
    (void)fcntl(d->pipe_w, F_SETPIPE_SZ, (int)pipe_size_for(buffer, pipe_max));
    int size = fcntl(d->pipe_w, F_GETPIPE_SZ);
    d->pipe_cap = size > 0 ? (uint64_t)size : 65536;
    return 0;
}

static void direction_close(struct direction *d)
{
    if (d->pipe_r >= 0)
        close(d->pipe_r);
    if (d->pipe_w >= 0)
        close(d->pipe_w);
    d->pipe_r = d->pipe_w = -1;
    if (d->use_ring)
        ring_free(&d->ring);
}

static uint64_t direction_held(const struct direction *d)
{
    return d->use_ring ? d->ring.len : d->in_pipe;
}

static uint64_t direction_capacity(const struct direction *d)
{
    return d->use_ring ? d->ring.cap : d->pipe_cap;
}

static void set_nodelay_and_pacing(struct conn *c)
{
    int one = 1;

    for (int side = 0; side < 2; side++)
        if (setsockopt(c->fd[side], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
            log_msg(LOG_DEBUG, "%s ch%u: TCP_NODELAY: %s", c->req->spec.id, c->channel,
                    strerror(errno));
    if (c->settings.pacing_bytes_per_s &&
        socket_set_pacing(c->fd[1], c->settings.pacing_bytes_per_s) < 0)
        log_msg(LOG_WARN, "%s ch%u: rate unsupported: SO_MAX_PACING_RATE: %s",
                c->req->spec.id, c->channel, strerror(errno));
}

void conn_sockets_close(const struct conn_sockets *sockets)
{
    SSL_free(sockets->tls);
    close(sockets->client_fd);
    close(sockets->target_fd);
}

struct conn *conn_new(struct request *req, unsigned channel, const struct conn_sockets *sockets,
                      const struct relay_settings *settings, uint64_t pipe_max)
{
    struct conn *c = calloc(1, sizeof *c);
    bool drop = settings->policy == POLICY_DROP_OLDEST;
    int client_fd = sockets->client_fd, target_fd = sockets->target_fd;

    if (!c)
        goto fail;
    c->req = req;
    c->channel = channel;
    c->stats = &req->stats[channel];
    c->fd[0] = client_fd;
    c->fd[1] = target_fd;
    c->connecting = sockets->connecting;
    c->tls = sockets->tls;
    c->tls_side = sockets->tls_side;
    c->handshaking = c->tls != NULL;
    if (c->tls) {
        /* Direction i reads side i and writes side 1 - i. */
        c->dir[c->tls_side].src_tls = c->tls;
        c->dir[1 - c->tls_side].dst_tls = c->tls;
    }
    c->settings = *settings;
    c->armed[0] = c->armed[1] = ~0u;
    for (int side = 0; side < 2; side++) {
        c->ep[side].kind = WATCH_CONN;
        c->ep[side].conn = c;
        c->ep[side].side = side;
    }
    if (direction_open(&c->dir[0], client_fd, target_fd, drop, settings->buffer_bytes,
                       pipe_max) < 0)
        goto fail_conn;
    /* The reverse direction carries little; it never drops. */
    if (direction_open(&c->dir[1], target_fd, client_fd, false, settings->buffer_bytes,
                       pipe_max) < 0) {
        direction_close(&c->dir[0]);
        goto fail_conn;
    }
    set_nodelay_and_pacing(c);
    return c;
fail_conn:
    log_msg(LOG_ERROR, "%s ch%u: relay buffers: %s", req->spec.id, channel, strerror(errno));
    free(c);
fail:
    conn_sockets_close(sockets);
    return NULL;
}

static bool direction_done(const struct direction *d)
{
    return d->aborted || (d->src_eof && direction_held(d) == 0 && d->dst_shut);
}

static void direction_shutdown_if_drained(struct direction *d)
{
    if (d->src_eof && !d->dst_shut && direction_held(d) == 0 && !d->aborted) {
        /* TLS: close_notify first, or the far gateway sees a truncation. */
        if (d->dst_tls) {
            int rc = tls_close_notify(d->dst_tls, &d->dst_want);
            d->notify_pending = rc == 0;
            d->dst_blocked = rc == 0;
            if (rc == 0)
                return;
        }
        /* Half-close: the far side sees EOF, the other direction goes on. */
        (void)shutdown(d->dst, SHUT_WR);
        d->dst_shut = true;
    }
}

static ssize_t direction_read(struct conn *c, struct direction *d, void *buf, size_t len)
{
    ssize_t n;

    if (!d->src_tls)
        return read(d->src, buf, len);
    d->src_want = 0;
    n = tls_read(d->src_tls, buf, len, &d->src_want);
    if (n < 0 && errno == EPROTO) {
        tls_last_error(c->why, sizeof c->why);
        c->reset_on_close = true;
        errno = EPROTO;
    }
    return n;
}

static ssize_t direction_write(struct conn *c, struct direction *d, const void *buf, size_t len)
{
    ssize_t n;

    if (!d->dst_tls)
        return send(d->dst, buf, len, MSG_NOSIGNAL);
    /* One TLS record per call: when the socket is full, OpenSSL keeps exactly
     * these bytes encrypted, and the retry must offer at least as many. */
    if (len > SSL3_RT_MAX_PLAIN_LENGTH)
        len = SSL3_RT_MAX_PLAIN_LENGTH;
    d->dst_want = 0;
    n = tls_write(d->dst_tls, buf, len, &d->dst_want);
    d->tls_write_pending = n < 0 && errno == EAGAIN ? len : 0;
    if (n < 0 && errno == EPROTO) {
        tls_last_error(c->why, sizeof c->why);
        errno = EPROTO;
    }
    return n;
}

/* The outcome of a write towards d->dst, whatever moved the bytes. */
static int account_write(struct direction *d, ssize_t n, atomic_uint_fast64_t *bytes,
                         bool *progress)
{
    if (n > 0) {
        d->dst_blocked = false;
        atomic_fetch_add_explicit(bytes, (uint64_t)n, memory_order_relaxed);
        *progress = true;
    } else if (n < 0 && errno == EAGAIN) {
        d->dst_blocked = true;
    } else if (n < 0 && errno != EINTR) {
        return -1;
    }
    return 0;
}

/* Messages of a few KiB are copied: splicing them costs more than the copy
 * (the kernel puts a small socket buffer's bytes into a fresh page for the
 * pipe), as HAProxy's splice-auto also splices only big transfers. A read
 * that fills COPY_BELOW goes back to splicing. */
static int copy_small(struct direction *d, atomic_uint_fast64_t *bytes, bool *progress,
                      bool *drained)
{
    uint8_t buf[COPY_BELOW];
    size_t want = d->pipe_cap < sizeof buf ? (size_t)d->pipe_cap : sizeof buf;
    ssize_t n = recv(d->src, buf, want, 0), sent;

    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    *progress = true;
    if (n == 0) {
        d->src_eof = true;
        return 0;
    }
    *drained = (size_t)n < want;
    d->small_reads = *drained;
    sent = send(d->dst, buf, (size_t)n, MSG_NOSIGNAL);
    if (account_write(d, sent, bytes, progress) < 0)
        return -1;
    /* What the destination did not take waits in the (empty) pipe, which
     * holds at least want bytes: from there it goes out as spliced bytes do. */
    size_t rest = (size_t)n - (sent > 0 ? (size_t)sent : 0);
    if (rest > 0) {
        ssize_t kept = write(d->pipe_w, buf + (n - (ssize_t)rest), rest);
        if (kept != (ssize_t)rest) {
            if (kept >= 0)
                errno = EIO;
            return -1;
        }
        d->in_pipe = rest;
    }
    return 0;
}

/* A short read means the socket is (very likely) drained: not asking again
 * saves a syscall per message; level-triggered epoll reports what comes next. */
static int pump_splice(struct direction *d, atomic_uint_fast64_t *bytes)
{
    bool drained = false;

    for (int round = 0; round < PUMP_ROUNDS; round++) {
        bool progress = false;
        ssize_t n;

        if (!d->src_eof && !drained && d->small_reads && d->in_pipe == 0 && !d->aborted) {
            if (copy_small(d, bytes, &progress, &drained) < 0)
                return -1;
        } else if (!d->src_eof && !drained && d->in_pipe < d->pipe_cap) {
            uint64_t room = d->pipe_cap - d->in_pipe;
            n = splice(d->src, NULL, d->pipe_w, NULL, room, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0) {
                d->in_pipe += (uint64_t)n;
                drained = (uint64_t)n < room;
                d->small_reads = (uint64_t)n < COPY_BELOW;
                progress = true;
            } else if (n == 0) {
                d->src_eof = true;
                progress = true;
            } else if (errno == EAGAIN) {
                /* No data, or the pipe ran out of slots before bytes. */
                d->pipe_full = d->in_pipe > 0;
            } else if (errno != EINTR) {
                return -1;
            }
        }
        if (d->in_pipe > 0 && !d->aborted) {
            n = splice(d->pipe_r, NULL, d->dst, NULL, d->in_pipe,
                       SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0) {
                d->in_pipe -= (uint64_t)n;
                d->pipe_full = false;
            }
            if (account_write(d, n, bytes, &progress) < 0)
                return -1;
        }
        if (!progress)
            break;
    }
    return 0;
}

static int ring_read(struct conn *c, struct direction *d, bool *progress, bool *drained)
{
    uint8_t *span;
    size_t room;
    ssize_t n;

    if (d->ring.len == d->ring.cap && d->drop_when_full) {
        size_t dropped = ring_drop_oldest(&d->ring, d->ring.cap / RING_DROP_FRACTION,
                                          c->settings.record_bytes, d->tls_write_pending);
        const uint8_t *data;
        if (dropped) {
            atomic_fetch_add_explicit(&c->stats->overflow_events, 1, memory_order_relaxed);
            atomic_fetch_add_explicit(&c->stats->dropped_bytes, dropped, memory_order_relaxed);
        }
        /* The bytes OpenSSL took must stay contiguous for its retry. */
        if (ring_data_span(&d->ring, &data) < d->tls_write_pending &&
            ring_resize(&d->ring, d->ring.cap) < 0)
            return -1;
    }
    room = ring_free_span(&d->ring, &span);
    if (room == 0)
        return 0; /* block policy: the producer waits */
    n = direction_read(c, d, span, room);
    if (n > 0) {
        ring_commit(&d->ring, (size_t)n);
        /* TLS: OpenSSL may hold more than it returned (tls_has_pending). */
        *drained = (size_t)n < room && !d->src_tls;
        *progress = true;
    } else if (n == 0) {
        d->src_eof = true;
        *progress = true;
    } else if (errno != EAGAIN && errno != EINTR) {
        return -1;
    }
    return 0;
}

static int pump_ring(struct conn *c, struct direction *d, atomic_uint_fast64_t *bytes)
{
    bool drained = false;

    for (int round = 0; round < PUMP_ROUNDS; round++) {
        bool progress = false;
        const uint8_t *data;
        size_t len;
        ssize_t n;

        if (!d->src_eof && !drained && ring_read(c, d, &progress, &drained) < 0)
            return -1;
        len = ring_data_span(&d->ring, &data);
        if (len > 0 && !d->aborted) {
            n = direction_write(c, d, data, len);
            if (n > 0)
                ring_consume(&d->ring, (size_t)n);
            if (account_write(d, n, bytes, &progress) < 0)
                return -1;
        }
        if (!progress)
            break;
    }
    return 0;
}

void conn_account(struct conn *c)
{
    const struct direction *fwd = &c->dir[0];
    uint64_t held = direction_held(fwd), cap = direction_capacity(fwd);
    bool full = fwd->use_ring ? fwd->ring.len == fwd->ring.cap : (fwd->pipe_full ||
                                                                  fwd->in_pipe >= fwd->pipe_cap);

    atomic_fetch_add_explicit(&c->stats->buffered, held - c->counted_buffered,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&c->stats->buffer_capacity, cap - c->counted_capacity,
                              memory_order_relaxed);
    c->counted_buffered = held;
    c->counted_capacity = cap;
    /* Block policy: a full buffer holds the producer back. Counted per edge. */
    if (full && !c->dir[0].was_full && c->settings.policy == POLICY_BLOCK)
        atomic_fetch_add_explicit(&c->stats->full_events, 1, memory_order_relaxed);
    c->dir[0].was_full = full;
}

static int conn_handshake(struct conn *c)
{
    int rc = tls_handshake(c->tls, &c->handshake_want, c->why, sizeof c->why);

    if (rc <= 0) {
        if (rc < 0) {
            atomic_fetch_add_explicit(&c->stats->tls_failures, 1, memory_order_relaxed);
            errno = EPROTO;
        }
        return rc;
    }
    c->handshaking = false;
    log_msg(LOG_INFO, "%s ch%u: %s with %s (%s), kTLS %s", c->req->spec.id, c->channel,
            SSL_get_version(c->tls), c->req->spec.tls_peer, SSL_get_cipher_name(c->tls),
            tls_ktls_mode(c->tls));
    return 1;
}

bool conn_tls_input_pending(const struct conn *c)
{
    const struct direction *d;

    if (!c->tls || c->handshaking || c->closed)
        return false;
    d = &c->dir[c->tls_side];
    return !d->src_eof && !d->aborted && (d->drop_when_full || d->ring.len < d->ring.cap) &&
           tls_has_pending(d->src_tls);
}

unsigned conn_directions_for(const struct conn *c, int side, uint32_t events)
{
    unsigned dirs = 0;

    /* A TLS side's reads and writes both go through OpenSSL, which may need
     * the other event (a key update); hang-ups and errors end both ways. */
    if (!events || (events & (EPOLLHUP | EPOLLERR)) || (c->tls && side == c->tls_side))
        return CONN_BOTH_DIRECTIONS;
    if (events & EPOLLIN)
        dirs |= 1u << side;       /* its reads feed dir[side] */
    if (events & EPOLLOUT)
        dirs |= 1u << (1 - side); /* its room drains dir[1 - side] */
    return dirs;
}

int conn_pump(struct conn *c, unsigned dirs)
{
    static const int forward = 0;

    if (c->handshaking) {
        int rc = conn_handshake(c);
        if (rc <= 0)
            return rc;
        dirs = CONN_BOTH_DIRECTIONS;
    }

    for (int i = 0; i < 2; i++) {
        struct direction *d = &c->dir[i];
        atomic_uint_fast64_t *bytes = i == forward ? &c->stats->bytes_forward
                                                   : &c->stats->bytes_reverse;
        int rc = 0;

        if (dirs & (1u << i))
            rc = d->use_ring ? pump_ring(c, d, bytes) : pump_splice(d, bytes);
        if (rc < 0)
            return -1;
        direction_shutdown_if_drained(d);
    }
    conn_account(c);
    return direction_done(&c->dir[0]) && direction_done(&c->dir[1]) ? 1 : 0;
}

uint32_t conn_wanted_events(const struct conn *c, int side)
{
    const struct direction *reading = &c->dir[side];     /* side is its source */
    const struct direction *writing = &c->dir[1 - side]; /* side is its destination */
    uint32_t events = 0;

    if (c->connecting)
        return side == 1 ? EPOLLOUT : 0;
    if (c->handshaking)
        return side == c->tls_side ? c->handshake_want : 0;
    if (!reading->src_eof && !reading->aborted) {
        /* A drop-oldest ring always makes room by dropping. */
        bool room = reading->use_ring
                        ? reading->drop_when_full || reading->ring.len < reading->ring.cap
                        : !reading->pipe_full && reading->in_pipe < reading->pipe_cap;
        if (room)
            events |= EPOLLIN;
    }
    /* TLS may need to write (a key update) before it can read on. */
    if (reading->src_tls && reading->src_want == EPOLLOUT && !reading->src_eof)
        events |= EPOLLOUT;
    /* Held bytes: wait for room, or, when the pump stopped for fairness with
     * the socket still writable, come back at once (level-triggered). */
    if (!writing->aborted && (direction_held(writing) > 0 || writing->notify_pending))
        events |= writing->dst_blocked && writing->dst_tls && writing->dst_want
                      ? writing->dst_want
                      : EPOLLOUT;
    return events;
}

int conn_finish_connect(struct conn *c)
{
    int error = 0;
    socklen_t len = sizeof error;

    if (getsockopt(c->fd[1], SOL_SOCKET, SO_ERROR, &error, &len) < 0)
        return -1;
    if (error) {
        errno = error;
        return -1;
    }
    c->connecting = false;
    return 0;
}

void conn_side_hangup(struct conn *c, int side)
{
    /* A TLS side gone before its close_notify: the stream was cut. */
    if (c->tls && side == c->tls_side && !c->dir[side].src_eof)
        c->reset_on_close = true;
    /* Nothing more can be read from or written to this side. */
    c->dir[side].src_eof = true;
    c->dir[1 - side].aborted = true;
}

void conn_apply(struct conn *c, const struct relay_settings *settings, uint64_t pipe_max)
{
    for (int i = 0; i < 2; i++) {
        struct direction *d = &c->dir[i];

        if (d->use_ring) {
            if (ring_resize(&d->ring, settings->buffer_bytes) < 0)
                log_msg(LOG_WARN, "%s ch%u: buffer resize to %llu refused: %s (the ring holds more)",
                        c->req->spec.id, c->channel,
                        (unsigned long long)settings->buffer_bytes, strerror(errno));
        } else {
            int size = fcntl(d->pipe_w, F_SETPIPE_SZ,
                             (int)pipe_size_for(settings->buffer_bytes, pipe_max));
            if (size < 0)
                log_msg(LOG_WARN, "%s ch%u: buffer resize to %llu: %s (kept %llu)",
                        c->req->spec.id, c->channel,
                        (unsigned long long)settings->buffer_bytes, strerror(errno),
                        (unsigned long long)d->pipe_cap);
            else
                d->pipe_cap = (uint64_t)size;
        }
    }
    if (settings->pacing_bytes_per_s != c->settings.pacing_bytes_per_s &&
        socket_set_pacing(c->fd[1], settings->pacing_bytes_per_s) < 0)
        log_msg(LOG_WARN, "%s ch%u: rate unsupported: SO_MAX_PACING_RATE: %s", c->req->spec.id,
                c->channel, strerror(errno));
    /* The drop policy and record size apply to new connections only: a live
     * splice pipe cannot become a counting ring without copying its content. */
    c->settings.buffer_bytes = settings->buffer_bytes;
    c->settings.pacing_bytes_per_s = settings->pacing_bytes_per_s;
    conn_account(c);
}

void conn_free(struct conn *c)
{
    if (c->reset_on_close) {
        /* The peer gateway's stream was cut (no close_notify): reset the
         * plain side rather than end it as if the stream were complete. */
        struct linger abort_close = {.l_onoff = 1, .l_linger = 0};
        (void)setsockopt(c->fd[1 - c->tls_side], SOL_SOCKET, SO_LINGER, &abort_close,
                         sizeof abort_close);
    }
    SSL_free(c->tls);
    atomic_fetch_sub_explicit(&c->stats->buffered, c->counted_buffered, memory_order_relaxed);
    atomic_fetch_sub_explicit(&c->stats->buffer_capacity, c->counted_capacity,
                              memory_order_relaxed);
    direction_close(&c->dir[0]);
    direction_close(&c->dir[1]);
    close(c->fd[0]);
    close(c->fd[1]);
    free(c);
}
