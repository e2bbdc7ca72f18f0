/* The main thread: control socket, request table, listeners, accept and
 * connect, metrics, signals. Workers do the relaying (worker.h). */
#ifndef SDMZ_SERVER_H
#define SDMZ_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "control.h"
#include "request.h"
#include "tls.h"
#include "worker.h"

enum watch_kind { WATCH_LISTENER = 1, WATCH_CONTROL, WATCH_METRICS, WATCH_SIGNAL, WATCH_TIMER };

struct server_counters {
    uint64_t rejected_source;   /* a source the request does not name */
    uint64_t rejected_limit;    /* connection limits reached */
    uint64_t accept_errors;
    uint64_t connect_errors;    /* connect() failed at once */
    uint64_t tls_errors;        /* a TLS session could not be set up */
    uint64_t control_ok;
    uint64_t control_rejected[CONTROL_BUSY + 1]; /* by verdict */
    uint64_t control_errors;    /* authenticated but refused (bad arguments, ...) */
    uint64_t reloads;
};

struct server {
    struct proxy_config cfg;
    const char *config_path;    /* NULL in relay mode */
    bool relay_mode;
    struct control_key key;
    struct replay_cache *replay;
    struct request *requests;
    struct worker *workers;
    unsigned nworkers, next_worker;
    uint64_t pipe_max;
    SSL_CTX *tls_ctx;           /* NULL: no tls_cert/tls_key/tls_ca configured */
    int epfd, signal_fd, timer_fd, control_fd, metrics_fd;
    int watch[WATCH_TIMER + 1]; /* epoll data for the fixed fds: their kind */
    atomic_uint total_conns;
    struct server_counters counters;
    bool running;
    bool restoring;             /* reading the state file: do not rewrite it */
};

/* serve: load the config and key, restore saved requests, run until SIGTERM. */
int server_serve(const char *config_path);
/* relay: one request from the command line, no control socket. */
int server_relay(const struct request_spec *spec, const struct proxy_config *cfg);

/* One control verb; the reply ("ok ..." or "error ...", then data lines)
 * is written to out. 0 when the reply is ok. */
int server_handle_verb(struct server *s, const char *verb, int nargs, char **args, FILE *out);
/* Prometheus text exposition of every counter; malloc'd. */
char *metrics_render(const struct server *s, size_t *len);
/* The same counters as `stats` lines: one per channel (of request id, or of
 * all when id is NULL), then the server's. */
void stats_render(const struct server *s, const char *id, FILE *out);

#endif
