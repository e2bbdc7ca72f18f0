/* One relayed connection: the accepted socket (side 0) and the socket the
 * proxy opened to the channel's target (side 1). Direction 0 carries bytes
 * from side 0 to side 1 (producer -> consumer: the stream), direction 1 the
 * other way (handshakes, acknowledgements). Owned by one worker thread.
 *
 * A block-policy direction moves data with splice() through a pipe (no copy
 * into user space); the pipe is the relay buffer, resized with F_SETPIPE_SZ.
 * A drop-oldest direction reads into a ring so that it can count and discard
 * whole records when the consumer falls behind; so does a direction with a
 * TLS end, whose bytes OpenSSL must see (it holds the TLS session of the
 * gateway-to-gateway side, and drives the handshake before any data moves). */
#ifndef SDMZ_RELAY_H
#define SDMZ_RELAY_H

#include <stdbool.h>
#include <stdint.h>

#include "request.h"
#include "ring.h"
#include "tls.h"

struct relay_settings {
    uint64_t buffer_bytes;
    enum overflow_policy policy;
    uint64_t record_bytes;
    uint64_t pacing_bytes_per_s;   /* 0 = unlimited */
};

struct direction {
    int src, dst;
    SSL *src_tls, *dst_tls;        /* NULL: plain socket */
    uint32_t src_want, dst_want;   /* the event a TLS end last asked for */
    size_t tls_write_pending;      /* bytes OpenSSL took into a record not yet sent */
    bool use_ring;
    bool drop_when_full;           /* drop-oldest; otherwise a full ring blocks */
    bool notify_pending;           /* close_notify not yet written */
    int pipe_r, pipe_w;
    uint64_t pipe_cap, in_pipe;
    bool pipe_full;                /* last splice in found no room */
    bool small_reads;              /* the last read was short: copy, not splice */
    struct ring ring;
    bool src_eof, dst_shut, dst_blocked, aborted;
    bool was_full;                 /* for counting full events on the edge */
};

struct conn;

struct conn_endpoint {
    int kind;                      /* WATCH_CONN */
    struct conn *conn;
    int side;
};

/* The two sockets of a new connection, and the TLS session of one of them. */
struct conn_sockets {
    int client_fd, target_fd;
    bool connecting;               /* target_fd's connect() is in progress */
    SSL *tls;                      /* NULL: both plain */
    int tls_side;                  /* 0: client_fd, 1: target_fd */
};

struct conn {
    struct conn *prev, *next;      /* the owning worker's list */
    struct conn *ready_next;       /* the worker's list of TLS input to drain */
    bool in_ready;
    struct request *req;
    unsigned channel;
    struct channel_stats *stats;
    int fd[2];
    struct conn_endpoint ep[2];
    uint32_t armed[2];             /* events registered in epoll; ~0u = not registered */
    bool connecting;
    bool closed;                   /* freed after the current epoll batch */
    SSL *tls;
    int tls_side;
    bool handshaking;
    uint32_t handshake_want;
    bool reset_on_close;           /* a truncated TLS stream: tell the plain side */
    char why[160];                 /* why the relay failed, when errno cannot say */
    struct relay_settings settings;
    struct direction dir[2];
    uint64_t counted_buffered, counted_capacity;
};

#define WATCH_CONN 16

/* Takes ownership of the sockets and the TLS session. NULL (all closed) on failure. */
struct conn *conn_new(struct request *req, unsigned channel, const struct conn_sockets *sockets,
                      const struct relay_settings *settings, uint64_t pipe_max);
/* Close what conn_new would have owned, when it is never called. */
void conn_sockets_close(const struct conn_sockets *sockets);
#define CONN_BOTH_DIRECTIONS 3u
/* The directions (bit i = dir[i]) an epoll event on `side` can move. */
unsigned conn_directions_for(const struct conn *c, int side, uint32_t events);
/* Move what can move now in the given directions. -1: the connection failed
 * and must be closed; 1: both directions finished; 0: waiting for events. */
int conn_pump(struct conn *c, unsigned dirs);
/* The events each side should be registered for. */
uint32_t conn_wanted_events(const struct conn *c, int side);
/* Finish a non-blocking connect: 0 connected, -1 failed (errno set). */
int conn_finish_connect(struct conn *c);
/* Apply new settings to a live connection; logs what could not be applied. */
void conn_apply(struct conn *c, const struct relay_settings *settings, uint64_t pipe_max);
/* Mark a side as hung up: its reads end, writes to it are abandoned. */
void conn_side_hangup(struct conn *c, int side);
void conn_free(struct conn *c);
/* OpenSSL holds decrypted input that no epoll event will announce. */
bool conn_tls_input_pending(const struct conn *c);
/* Publish buffer fill and capacity to the channel's counters. */
void conn_account(struct conn *c);

/* Set SO_MAX_PACING_RATE (bytes/s, 0 = unlimited); -1 with errno. */
int socket_set_pacing(int fd, uint64_t bytes_per_s);

#endif
