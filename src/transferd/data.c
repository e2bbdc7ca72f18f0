#include "data.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/sendfile.h>
#include <time.h>
#include <unistd.h>

#include "filesink.h"
#include "modee.h"
#include "netaddr.h"

double monotonic_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double xfer_imbalance(const struct xfer_stats *stats)
{
    double min_start = 0, min_end = 0, max_end = 0;
    unsigned used = 0;

    for (unsigned i = 0; i < stats->streams; i++) {
        const struct stream_stats *s = &stats->stream[i];
        if (s->bytes == 0)
            continue;
        if (used == 0 || s->first < min_start)
            min_start = s->first;
        if (used == 0 || s->last < min_end)
            min_end = s->last;
        if (used == 0 || s->last > max_end)
            max_end = s->last;
        used++;
    }
    if (used < 2 || max_end <= min_start)
        return 0.0;
    return (max_end - min_end) / (max_end - min_start);
}

void xfer_format_retrans(const struct xfer_stats *stats, char *buf, size_t len)
{
    size_t used = 0;

    buf[0] = '\0';
    for (unsigned i = 0; i < stats->streams && used < len; i++) {
        int n = snprintf(buf + used, len - used, "%s%" PRIu32, i ? "," : "",
                         stats->stream[i].retrans);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

void data_cache_close(struct data_cache *cache)
{
    for (unsigned i = 0; i < cache->count; i++)
        close(cache->fds[i]);
    cache->count = 0;
    for (unsigned i = 0; i < DATA_STREAMS_MAX; i++) {
        stream_thread_stop(&cache->threads[i]);
        file_sink_close(&cache->sinks[i]);
    }
}

static uint32_t tcp_retransmits(int fd)
{
    struct tcp_info info;
    socklen_t len = sizeof info;

    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) < 0)
        return 0;
    return info.tcpi_total_retrans;
}

void data_cache_add(struct data_cache *cache, int fd)
{
    cache->retrans_seen[cache->count] = tcp_retransmits(fd);
    cache->fds[cache->count++] = fd;
}

/* Buffers before connect/listen so the window scale covers them; pacing and
 * the idle timeout on the connected socket. Failures are errors: a DTN that
 * asked for 64 MiB buffers must not silently run with the default. */
static int apply_buffers(int fd, const struct data_tuning *tuning, char *err, size_t errlen)
{
    if (tuning->sndbuf > 0 &&
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &tuning->sndbuf, sizeof tuning->sndbuf) < 0) {
        snprintf(err, errlen, "SO_SNDBUF %d: %s", tuning->sndbuf, strerror(errno));
        return -1;
    }
    if (tuning->rcvbuf > 0 &&
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &tuning->rcvbuf, sizeof tuning->rcvbuf) < 0) {
        snprintf(err, errlen, "SO_RCVBUF %d: %s", tuning->rcvbuf, strerror(errno));
        return -1;
    }
    return 0;
}

static int apply_connected(int fd, const struct data_tuning *tuning, char *err, size_t errlen)
{
    /* Block headers go out with MSG_MORE and join their payload; what is
     * left small is a file's last block or its EOD, which the receiver
     * waits for: Nagle must not hold it back for an ACK. */
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) {
        snprintf(err, errlen, "TCP_NODELAY: %s", strerror(errno));
        return -1;
    }
    if (tuning->pacing_rate) {
        /* SO_MAX_PACING_RATE takes bytes per second. */
        uint64_t rate = tuning->pacing_rate / 8;
        if (setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, sizeof rate) < 0) {
            snprintf(err, errlen, "SO_MAX_PACING_RATE: %s", strerror(errno));
            return -1;
        }
    }
    if (tuning->idle_timeout_s > 0) {
        struct timeval tv = {.tv_sec = tuning->idle_timeout_s};
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0) {
            snprintf(err, errlen, "SO_RCVTIMEO: %s", strerror(errno));
            return -1;
        }
    }
    return 0;
}

