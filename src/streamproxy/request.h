/* A stream request: what SciStream's S2CS asks its data server for. Channel i
 * listens on listen_base + i and relays to connect_base + i. */
#ifndef SDMZ_REQUEST_H
#define SDMZ_REQUEST_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "netaddr.h"

#define REQUEST_ID_MAX 64
#define REQUEST_MAX_CHANNELS 64
#define REQUEST_MAX_ALLOW 16
#define REQUEST_MIN_BUFFER 4096
#define REQUEST_MAX_BUFFER (1024ULL * 1024 * 1024)

enum request_side { SIDE_PRODUCER, SIDE_CONSUMER };
enum overflow_policy { POLICY_BLOCK, POLICY_DROP_OLDEST };
/* Which leg of a request is TLS (tls.h): the one it connects (towards the
 * consumer's gateway, on the producer side) or the one it listens on. */
enum tls_leg { TLS_LEG_NONE, TLS_LEG_CONNECT, TLS_LEG_LISTEN };
#define REQUEST_TLS_PEER_MAX 253   /* a DNS name */

struct request_spec {
    char id[REQUEST_ID_MAX + 1];
    enum request_side side;
    unsigned channels;
    struct sockaddr_storage listen_base;
    struct sockaddr_storage connect_base;
    uint64_t rate_bps;         /* aggregate over the channels; 0 = unlimited */
    uint64_t buffer_bytes;     /* per channel and direction */
    enum overflow_policy policy;
    uint64_t record_bytes;     /* drop-oldest drops whole records of this size */
    struct cidr allow[REQUEST_MAX_ALLOW];
    unsigned n_allow;
    unsigned max_conns;        /* per request */
    enum tls_leg tls;
    char tls_peer[REQUEST_TLS_PEER_MAX + 1]; /* the peer gateway's certificate name */
};

/* Which keys an update may carry. */
enum { SPEC_RATE = 1, SPEC_BUFFER = 2, SPEC_POLICY = 4, SPEC_RECORD = 8, SPEC_ALLOW = 16,
       SPEC_MAX_CONNS = 32 };

/* Counters a worker updates and the main thread reads (relaxed atomics). */
struct channel_stats {
    atomic_uint_fast64_t bytes_forward;   /* producer -> consumer */
    atomic_uint_fast64_t bytes_reverse;
    atomic_uint_fast64_t conns_active;
    atomic_uint_fast64_t conns_total;
    atomic_uint_fast64_t buffered;        /* bytes held in forward buffers now */
    atomic_uint_fast64_t buffer_capacity; /* effective, summed over connections */
    atomic_uint_fast64_t full_events;     /* block policy: producer held back */
    atomic_uint_fast64_t overflow_events; /* drop-oldest: records discarded */
    atomic_uint_fast64_t dropped_bytes;
    atomic_uint_fast64_t connect_failures;
    atomic_uint_fast64_t tls_failures;    /* handshakes refused or failed */
    uint64_t last_bytes;                  /* main thread only: for the rate */
    double rate_bps;                      /* main thread only */
};

/* What the main thread's epoll holds for a listening socket. */
struct listen_watch {
    int kind;                   /* WATCH_LISTENER (server.h) */
    struct request *req;
    unsigned channel;
};

struct request {
    struct request_spec spec;
    struct listen_watch watch[REQUEST_MAX_CHANNELS];
    atomic_int refs;            /* the table's one + one per live connection */
    atomic_uint conns;          /* live connections, for max_conns */
    int listen_fds[REQUEST_MAX_CHANNELS];
    struct channel_stats stats[REQUEST_MAX_CHANNELS];
    struct request *next;
};

/* Parse "key=value" tokens into spec. With defaults non-NULL (create), every
 * required key must be present; with mask non-NULL (update), only the keys an
 * update may change are accepted and *mask says which were given. 0 or -1
 * with one message naming the key in err. */
int request_spec_parse(struct request_spec *spec, int ntok, char **tok,
                       const struct request_spec *defaults, unsigned *mask,
                       char *err, size_t errlen);
/* The spec as create tokens, parseable by request_spec_parse. */
int request_spec_format(const struct request_spec *spec, char *buf, size_t len);
uint16_t request_port(const struct sockaddr_storage *base, unsigned channel);
int request_source_allowed(const struct request_spec *spec, const struct sockaddr_storage *peer);

struct request *request_new(const struct request_spec *spec);
void request_ref(struct request *req);
void request_unref(struct request *req);

#endif
