#include "worker.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define WORKER_EVENTS 64
#define WATCH_WAKE 17

static const int wake_watch = WATCH_WAKE;

/* Closing unlinks the connection and stops its events; the memory is freed
 * after the current epoll batch, which may still name it. */
static void conn_close(struct worker *w, struct conn *c, const char *why)
{
    log_msg(LOG_DEBUG, "%s ch%u: closed (%s)", c->req->spec.id, c->channel, why);
    for (int side = 0; side < 2; side++)
        if (c->armed[side] != ~0u)
            (void)epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd[side], NULL);
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->closed = true;
    c->prev = NULL;
    c->next = w->graveyard;
    w->graveyard = c;
}

static void bury(struct worker *w)
{
    while (w->graveyard) {
        struct conn *c = w->graveyard;
        struct request *req = c->req;

        w->graveyard = c->next;
        atomic_fetch_sub_explicit(&c->stats->conns_active, 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(&req->conns, 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(w->total_conns, 1, memory_order_relaxed);
        conn_free(c);
        request_unref(req);
    }
}

/* Register or modify each side's events to what the connection needs now. */
static int conn_arm(struct worker *w, struct conn *c)
{
    for (int side = 0; side < 2; side++) {
        uint32_t wanted = conn_wanted_events(c, side);
        struct epoll_event ev = {.events = wanted, .data.ptr = &c->ep[side]};
        int op;

        if (wanted == c->armed[side])
            continue;
        op = c->armed[side] == ~0u ? EPOLL_CTL_ADD : EPOLL_CTL_MOD;
        if (epoll_ctl(w->epfd, op, c->fd[side], &ev) < 0)
            return -1;
        c->armed[side] = wanted;
    }
    return 0;
}

static void conn_event(struct worker *w, struct conn *c, int side, uint32_t events)
{
    unsigned dirs = conn_directions_for(c, side, events);
    int rc;

    if (c->closed)
        return;
    if (c->connecting) {
        dirs = CONN_BOTH_DIRECTIONS; /* the client may have sent while we connected */
        if (conn_finish_connect(c) < 0) {
            char why[128];
            atomic_fetch_add_explicit(&c->stats->connect_failures, 1, memory_order_relaxed);
            snprintf(why, sizeof why, "connect to target: %s", strerror(errno));
            log_msg(LOG_WARN, "%s ch%u: %s", c->req->spec.id, c->channel, why);
            conn_close(w, c, why);
            return;
        }
    }
    if (events & EPOLLERR) {
        int error = 0;
        socklen_t len = sizeof error;
        (void)getsockopt(c->fd[side], SOL_SOCKET, SO_ERROR, &error, &len);
        log_msg(LOG_INFO, "%s ch%u: %s side reset: %s", c->req->spec.id, c->channel,
                side ? "target" : "client", strerror(error));
        conn_side_hangup(c, side);
        conn_close(w, c, "socket error");
        return;
    }
    rc = conn_pump(c, dirs);
    if (rc == 0 && (events & EPOLLHUP)) {
        conn_side_hangup(c, side);
        rc = conn_pump(c, CONN_BOTH_DIRECTIONS);
    }
    if (rc < 0) {
        log_msg(c->why[0] ? LOG_WARN : LOG_INFO, "%s ch%u: relay ended: %s", c->req->spec.id,
                c->channel, c->why[0] ? c->why : strerror(errno));
        conn_close(w, c, "relay error");
    } else if (rc == 1) {
        conn_close(w, c, "both sides finished");
    } else if (conn_arm(w, c) < 0) {
        log_msg(LOG_ERROR, "%s ch%u: epoll: %s", c->req->spec.id, c->channel, strerror(errno));
        conn_close(w, c, "epoll failure");
    } else if (conn_tls_input_pending(c) && !c->in_ready) {
        c->in_ready = true;
        c->ready_next = w->ready;
        w->ready = c;
    }
}

/* Pump the connections whose decrypted input waits inside OpenSSL, once per
 * loop, as if their TLS side had become readable. Runs before bury(): a
 * connection closed in this batch is still allocated, and skipped. */
static void run_ready(struct worker *w)
{
    struct conn *c = w->ready;

    w->ready = NULL;
    while (c) {
        struct conn *next = c->ready_next;
        c->in_ready = false;
        c->ready_next = NULL;
        if (!c->closed)
            conn_event(w, c, c->tls_side, EPOLLIN);
        c = next;
    }
}

static void add_conn(struct worker *w, struct command *cmd)
{
    struct conn *c = conn_new(cmd->req, cmd->channel, &cmd->sockets, &cmd->settings,
                              w->pipe_max);

    if (!c) {
        atomic_fetch_sub_explicit(&cmd->req->stats[cmd->channel].conns_active, 1,
                                  memory_order_relaxed);
        atomic_fetch_sub_explicit(&cmd->req->conns, 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(w->total_conns, 1, memory_order_relaxed);
        return; /* drain_queue drops the command's reference */
    }
    cmd->req = NULL; /* the connection keeps the reference */
    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    if (c->connecting) {
        if (conn_arm(w, c) < 0)
            conn_close(w, c, "epoll failure");
    } else {
        conn_event(w, c, 0, 0);
    }
}

static void for_request(struct worker *w, const struct command *cmd)
{
    struct conn *c = w->conns, *next;

    for (; c; c = next) {
        next = c->next;
        if (c->req != cmd->req)
            continue;
        if (cmd->kind == CMD_RELEASE) {
            conn_close(w, c, "request released");
        } else {
            struct relay_settings s = cmd->settings;
            conn_apply(c, &s, w->pipe_max);
            if (conn_arm(w, c) < 0)
                conn_close(w, c, "epoll failure");
        }
    }
}

/* Returns false when told to stop. */
static bool drain_queue(struct worker *w)
{
    struct command *cmd, *next;
    uint64_t count;
    bool running = true;

    if (read(w->wake_fd, &count, sizeof count) < 0 && errno != EAGAIN)
        log_msg(LOG_ERROR, "worker %u: eventfd: %s", w->index, strerror(errno));
    pthread_mutex_lock(&w->lock);
    cmd = w->queue_head;
    w->queue_head = w->queue_tail = NULL;
    pthread_mutex_unlock(&w->lock);
    for (; cmd; cmd = next) {
        next = cmd->next;
        switch (cmd->kind) {
        case CMD_ADD: add_conn(w, cmd); break;
        case CMD_UPDATE:
        case CMD_RELEASE: for_request(w, cmd); break;
        case CMD_STOP: running = false; break;
        }
        if (cmd->req)
            request_unref(cmd->req);
        free(cmd);
    }
    return running;
}

static uint64_t monotonic_ns(void)
{
    struct timespec now;

    (void)clock_gettime(CLOCK_MONOTONIC, &now); /* cannot fail for CLOCK_MONOTONIC */
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/* The next batch of events. With busy polling the worker asks again without
 * sleeping until busy_poll_ns pass with nothing to do, and only then sleeps:
 * waking a sleeping thread (an interrupt; on a VM, a halted vCPU's exit to
 * the hypervisor) costs more than relaying a small message. */
static int wait_events(struct worker *w, struct epoll_event *events)
{
    uint64_t busy_poll_ns = atomic_load_explicit(&w->busy_poll_ns, memory_order_relaxed);
    uint64_t deadline;
    int n;

    if (w->ready || !busy_poll_ns)
        return epoll_wait(w->epfd, events, WORKER_EVENTS, w->ready ? 0 : -1);
    deadline = monotonic_ns() + busy_poll_ns;
    do {
        n = epoll_wait(w->epfd, events, WORKER_EVENTS, 0);
        if (n != 0)
            return n;
    } while (monotonic_ns() < deadline);
    return epoll_wait(w->epfd, events, WORKER_EVENTS, -1);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct epoll_event events[WORKER_EVENTS];
    bool running = true;

    while (running) {
        int n = wait_events(w, events);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            log_msg(LOG_ERROR, "worker %u: epoll_wait: %s", w->index, strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            const int *kind = events[i].data.ptr;
            if (*kind == WATCH_WAKE) {
                running = drain_queue(w) && running;
            } else {
                struct conn_endpoint *ep = events[i].data.ptr;
                conn_event(w, ep->conn, ep->side, events[i].events);
            }
        }
        run_ready(w);
        bury(w);
    }
    while (w->conns)
        conn_close(w, w->conns, "shutdown");
    bury(w);
    return NULL;
}

int worker_start(struct worker *w, unsigned index, atomic_uint *total_conns, uint64_t pipe_max,
                 unsigned busy_poll_us)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = (void *)&wake_watch};
    int rc;

    memset(w, 0, sizeof *w);
    w->index = index;
    w->total_conns = total_conns;
    w->pipe_max = pipe_max;
    worker_busy_poll(w, busy_poll_us);
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->epfd < 0 || w->wake_fd < 0 ||
        epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wake_fd, &ev) < 0)
        return -1;
    pthread_mutex_init(&w->lock, NULL);
    rc = pthread_create(&w->thread, NULL, worker_main, w);
    if (rc) {
        errno = rc;
        return -1;
    }
    return 0;
}

