/* Worker threads: one epoll loop each, one per core by default. The main
 * thread accepts and connects, then hands both sockets to a worker, which owns
 * the connection until it ends. Everything else reaches a worker as a command
 * on its queue: no connection is touched by two threads. */
#ifndef SDMZ_WORKER_H
#define SDMZ_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "relay.h"

enum command_kind { CMD_ADD, CMD_UPDATE, CMD_RELEASE, CMD_STOP };

struct command {
    struct command *next;
    enum command_kind kind;
    struct request *req;          /* holds a reference until processed */
    unsigned channel;
    struct conn_sockets sockets;  /* CMD_ADD: owned until processed */
    struct relay_settings settings;
};

struct worker {
    unsigned index;
    pthread_t thread;
    int epfd;
    int wake_fd;                  /* eventfd: the queue has commands */
    pthread_mutex_t lock;
    struct command *queue_head, *queue_tail;
    struct conn *conns;           /* worker thread only */
    struct conn *ready;           /* conns with TLS input epoll cannot announce */
    struct conn *graveyard;       /* closed in this epoll batch; freed after it */
    atomic_uint *total_conns;     /* the server's count, decremented on close */
    uint64_t pipe_max;
    _Atomic uint64_t busy_poll_ns; /* 0: sleep in epoll_wait; set by reload (worker_busy_poll) */
};

int worker_start(struct worker *w, unsigned index, atomic_uint *total_conns, uint64_t pipe_max,
                 unsigned busy_poll_us);
/* Set how long the worker polls before it sleeps (config busy_poll_us);
 * any thread, takes effect at the worker's next wait. */
void worker_busy_poll(struct worker *w, unsigned busy_poll_us);
/* Queue a command (ownership of cmd passes to the worker). -1 on failure. */
int worker_post(struct worker *w, struct command *cmd);
/* Post CMD_STOP, join, close every connection. */
void worker_stop(struct worker *w);

#endif
