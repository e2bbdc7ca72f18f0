/* The data channels of one session and the transfers over them: MODE E with
 * parallel streams (a thread per stream; the file is handed out in blocks
 * as streams free up, so no stream is left with a long tail; a file of
 * about one block is moved by the calling thread alone) and MODE S
 * (one connection, closed at the end; for listings and plain FTP clients).
 * Shared by the server and the client: both send and both receive. */
#ifndef SDMZ_DATA_H
#define SDMZ_DATA_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "filesink.h"
#include "ftp.h"
#include "streamthread.h"

#define DATA_STREAMS_MAX 32
#define DATA_BLOCK_DEFAULT (4u << 20)
#define DATA_BLOCK_MIN (256u << 10)

/* Socket settings from the DTN tuning (0: the kernel's autotuning). */
struct data_tuning {
    int sndbuf;
    int rcvbuf;
    uint64_t pacing_rate;   /* bits per second per stream, 0: none */
    uint32_t block_size;    /* bytes per MODE E block */
    int idle_timeout_s;     /* a data connection silent this long fails the transfer */
};

struct stream_stats {
    uint64_t bytes;
    double first;           /* seconds since the transfer started: first and */
    double last;            /* last payload byte moved on this stream */
    uint32_t retrans;       /* TCP retransmissions during the transfer */
};

struct xfer_stats {
    unsigned streams;
    struct stream_stats stream[DATA_STREAMS_MAX];
    uint64_t bytes;
    double seconds;
    int write_errno;        /* receiving: why writing the file failed (ENOSPC...) */
};

/* The study's relative imbalance (its eq. 4): the spread of the streams'
 * finishing times over the transfer's duration; 0 with one stream. */
double xfer_imbalance(const struct xfer_stats *stats);
/* "2,0,4" */
void xfer_format_retrans(const struct xfer_stats *stats, char *buf, size_t len);

/* Open MODE E connections kept between transfers (GridFTP's data channel
 * caching): the next transfer in the same direction reuses them, and the
 * threads and receiving pipes that served them. A zeroed cache is empty. */
struct data_cache {
    int fds[DATA_STREAMS_MAX];
    unsigned count;
    bool sending;           /* the direction they were opened for */
    uint32_t retrans_seen[DATA_STREAMS_MAX];   /* TCP retransmissions each connection
                                                  had when its last transfer ended */
    struct stream_thread threads[DATA_STREAMS_MAX];
    struct file_sink sinks[DATA_STREAMS_MAX];
};
/* Adds a connection just opened. */
void data_cache_add(struct data_cache *cache, int fd);
/* Closes the connections and ends the threads. */
void data_cache_close(struct data_cache *cache);

/* Sockets. */
int data_listen(const struct sockaddr_storage *local, uint16_t port_lo, uint16_t port_hi,
                const struct data_tuning *tuning, struct sockaddr_storage *bound,
                char *err, size_t errlen);
int data_connect(const struct sockaddr_storage *peer, const struct data_tuning *tuning,
                 char *err, size_t errlen);
/* Accepts one connection from allowed_peer's address (others are closed and
 * counted in refused); waits at most timeout_ms. */
int data_accept(int listen_fd, const struct sockaddr_storage *allowed_peer,
                const struct data_tuning *tuning, int timeout_ms, unsigned *refused,
                char *err, size_t errlen);

/* MODE E sending of file bytes [start, end) minus the ranges in skip. Block
 * offsets are file offset - offset_shift (ERET sends a region as if it were
 * a file of its own). One EOF goes out, counting every connection. */
struct modee_send_job {
    int file_fd;
    uint64_t start;
    uint64_t end;
    uint64_t offset_shift;
    const struct ftp_ranges *skip;
    const struct data_tuning *tuning;
    bool close_after;       /* send CLOSE with EOD and close the connections */
    atomic_uint_least64_t *progress;   /* optional: bytes sent are added here */
};
/* Over the cache's connections (opened for sending). */
int modee_send(struct data_cache *cache, const struct modee_send_job *job,
               struct xfer_stats *stats, char *err, size_t errlen);

/* MODE E receiving into file_fd at block offset + offset_shift. Connections
 * are the cached ones plus any that the sender opens on listen_fd (-1: none)
 * from allowed_peer. received collects what was written; every
 * marker_interval_ms the file is fdatasync'ed and marker() is told the
 * ranges that are now durable (before it returns nothing else is claimed),
 * and once more at the end: with a marker, a file received without error
 * is on disk (a failed sync fails the transfer), and callers need no sync
 * of their own.
 * The transfer fails, instead of waiting, when watch() reports the sender
 * gave up. The calling thread polls every connection until more than
 * DATA_BLOCK_MIN bytes are in; then each gets a thread of its own. */
struct modee_recv_job {
    int file_fd;
    uint64_t offset_shift;
    int listen_fd;
    const struct sockaddr_storage *allowed_peer;
    const struct data_tuning *tuning;
    struct data_cache *cache;
    struct ftp_ranges *received;
    int marker_interval_ms;
    void (*marker)(void *ctx, const struct ftp_ranges *durable);
    void *marker_ctx;
    unsigned *refused;
    /* Optional: when watch_fd is readable, watch() says whether the peer
     * gave up (e.g. a 426 on the control channel), with the reason. */
    int watch_fd;
    bool (*watch)(void *ctx, char *reason, size_t len);
    void *watch_ctx;
    atomic_uint_least64_t *progress;   /* optional: bytes written are added here */
};
int modee_recv(struct modee_recv_job *job, struct xfer_stats *stats, char *err, size_t errlen);

/* MODE S: the bytes, then the sender closes the connection. */
int stream_send_fd(int sock, int file_fd, uint64_t start, uint64_t end,
                   struct xfer_stats *stats, char *err, size_t errlen);
int stream_send_buf(int sock, const char *buf, size_t len, char *err, size_t errlen);
int stream_recv_fd(int sock, int file_fd, uint64_t start, struct xfer_stats *stats,
                   char *err, size_t errlen);

double monotonic_seconds(void);

#endif