int data_listen(const struct sockaddr_storage *local, uint16_t port_lo, uint16_t port_hi,
                const struct data_tuning *tuning, struct sockaddr_storage *bound,
                char *err, size_t errlen)
{
    unsigned span = (unsigned)(port_hi - port_lo) + 1;
    /* Start at a random place in the range so concurrent sessions rarely
     * race for the same port. */
    unsigned first = (unsigned)(monotonic_seconds() * 1e6) % span;

    for (unsigned i = 0; i < span; i++) {
        int fd = socket(local->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            snprintf(err, errlen, "data socket: %s", strerror(errno));
            return -1;
        }
        /* The previous data connection on this port may sit in TIME_WAIT
         * (the server closes listings first); that must not use the port
         * up. Linux still refuses two listeners on one port. */
        int one = 1;
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0) {
            snprintf(err, errlen, "SO_REUSEADDR: %s", strerror(errno));
            close(fd);
            return -1;
        }
        if (apply_buffers(fd, tuning, err, errlen) < 0) {
            close(fd);
            return -1;
        }
        *bound = *local;
        netaddr_set_port(bound, (uint16_t)(port_lo + (first + i) % span));
        socklen_t len = sizeof *bound;
        if (bind(fd, (struct sockaddr *)bound, netaddr_len(bound)) == 0 &&
            listen(fd, DATA_STREAMS_MAX) == 0 &&
            getsockname(fd, (struct sockaddr *)bound, &len) == 0)
            return fd;
        int saved = errno;
        close(fd);
        if (saved != EADDRINUSE) {
            snprintf(err, errlen, "data port %u: %s", (unsigned)netaddr_port(bound),
                     strerror(saved));
            return -1;
        }
    }
    snprintf(err, errlen, "every data port in %u-%u is in use", (unsigned)port_lo,
             (unsigned)port_hi);
    return -1;
}

int data_connect(const struct sockaddr_storage *peer, const struct data_tuning *tuning,
                 char *err, size_t errlen)
{
    char where[80];
    int fd = socket(peer->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        snprintf(err, errlen, "data socket: %s", strerror(errno));
        return -1;
    }
    if (apply_buffers(fd, tuning, err, errlen) < 0)
        goto fail;
    while (connect(fd, (const struct sockaddr *)peer, netaddr_len(peer)) < 0) {
        if (errno == EINTR)
            continue;
        netaddr_format(peer, where, sizeof where);
        snprintf(err, errlen, "data connection to %s: %s", where, strerror(errno));
        goto fail;
    }
    if (apply_connected(fd, tuning, err, errlen) < 0)
        goto fail;
    return fd;
fail:
    close(fd);
    return -1;
}

int data_accept(int listen_fd, const struct sockaddr_storage *allowed_peer,
                const struct data_tuning *tuning, int timeout_ms, unsigned *refused,
                char *err, size_t errlen)
{
    struct pollfd pfd = {.fd = listen_fd, .events = POLLIN};

    for (;;) {
        struct sockaddr_storage from;
        socklen_t from_len = sizeof from;
        int rc = poll(&pfd, 1, timeout_ms), fd;

        if (rc < 0 && errno == EINTR)
            continue;
        if (rc == 0) {
            snprintf(err, errlen, "no data connection within %d ms", timeout_ms);
            return -1;
        }
        if (rc < 0) {
            snprintf(err, errlen, "poll: %s", strerror(errno));
            return -1;
        }
        fd = accept4(listen_fd, (struct sockaddr *)&from, &from_len, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            snprintf(err, errlen, "accept: %s", strerror(errno));
            return -1;
        }
        /* Only the control connection's host may open data connections:
         * anyone else could otherwise inject into or steal a transfer. */
        if (allowed_peer && !netaddr_same_host(&from, allowed_peer)) {
            close(fd);
            if (refused)
                (*refused)++;
            continue;
        }
        if (apply_connected(fd, tuning, err, errlen) < 0) {
            close(fd);
            return -1;
        }
        return fd;
    }
}