void worker_busy_poll(struct worker *w, unsigned busy_poll_us)
{
    atomic_store_explicit(&w->busy_poll_ns, (uint64_t)busy_poll_us * 1000u,
                          memory_order_relaxed);
}

int worker_post(struct worker *w, struct command *cmd)
{
    uint64_t one = 1;

    cmd->next = NULL;
    pthread_mutex_lock(&w->lock);
    if (w->queue_tail)
        w->queue_tail->next = cmd;
    else
        w->queue_head = cmd;
    w->queue_tail = cmd;
    pthread_mutex_unlock(&w->lock);
    if (write(w->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
        return -1;
    return 0;
}

void worker_stop(struct worker *w)
{
    struct command *stop = calloc(1, sizeof *stop);

    if (stop) {
        stop->kind = CMD_STOP;
        if (worker_post(w, stop) == 0)
            pthread_join(w->thread, NULL);
    }
    /* Commands posted after the stop are dropped with their references. */
    while (w->queue_head) {
        struct command *next = w->queue_head->next;
        if (w->queue_head->req)
            request_unref(w->queue_head->req);
        if (w->queue_head->kind == CMD_ADD) {
            conn_sockets_close(&w->queue_head->sockets);
        }
        free(w->queue_head);
        w->queue_head = next;
    }
    close(w->epfd);
    close(w->wake_fd);
    pthread_mutex_destroy(&w->lock);
}