static int write_all(int fd, const void *buf, size_t len, int flags)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = send(fd, p, len, flags | MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
    char *p = buf;

    while (len > 0) {
        ssize_t n = recv(fd, p, len, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0) {
            errno = ECONNRESET;
            return p == buf ? 0 : -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 1;
}

/* A stream moved bytes: its count, its first and last moments (for the
 * imbalance metric), and the client's progress counter if there is one. */
static void count_moved(struct stream_stats *stats, double t0, uint64_t bytes,
                        atomic_uint_least64_t *progress)
{
    double now = monotonic_seconds() - t0;

    if (stats->bytes == 0)
        stats->first = now;
    stats->last = now;
    stats->bytes += bytes;
    if (progress)
        atomic_fetch_add(progress, bytes);
}

/* sendfile until len bytes of file_fd from offset went out. */
static int sendfile_all(int sock, int file_fd, uint64_t offset, uint64_t len)
{
    off_t off = (off_t)offset;

    while (len > 0) {
        size_t want = len > (1u << 30) ? (1u << 30) : (size_t)len;
        ssize_t n = sendfile(sock, file_fd, &off, want);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0) {
            errno = ENODATA;   /* the file shrank under us */
            return -1;
        }
        len -= (uint64_t)n;
    }
    return 0;
}

/* ---- MODE E sending ---------------------------------------------------- */

struct send_shared {
    const struct modee_send_job *job;
    pthread_mutex_t lock;
    uint64_t cursor;        /* next file offset not yet handed to a stream */
    unsigned nfds;
    uint64_t block;
    bool failed;
    char err[256];
    double t0;
};

/* Blocks small enough that every stream gets several: the tail a slow
 * stream can leave is one block, so the finish stays even (the study's
 * imbalance) without making big files pay a header per few KiB. */
static uint64_t block_size_for(const struct modee_send_job *job, unsigned nfds)
{
    uint64_t block = job->tuning->block_size ? job->tuning->block_size : DATA_BLOCK_DEFAULT;
    uint64_t share = (job->end - job->start) / ((uint64_t)nfds * 8);

    if (share < block)
        block = share < DATA_BLOCK_MIN ? DATA_BLOCK_MIN : share;
    return block;
}

struct send_worker {
    struct send_shared *shared;
    int fd;
    unsigned index;
    struct stream_stats *stats;
    uint32_t *retrans_seen;  /* the connection's count when its last transfer ended */
};

/* Near the end of the file, blocks shrink with what is left (guided
 * self-scheduling): each stream's last block, which sets how far apart the
 * streams finish, is then small, and a stream that frees up late is not
 * handed a full-size one. Page multiples, never under DATA_BLOCK_MIN. */
static uint64_t tail_block(const struct send_shared *shared, uint64_t cursor)
{
    uint64_t share = (shared->job->end - cursor) / (2 * (uint64_t)shared->nfds) & ~4095ULL;

    if (share >= shared->block)
        return shared->block;
    return share > DATA_BLOCK_MIN ? share : DATA_BLOCK_MIN;
}

/* The next block to send, skipping what the receiver already has: false when
 * the file is done or the transfer failed. */
static bool next_block(struct send_shared *shared, uint64_t *offset, uint64_t *len)
{
    const struct modee_send_job *job = shared->job;
    bool found = false;

    pthread_mutex_lock(&shared->lock);
    while (!shared->failed && shared->cursor < job->end) {
        uint64_t start = shared->cursor, end = start + tail_block(shared, start);
        if (end > job->end)
            end = job->end;
        if (job->skip) {
            uint64_t shifted = start - job->offset_shift;
            for (unsigned i = 0; i < job->skip->count; i++) {
                const struct ftp_range *r = &job->skip->r[i];
                if (r->start <= shifted && shifted < r->end) {
                    start = r->end + job->offset_shift;   /* inside: jump past */
                    break;
                }
                if (r->start > shifted && r->start + job->offset_shift < end) {
                    end = r->start + job->offset_shift;   /* stop before the next one */
                    break;
                }
            }
            if (start >= job->end) {
                shared->cursor = job->end;
                break;
            }
            if (start != shared->cursor) {
                shared->cursor = start;
                continue;
            }
        }
        *offset = start;
        *len = end - start;
        shared->cursor = end;
        found = true;
        break;
    }
    pthread_mutex_unlock(&shared->lock);
    return found;
}

static void send_fail(struct send_shared *shared, const char *what, int err)
{
    pthread_mutex_lock(&shared->lock);
    if (!shared->failed) {
        shared->failed = true;
        snprintf(shared->err, sizeof shared->err, "%s: %s", what, strerror(err));
    }
    pthread_mutex_unlock(&shared->lock);
}

static void *send_worker_run(void *arg)
{
    struct send_worker *w = arg;
    struct send_shared *shared = w->shared;
    const struct modee_send_job *job = shared->job;
    uint8_t header[MODEE_HEADER_LEN];
    uint64_t offset, len;

    while (next_block(shared, &offset, &len)) {
        struct modee_header h = {0, len, offset - job->offset_shift};
        modee_encode(&h, header);
        if (write_all(w->fd, header, sizeof header, MSG_MORE) < 0 ||
            sendfile_all(w->fd, job->file_fd, offset, len) < 0) {
            send_fail(shared, errno == ENODATA ? "source file" : "data connection", errno);
            break;
        }
        count_moved(w->stats, shared->t0, len, job->progress);
    }
    if (!shared->failed) {
        /* Every stream ends with EOD; the first also carries EOF, whose
         * offset field tells the receiver how many EODs to wait for. */
        struct modee_header h = {MODEE_EOD, 0, 0};
        if (w->index == 0) {
            h.descriptor |= MODEE_EOF;
            h.offset = shared->nfds;
        }
        if (job->close_after)
            h.descriptor |= MODEE_CLOSE;
        modee_encode(&h, header);
        if (write_all(w->fd, header, sizeof header, 0) < 0)
            send_fail(shared, "data connection", errno);
    }
    uint32_t retrans = tcp_retransmits(w->fd);
    w->stats->retrans = retrans - *w->retrans_seen;
    *w->retrans_seen = retrans;
    return NULL;
}

int modee_send(struct data_cache *cache, const struct modee_send_job *job,
               struct xfer_stats *stats, char *err, size_t errlen)
{
    unsigned nfds = cache->count;
    struct send_shared shared = {.job = job, .cursor = job->start, .nfds = nfds,
                                 .block = block_size_for(job, nfds ? nfds : 1),
                                 .t0 = monotonic_seconds()};
    struct send_worker workers[DATA_STREAMS_MAX];
    unsigned started = 0;

    memset(stats, 0, sizeof *stats);
    if (nfds == 0 || nfds > DATA_STREAMS_MAX) {
        snprintf(err, errlen, "MODE E needs 1 to %d data connections", DATA_STREAMS_MAX);
        return -1;
    }
    pthread_mutex_init(&shared.lock, NULL);
    stats->streams = nfds;
    /* What fits in one block goes out from this thread, one stream after
     * the other: handing a small file to a thread per stream costs more in
     * wakeups than sending it. */
    bool one_block = job->end - job->start <= shared.block;
    for (unsigned i = 0; i < nfds; i++) {
        workers[i] = (struct send_worker){&shared, cache->fds[i], i, &stats->stream[i],
                                          &cache->retrans_seen[i]};
        if (one_block) {
            send_worker_run(&workers[i]);
            continue;
        }
        int rc = stream_thread_start(&cache->threads[i], send_worker_run, &workers[i]);
        if (rc != 0) {
            send_fail(&shared, "pthread_create", rc);
            break;
        }
        started++;
    }
    for (unsigned i = 0; i < started; i++)
        stream_thread_join(&cache->threads[i]);
    pthread_mutex_destroy(&shared.lock);
    stats->seconds = monotonic_seconds() - shared.t0;
    for (unsigned i = 0; i < nfds; i++)
        stats->bytes += stats->stream[i].bytes;
    if (shared.failed) {
        snprintf(err, errlen, "%s", shared.err);
        return -1;
    }
    return 0;
}

/* ---- MODE E receiving -------------------------------------------------- */

/* modee_recv() polls these before any connection: wake, listener, watch. */
#define RECV_POLL_FIXED 3

struct recv_shared {
    struct modee_recv_job *job;
    pthread_mutex_t lock;
    bool threaded;          /* past one block: connections get a thread each */
    int wake_fd;            /* eventfd, once threaded: a stream finished or failed */
    unsigned eods;
    uint64_t eods_expected; /* 0 until the EOF block arrives */
    int write_errno;
    bool failed;
    char err[256];
    double t0;
};

struct recv_worker {
    struct recv_shared *shared;
    int fd;
    bool keep;              /* EOD without CLOSE: cache the connection */
    bool done;
    uint32_t retrans0;
    struct stream_stats *stats;
    struct file_sink *sink;
    bool threaded;          /* read by a thread of its own, not by modee_recv()'s poll */
    uint8_t raw[MODEE_HEADER_LEN];
    size_t have;            /* of the next block's header, read so far */
};

static void recv_wake(struct recv_shared *shared)
{
    uint64_t one = 1;

    if (shared->wake_fd < 0)   /* not threaded: nobody to wake */
        return;
    if (write(shared->wake_fd, &one, sizeof one) < 0) {
        /* An eventfd write fails only on counter overflow; the waiter
         * rechecks the state on its next timeout anyway. */
    }
}

static void recv_fail(struct recv_shared *shared, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void recv_fail(struct recv_shared *shared, const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock(&shared->lock);
    if (!shared->failed) {
        shared->failed = true;
        va_start(ap, fmt);
        vsnprintf(shared->err, sizeof shared->err, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&shared->lock);
    recv_wake(shared);
}

/* The file could not take the data: the errno is kept (ENOSPC and EDQUOT
 * get their own reply code) along with the failure. */
static void recv_write_failed(struct recv_shared *shared, const char *what, int err)
{
    pthread_mutex_lock(&shared->lock);
    if (!shared->write_errno)
        shared->write_errno = err;
    pthread_mutex_unlock(&shared->lock);
    recv_fail(shared, "%s: %s", what, strerror(err));
}

static int recv_payload(struct recv_worker *w, uint64_t offset, uint64_t count)
{
    struct recv_shared *shared = w->shared;
    struct modee_recv_job *job = shared->job;

    while (count > 0) {
        enum sink_failure failure;
        ssize_t n = file_sink_move(w->sink, w->fd, job->file_fd, offset + job->offset_shift,
                                   count < SIZE_MAX ? (size_t)count : SIZE_MAX, &failure);
        if (n <= 0 && failure == SINK_FILE) {
            recv_write_failed(shared, "writing the file", errno);
            return -1;
        }
        if (n <= 0) {
            recv_fail(shared, "data connection closed inside a block (%s)",
                      n == 0 ? "end of stream" : strerror(errno));
            return -1;
        }
        pthread_mutex_lock(&shared->lock);
        bool added = ftp_ranges_add(job->received, offset, offset + (uint64_t)n);
        pthread_mutex_unlock(&shared->lock);
        if (!added) {
            recv_fail(shared, "%s", "blocks arrive too scattered to track (more than 64 holes)");
            return -1;
        }
        count_moved(w->stats, shared->t0, (uint64_t)n, job->progress);
        offset += (uint64_t)n;
        count -= (uint64_t)n;
    }
    return 0;
}

/* One block whose header is in raw: its payload into the file, then its
 * flags. 0: more blocks follow; 1: the stream's EOD; -1: failed. */
static int recv_block(struct recv_worker *w, const uint8_t *raw)
{
    struct recv_shared *shared = w->shared;
    struct modee_header h;
    char reason[160];

    if (modee_decode(raw, &h, reason, sizeof reason) < 0) {
        recv_fail(shared, "%s", reason);
        return -1;
    }
    if (h.count && recv_payload(w, h.offset, h.count) < 0)
        return -1;
    if (h.descriptor & MODEE_EOF) {
        pthread_mutex_lock(&shared->lock);
        shared->eods_expected = h.offset;
        pthread_mutex_unlock(&shared->lock);
    }
    if (h.descriptor & MODEE_EOD) {
        w->keep = !(h.descriptor & MODEE_CLOSE);
        return 1;
    }
    return 0;
}

static void recv_ended_early(struct recv_worker *w, ssize_t rc)
{
    recv_fail(w->shared, "data connection ended before EOD (%s)",
              rc == 0 ? "closed by the sender" : strerror(errno));
}

/* The stream is over, by its EOD or by a failure. */
static void recv_worker_end(struct recv_worker *w, bool eod)
{
    struct recv_shared *shared = w->shared;
    uint32_t retrans = tcp_retransmits(w->fd);

    w->stats->retrans = retrans - w->retrans0;
    w->retrans0 = retrans;   /* the baseline for the connection's next transfer */
    /* The EOD is counted and the worker marked done in one step: the waiter
     * may end the transfer as soon as the count is complete, and must never
     * take a stream that reached its EOD for one still reading (and cut it,
     * losing the connection the sender goes on using for the next file). */
    pthread_mutex_lock(&shared->lock);
    if (eod)
        shared->eods++;
    w->done = true;
    pthread_mutex_unlock(&shared->lock);
    recv_wake(shared);
}

/* A connection's own thread; it may take over from the poll in the middle
 * of a header. */
static void *recv_worker_run(void *arg)
{
    struct recv_worker *w = arg;
    int rc;

    do {
        rc = read_all(w->fd, w->raw + w->have, sizeof w->raw - w->have);
        if (rc <= 0) {
            recv_ended_early(w, rc);
            rc = -1;
            break;
        }
        w->have = 0;
        rc = recv_block(w, w->raw);
    } while (rc == 0);
    recv_worker_end(w, rc > 0);
    return NULL;
}

/* A connection read by modee_recv()'s poll: takes what it holds, without
 * waiting for a header that has not arrived. A payload whose header is in
 * is waited for: the sender wrote the two together, and it is on its way.
 * Past one block it returns to the poll, which then hands the connections
 * to threads (a steady stream would otherwise keep it here, the other
 * connections and the markers waiting). True when the stream is over. */
static bool recv_step(struct recv_worker *w)
{
    for (;;) {
        ssize_t n = recv(w->fd, w->raw + w->have, sizeof w->raw - w->have, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return false;
        if (n <= 0) {
            recv_ended_early(w, n);
            recv_worker_end(w, false);
            return true;
        }
        w->have += (size_t)n;
        if (w->have < sizeof w->raw)
            continue;
        w->have = 0;
        int rc = recv_block(w, w->raw);
        if (rc != 0) {
            recv_worker_end(w, rc > 0);
            return true;
        }
        if (w->stats->bytes > DATA_BLOCK_MIN)
            return false;
    }
}

/* Hands a connection to its thread. Where no thread can be had, it stays
 * with the poll, which serves any size, only without parallelism. */
static void recv_thread_up(struct recv_worker *w, struct stream_thread *thread)
{
    w->threaded = stream_thread_start(thread, recv_worker_run, w) == 0;
}

/* A connection joins the transfer. retrans0: its TCP retransmissions so far. */
static void recv_start(struct recv_shared *shared, struct recv_worker *workers, unsigned *count,
                       struct xfer_stats *stats, int fd, uint32_t retrans0)
{
    struct recv_worker *w = &workers[*count];

    if (*count == DATA_STREAMS_MAX) {
        close(fd);
        recv_fail(shared, "%s", "more data connections than the limit allows");
        return;
    }
    *w = (struct recv_worker){.shared = shared, .fd = fd, .retrans0 = retrans0,
                              .stats = &stats->stream[*count],
                              .sink = &shared->job->cache->sinks[*count]};
    if (shared->threaded)
        recv_thread_up(w, &shared->job->cache->threads[*count]);
    (*count)++;
    stats->streams = *count;
}

/* Most files (the study's median is 32 KB) fit in a block or two: one
 * thread polling every connection receives them faster than a thread per
 * connection, which must be woken and joined per file. Past one block, the
 * connections get their threads, for parallel receiving. */
static void recv_go_threaded(struct recv_shared *shared, struct recv_worker *workers,
                             unsigned count)
{
    shared->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (shared->wake_fd < 0)
        return;   /* the poll goes on serving: slower, not wrong */
    shared->threaded = true;
    for (unsigned i = 0; i < count; i++)
        if (!workers[i].done)
            recv_thread_up(&workers[i], &shared->job->cache->threads[i]);
}

static uint64_t recv_bytes(const struct xfer_stats *stats)
{
    uint64_t bytes = 0;

    for (unsigned i = 0; i < stats->streams; i++)
        bytes += stats->stream[i].bytes;
    return bytes;
}

static bool recv_finished(struct recv_shared *shared)
{
    bool finished;

    pthread_mutex_lock(&shared->lock);
    finished = shared->failed ||
               (shared->eods_expected && shared->eods >= shared->eods_expected);
    pthread_mutex_unlock(&shared->lock);
    return finished;
}

/* Markers claim only what an fdatasync has made durable: the ranges are
 * copied first, then synced, then reported. */
static void recv_marker(struct recv_shared *shared)
{
    struct modee_recv_job *job = shared->job;
    struct ftp_ranges snapshot;

    if (!job->marker)
        return;
    pthread_mutex_lock(&shared->lock);
    snapshot = *job->received;
    pthread_mutex_unlock(&shared->lock);
    if (fdatasync(job->file_fd) < 0) {
        recv_write_failed(shared, "fdatasync", errno);
        return;
    }
    job->marker(job->marker_ctx, &snapshot);
}

/* A failed receive resets its connections. A plain close after shutdown
 * sends a FIN, and a sender blocked on our zero window never learns of it:
 * it waits out tcp_fin_timeout (60 s) before its next write fails. */
static void close_with_reset(int fd)
{
    struct linger abort_now = {.l_onoff = 1, .l_linger = 0};

    if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_now, sizeof abort_now) < 0) {
        /* Then a plain close: the sender fails later, not never. */
    }
    close(fd);
}

int modee_recv(struct modee_recv_job *job, struct xfer_stats *stats, char *err, size_t errlen)
{
    struct recv_shared shared = {.job = job, .t0 = monotonic_seconds()};
    struct recv_worker workers[DATA_STREAMS_MAX];
    unsigned count = 0;
    double next_marker;
    int interval = job->marker_interval_ms > 0 ? job->marker_interval_ms : 5000;
    int idle_ms = (job->tuning->idle_timeout_s > 0 ? job->tuning->idle_timeout_s : 300) * 1000;
    double last_activity = shared.t0;

    memset(stats, 0, sizeof *stats);
    shared.wake_fd = -1;
    pthread_mutex_init(&shared.lock, NULL);
    for (unsigned i = 0; i < job->cache->count; i++)
        recv_start(&shared, workers, &count, stats, job->cache->fds[i],
                   job->cache->retrans_seen[i]);
    job->cache->count = 0;
    next_marker = shared.t0 + interval / 1000.0;
    if (job->watch) {
        char reason[200];
        if (job->watch(job->watch_ctx, reason, sizeof reason))
            recv_fail(&shared, "%s", reason);
    }

    while (!recv_finished(&shared)) {
        /* The wake eventfd, the listener and the control channel, where a
         * sender that gave up says so (poll ignores -1), and the
         * connections without a thread. */
        struct pollfd pfd[RECV_POLL_FIXED + DATA_STREAMS_MAX] = {
            {.fd = shared.wake_fd, .events = POLLIN},
            {.fd = job->listen_fd, .events = POLLIN},
            {.fd = job->watch ? job->watch_fd : -1, .events = POLLIN}};
        nfds_t npfd = RECV_POLL_FIXED;
        for (unsigned i = 0; i < count; i++)
            pfd[npfd++] = (struct pollfd){
                .fd = workers[i].threaded || workers[i].done ? -1 : workers[i].fd,
                .events = POLLIN};
        int timeout = (int)((next_marker - monotonic_seconds()) * 1000);
        int rc = poll(pfd, npfd, timeout < 0 ? 0 : timeout);
        double now = monotonic_seconds();

        if (rc < 0 && errno != EINTR) {
            recv_fail(&shared, "poll: %s", strerror(errno));
            break;
        }
        if (rc > 0 && (pfd[0].revents & POLLIN)) {
            uint64_t drained;
            if (read(shared.wake_fd, &drained, sizeof drained) < 0) {
                /* Nonblocking: EAGAIN means another wake was already read. */
            }
            last_activity = now;
        }
        if (rc > 0 && (pfd[1].revents & POLLIN)) {
            char reason[160];
            int fd = data_accept(job->listen_fd, job->allowed_peer, job->tuning, 0,
                                 job->refused, reason, sizeof reason);
            if (fd >= 0) {
                recv_start(&shared, workers, &count, stats, fd, tcp_retransmits(fd));
                last_activity = now;
            }
        }
        for (nfds_t i = RECV_POLL_FIXED; rc > 0 && i < npfd; i++)
            if (pfd[i].revents) {
                recv_step(&workers[i - RECV_POLL_FIXED]);
                last_activity = now;
            }
        if (!shared.threaded && recv_bytes(stats) > DATA_BLOCK_MIN)
            recv_go_threaded(&shared, workers, count);
        if (rc > 0 && pfd[2].revents) {
            char reason[200];
            if (job->watch(job->watch_ctx, reason, sizeof reason))
                recv_fail(&shared, "%s", reason);
        }
        if (now >= next_marker) {
            recv_marker(&shared);
            next_marker = now + interval / 1000.0;
        }
        if (count == 0 && now - last_activity > idle_ms / 1000.0)
            recv_fail(&shared, "%s", "no data connection opened by the sender");
    }
    /* A failure, or every EOD in: streams still reading (a failure, or a
     * connection the sender did not use) are woken by shutdown. */
    bool cut[DATA_STREAMS_MAX] = {false};
    pthread_mutex_lock(&shared.lock);
    for (unsigned i = 0; i < count; i++)
        if (shared.failed || !workers[i].done) {
            cut[i] = true;
            shutdown(workers[i].fd, SHUT_RDWR);
        }
    pthread_mutex_unlock(&shared.lock);
    for (unsigned i = 0; i < count; i++)
        if (workers[i].threaded)
            stream_thread_join(&job->cache->threads[i]);
    /* What was written before a failure is reported too, if it can be
     * synced: a sender vanishing or a disk filling up mid-file is what
     * restart markers exist for. */
    recv_marker(&shared);
    for (unsigned i = 0; i < count; i++) {
        stats->bytes += stats->stream[i].bytes;
        if (!shared.failed && !cut[i] && workers[i].keep) {
            job->cache->retrans_seen[job->cache->count] = workers[i].retrans0;
            job->cache->fds[job->cache->count++] = workers[i].fd;
        } else if (shared.failed)
            close_with_reset(workers[i].fd);
        else
            close(workers[i].fd);
    }
    job->cache->sending = false;
    stats->seconds = monotonic_seconds() - shared.t0;
    stats->write_errno = shared.write_errno;
    if (shared.wake_fd >= 0)
        close(shared.wake_fd);
    pthread_mutex_destroy(&shared.lock);
    if (shared.failed) {
        snprintf(err, errlen, "%s", shared.err);
        return -1;
    }
    return 0;
}

/* ---- MODE S ------------------------------------------------------------ */

int stream_send_fd(int sock, int file_fd, uint64_t start, uint64_t end,
                   struct xfer_stats *stats, char *err, size_t errlen)
{
    double t0 = monotonic_seconds();

    memset(stats, 0, sizeof *stats);
    stats->streams = 1;
    if (sendfile_all(sock, file_fd, start, end - start) < 0) {
        snprintf(err, errlen, "sending: %s", strerror(errno));
        return -1;
    }
    stats->bytes = stats->stream[0].bytes = end - start;
    stats->seconds = stats->stream[0].last = monotonic_seconds() - t0;
    return 0;
}

int stream_send_buf(int sock, const char *buf, size_t len, char *err, size_t errlen)
{
    if (write_all(sock, buf, len, 0) < 0) {
        snprintf(err, errlen, "sending: %s", strerror(errno));
        return -1;
    }
    return 0;
}

int stream_recv_fd(int sock, int file_fd, uint64_t start, struct xfer_stats *stats,
                   char *err, size_t errlen)
{
    struct file_sink sink = {0};
    double t0 = monotonic_seconds();
    int rc = -1;

    memset(stats, 0, sizeof *stats);
    stats->streams = 1;
    for (;;) {
        enum sink_failure failure;
        ssize_t n = file_sink_move(&sink, sock, file_fd, start + stats->bytes, SIZE_MAX, &failure);
        if (n == 0)
            break;
        if (n < 0 && failure == SINK_FILE) {
            stats->write_errno = errno;
            snprintf(err, errlen, "writing the file: %s", strerror(errno));
            goto out;
        }
        if (n < 0) {
            snprintf(err, errlen, "receiving: %s", strerror(errno));
            goto out;
        }
        stats->bytes += (uint64_t)n;
    }
    stats->stream[0].bytes = stats->bytes;
    stats->seconds = stats->stream[0].last = monotonic_seconds() - t0;
    rc = 0;
out:
    file_sink_close(&sink);
    return rc;
}
