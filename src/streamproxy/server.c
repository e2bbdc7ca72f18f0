#include "server.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define ACCEPTS_PER_WAKEUP 64
#define SERVER_EVENTS 64
#define STATE_LINE_MAX 2048

/* ---- sockets ------------------------------------------------------------ */

static int open_listener(const struct sockaddr_storage *addr, int backlog)
{
    int one = 1, zero = 0;
    int fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        (addr->ss_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero) < 0) ||
        bind(fd, (const struct sockaddr *)addr, netaddr_len(addr)) < 0 ||
        listen(fd, backlog) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

static int epoll_watch(struct server *s, int fd, void *data)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = data};

    return epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev);
}

static uint64_t read_pipe_max(void)
{
    FILE *f = fopen("/proc/sys/fs/pipe-max-size", "re");
    unsigned long long value = 1048576;

    if (f) {
        if (fscanf(f, "%llu", &value) != 1)
            value = 1048576;
        fclose(f);
    }
    return value;
}

/* ---- request table ------------------------------------------------------ */

static struct request *find_request(struct server *s, const char *id)
{
    for (struct request *r = s->requests; r; r = r->next)
        if (!strcmp(r->spec.id, id))
            return r;
    return NULL;
}

static void close_listeners(struct server *s, struct request *req)
{
    for (unsigned i = 0; i < req->spec.channels; i++) {
        if (req->listen_fds[i] >= 0) {
            (void)epoll_ctl(s->epfd, EPOLL_CTL_DEL, req->listen_fds[i], NULL);
            close(req->listen_fds[i]);
            req->listen_fds[i] = -1;
        }
    }
}

static struct relay_settings settings_of(const struct request_spec *spec)
{
    struct relay_settings settings = {
        .buffer_bytes = spec->buffer_bytes,
        .policy = spec->policy,
        .record_bytes = spec->record_bytes,
        .pacing_bytes_per_s = spec->rate_bps / 8 / spec->channels,
    };
    /* A rate too small to split still limits: never round down to "unlimited". */
    if (spec->rate_bps && !settings.pacing_bytes_per_s)
        settings.pacing_bytes_per_s = 1;
    return settings;
}

static int post_to_workers(struct server *s, enum command_kind kind, struct request *req)
{
    for (unsigned i = 0; i < s->nworkers; i++) {
        struct command *cmd = calloc(1, sizeof *cmd);
        if (!cmd)
            return -1;
        cmd->kind = kind;
        cmd->req = req;
        cmd->settings = settings_of(&req->spec);
        request_ref(req);
        if (worker_post(&s->workers[i], cmd) < 0) {
            log_msg(LOG_ERROR, "worker %u: queue: %s", i, strerror(errno));
            return -1;
        }
    }
    return 0;
}

static void state_save(struct server *s)
{
    char tmp[CONFIG_PATH_MAX + 8], line[STATE_LINE_MAX];
    FILE *f;
    int fd;

    if (s->relay_mode || s->restoring || !s->cfg.state_file[0])
        return;
    snprintf(tmp, sizeof tmp, "%s.tmp", s->cfg.state_file);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || !(f = fdopen(fd, "w"))) {
        log_msg(LOG_ERROR, "state %s: %s: requests will not survive a restart", tmp,
                strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    fprintf(f, "# sdmz-proxy stream requests; rewritten on every change.\n");
    for (struct request *r = s->requests; r; r = r->next)
        if (request_spec_format(&r->spec, line, sizeof line) > 0)
            fprintf(f, "%s\n", line);
    if (fflush(f) != 0 || fsync(fd) != 0 || fclose(f) != 0 || rename(tmp, s->cfg.state_file) != 0)
        log_msg(LOG_ERROR, "state %s: %s: requests will not survive a restart",
                s->cfg.state_file, strerror(errno));
}

static int ports_conflict(struct server *s, const struct request_spec *spec, FILE *out)
{
    unsigned lo = netaddr_port(&spec->listen_base), hi = lo + spec->channels - 1;

    if (!s->relay_mode && (lo < s->cfg.port_min || hi > s->cfg.port_max)) {
        fprintf(out, "error listen: ports %u-%u are outside the configured port_range %u-%u\n",
                lo, hi, s->cfg.port_min, s->cfg.port_max);
        return 1;
    }
    for (struct request *r = s->requests; r; r = r->next) {
        unsigned rlo = netaddr_port(&r->spec.listen_base), rhi = rlo + r->spec.channels - 1;
        if (strcmp(r->spec.id, spec->id) && lo <= rhi && rlo <= hi) {
            fprintf(out, "error listen: ports %u-%u overlap request %s (%u-%u)\n", lo, hi,
                    r->spec.id, rlo, rhi);
            return 1;
        }
    }
    return 0;
}

static int create_request(struct server *s, const struct request_spec *spec, FILE *out)
{
    struct request *existing = find_request(s, spec->id), *req;
    char have[STATE_LINE_MAX], want[STATE_LINE_MAX];

    if (existing) {
        request_spec_format(&existing->spec, have, sizeof have);
        request_spec_format(spec, want, sizeof want);
        if (!strcmp(have, want)) {
            fprintf(out, "ok unchanged id=%s\n", spec->id);
            return 0;
        }
        fprintf(out, "error id: request %s exists with other settings (update or release it)\n",
                spec->id);
        return -1;
    }
    if (ports_conflict(s, spec, out))
        return -1;
    if (spec->tls != TLS_LEG_NONE && !s->tls_ctx) {
        fprintf(out, "error tls: this proxy has no certificate (tls_cert, tls_key, tls_ca in "
                     "its config)\n");
        return -1;
    }
    if (!(req = request_new(spec))) {
        fprintf(out, "error create: out of memory\n");
        return -1;
    }
    for (unsigned i = 0; i < spec->channels; i++) {
        struct sockaddr_storage addr = spec->listen_base;
        char text[64];

        netaddr_set_port(&addr, request_port(&spec->listen_base, i));
        req->watch[i] = (struct listen_watch){WATCH_LISTENER, req, i};
        req->listen_fds[i] = open_listener(&addr, 128);
        if (req->listen_fds[i] < 0 || epoll_watch(s, req->listen_fds[i], &req->watch[i]) < 0) {
            netaddr_format(&addr, text, sizeof text);
            fprintf(out, "error listen: %s: %s\n", text, strerror(errno));
            close_listeners(s, req);
            request_unref(req);
            return -1;
        }
    }
    req->next = s->requests;
    s->requests = req;
    state_save(s);
    fprintf(out, "ok created id=%s ports=%u-%u\n", spec->id, netaddr_port(&spec->listen_base),
            request_port(&spec->listen_base, spec->channels - 1));
    log_msg(LOG_INFO, "request %s created: %u channel(s), ports %u-%u", spec->id,
            spec->channels, netaddr_port(&spec->listen_base),
            request_port(&spec->listen_base, spec->channels - 1));
    return 0;
}

static void release_request(struct server *s, struct request *req, bool save)
{
    struct request **link = &s->requests;

    while (*link && *link != req)
        link = &(*link)->next;
    if (*link)
        *link = req->next;
    close_listeners(s, req);
    (void)post_to_workers(s, CMD_RELEASE, req);
    log_msg(LOG_INFO, "request %s released", req->spec.id);
    if (save)
        state_save(s);
    request_unref(req);
}

/* ---- control verbs ------------------------------------------------------ */

static const char *arg_value(int nargs, char **args, const char *key)
{
    size_t n = strlen(key);

    for (int i = 0; i < nargs; i++)
        if (!strncmp(args[i], key, n) && args[i][n] == '=')
            return args[i] + n + 1;
    return NULL;
}

static void base_spec(const struct server *s, struct request_spec *spec)
{
    memset(spec, 0, sizeof *spec);
    spec->buffer_bytes = s->cfg.default_buffer;
    spec->policy = POLICY_BLOCK;
    spec->record_bytes = 1;
    spec->max_conns = s->cfg.default_max_conns;
}

static int verb_update(struct server *s, int nargs, char **args, FILE *out)
{
    const char *id = arg_value(nargs, args, "id");
    char **rest = args, err[200], before[STATE_LINE_MAX], after[STATE_LINE_MAX];
    struct request *req = id ? find_request(s, id) : NULL;
    struct request_spec spec;
    unsigned mask;
    int nrest = 0;

    if (!req) {
        fprintf(out, "error id: %s\n", id ? "no such request" : "required");
        return -1;
    }
    rest = calloc((size_t)nargs + 1, sizeof *rest);
    if (!rest) {
        fprintf(out, "error update: out of memory\n");
        return -1;
    }
    for (int i = 0; i < nargs; i++)
        if (strncmp(args[i], "id=", 3))
            rest[nrest++] = args[i];
    spec = req->spec;
    if (request_spec_parse(&spec, nrest, rest, NULL, &mask, err, sizeof err) < 0) {
        free(rest);
        fprintf(out, "error %s\n", err);
        return -1;
    }
    free(rest);
    request_spec_format(&req->spec, before, sizeof before);
    request_spec_format(&spec, after, sizeof after);
    if (!strcmp(before, after)) {
        fprintf(out, "ok unchanged id=%s\n", req->spec.id);
        return 0;
    }
    req->spec = spec;
    if (mask & (SPEC_RATE | SPEC_BUFFER))
        (void)post_to_workers(s, CMD_UPDATE, req);
    state_save(s);
    log_msg(LOG_INFO, "request %s updated: %s", req->spec.id, after);
    fprintf(out, "ok updated id=%s\n", req->spec.id);
    return 0;
}

static int verb_stats(struct server *s, int nargs, char **args, FILE *out)
{
    const char *id = arg_value(nargs, args, "id");

    if (id && !find_request(s, id)) {
        fprintf(out, "error id: no such request\n");
        return -1;
    }
    fprintf(out, "ok stats\n");
    stats_render(s, id, out);
    return 0;
}

int server_handle_verb(struct server *s, const char *verb, int nargs, char **args, FILE *out)
{
    char err[200], line[STATE_LINE_MAX];
    struct request_spec spec;
    struct request *req;
    unsigned count = 0;

    if (!strcmp(verb, "create")) {
        base_spec(s, &spec);
        if (request_spec_parse(&spec, nargs, args, &spec, NULL, err, sizeof err) < 0) {
            fprintf(out, "error %s\n", err);
            return -1;
        }
        return create_request(s, &spec, out);
    }
    if (!strcmp(verb, "update"))
        return verb_update(s, nargs, args, out);
    if (!strcmp(verb, "release")) {
        const char *id = arg_value(nargs, args, "id");
        if (!id || nargs != 1 || !(req = find_request(s, id))) {
            fprintf(out, "error id: %s\n", id && nargs == 1 ? "no such request" : "release takes id=ID");
            return -1;
        }
        release_request(s, req, true);
        fprintf(out, "ok released id=%s\n", id);
        return 0;
    }
    if (!strcmp(verb, "list") || !strcmp(verb, "stats")) {
        if (verb[0] == 's')
            return verb_stats(s, nargs, args, out);
        for (req = s->requests; req; req = req->next)
            count++;
        fprintf(out, "ok %u request(s)\n", count);
        for (req = s->requests; req; req = req->next) {
            request_spec_format(&req->spec, line, sizeof line);
            fprintf(out, "request %s conns=%u\n", line, atomic_load(&req->conns));
        }
        return 0;
    }
    fprintf(out, "error verb: '%.32s' is not create, update, release, list or stats\n", verb);
    return -1;
}

/* ---- events ------------------------------------------------------------- */

static void refuse(int fd, const struct request *req, unsigned channel,
                   const struct sockaddr_storage *peer, const char *why, uint64_t *counter)
{
    char text[64];

    netaddr_format(peer, text, sizeof text);
    log_msg(LOG_WARN, "%s ch%u: refused %s: %s", req->spec.id, channel, text, why);
    (*counter)++;
    close(fd);
}

static int connect_target(const struct request *req, unsigned channel, bool *connecting)
{
    struct sockaddr_storage target = req->spec.connect_base;
    int fd;

    netaddr_set_port(&target, request_port(&req->spec.connect_base, channel));
    fd = socket(target.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    *connecting = false;
    if (connect(fd, (struct sockaddr *)&target, netaddr_len(&target)) < 0) {
        if (errno != EINPROGRESS) {
            int saved = errno;
            close(fd);
            errno = saved;
            return -1;
        }
        *connecting = true;
    }
    return fd;
}

/* The TLS session of a new connection's gateway-to-gateway side, if any. */
static int open_tls(struct server *s, const struct request *req, struct conn_sockets *sockets)
{
    char err[240];
    bool client = req->spec.tls == TLS_LEG_CONNECT;

    sockets->tls = NULL;
    if (req->spec.tls == TLS_LEG_NONE)
        return 0;
    sockets->tls_side = client ? 1 : 0;
    sockets->tls = tls_session_new(s->tls_ctx, client ? sockets->target_fd : sockets->client_fd,
                                   client, req->spec.tls_peer, err, sizeof err);
    if (!sockets->tls) {
        log_msg(LOG_ERROR, "%s: %s", req->spec.id, err);
        return -1;
    }
    return 0;
}

static void admit(struct server *s, struct request *req, unsigned channel, int client,
                  const struct sockaddr_storage *peer)
{
    struct command *cmd;
    struct conn_sockets sockets = {.client_fd = client};
    bool connecting;
    int target;

    if (!request_source_allowed(&req->spec, peer)) {
        refuse(client, req, channel, peer, "source not in the request's allow list",
               &s->counters.rejected_source);
        return;
    }
    if (atomic_load(&s->total_conns) >= s->cfg.max_connections ||
        atomic_load(&req->conns) >= req->spec.max_conns) {
        refuse(client, req, channel, peer, "connection limit reached",
               &s->counters.rejected_limit);
        return;
    }
    target = connect_target(req, channel, &connecting);
    if (target < 0) {
        atomic_fetch_add(&req->stats[channel].connect_failures, 1);
        refuse(client, req, channel, peer, strerror(errno), &s->counters.connect_errors);
        return;
    }
    sockets.target_fd = target;
    sockets.connecting = connecting;
    if (open_tls(s, req, &sockets) < 0) {
        close(target);
        refuse(client, req, channel, peer, "TLS session setup failed", &s->counters.tls_errors);
        return;
    }
    cmd = calloc(1, sizeof *cmd);
    if (!cmd) {
        SSL_free(sockets.tls);
        close(target);
        refuse(client, req, channel, peer, "out of memory", &s->counters.accept_errors);
        return;
    }
    *cmd = (struct command){.kind = CMD_ADD, .req = req, .channel = channel,
                            .sockets = sockets, .settings = settings_of(&req->spec)};
    request_ref(req);
    atomic_fetch_add(&s->total_conns, 1);
    atomic_fetch_add(&req->conns, 1);
    atomic_fetch_add(&req->stats[channel].conns_active, 1);
    atomic_fetch_add(&req->stats[channel].conns_total, 1);
    if (worker_post(&s->workers[s->next_worker++ % s->nworkers], cmd) < 0)
        log_msg(LOG_ERROR, "%s ch%u: worker queue: %s", req->spec.id, channel, strerror(errno));
}

static void on_listener(struct server *s, struct listen_watch *w)
{
    for (int i = 0; i < ACCEPTS_PER_WAKEUP; i++) {
        struct sockaddr_storage peer;
        socklen_t len = sizeof peer;
        int fd = accept4(w->req->listen_fds[w->channel], (struct sockaddr *)&peer, &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
                s->counters.accept_errors++;
                log_msg(LOG_WARN, "%s ch%u: accept: %s", w->req->spec.id, w->channel,
                        strerror(errno));
            }
            return;
        }
        admit(s, w->req, w->channel, fd, &peer);
    }
}

static ssize_t read_line(int fd, char *buf, size_t cap)
{
    size_t used = 0;

    while (used < cap) {
        ssize_t n = read(fd, buf + used, cap - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        used += (size_t)n;
        if (memchr(buf, '\n', used))
            break;
    }
    return (ssize_t)used;
}

static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        buf += n;
        len -= (size_t)n;
    }
}

static void set_timeouts(int fd)
{
    struct timeval tv = {.tv_sec = 1};

    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

static void on_control(struct server *s)
{
    char line[CONTROL_MAX_LINE + 1], err[200], *reply = NULL;
    size_t reply_len = 0;
    struct control_msg msg;
    struct ucred cred = {0};
    socklen_t cred_len = sizeof cred;
    enum control_verdict verdict;
    ssize_t n;
    char *nl;
    FILE *out;
    int fd = accept4(s->control_fd, NULL, NULL, SOCK_CLOEXEC);

    if (fd < 0)
        return;
    (void)getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len);
    /* The main thread waits at most a second for a slow local client. */
    set_timeouts(fd);
    n = read_line(fd, line, CONTROL_MAX_LINE);
    nl = n > 0 ? memchr(line, '\n', (size_t)n) : NULL;
    if (!nl) {
        verdict = CONTROL_MALFORMED;
        snprintf(err, sizeof err, "no complete line within %d bytes", CONTROL_MAX_LINE);
    } else {
        verdict = control_parse(line, (size_t)(nl - line), &s->key, &msg, err, sizeof err);
        if (verdict == CONTROL_OK) {
            verdict = control_admit(s->replay, &msg, time(NULL));
            if (verdict == CONTROL_STALE)
                snprintf(err, sizeof err, "timestamp outside +-%d s of the gateway's clock",
                         CONTROL_WINDOW);
            else if (verdict == CONTROL_REPLAY)
                snprintf(err, sizeof err, "nonce already used (replayed message)");
            else if (verdict == CONTROL_BUSY)
                snprintf(err, sizeof err, "too many messages in the replay window");
        }
    }
    if (verdict != CONTROL_OK) {
        s->counters.control_rejected[verdict]++;
        log_msg(LOG_WARN, "control: refused a message from pid %d uid %d: %s: %s", (int)cred.pid,
                (int)cred.uid, control_verdict_name(verdict), err);
        dprintf(fd, "error %s: %s\n", control_verdict_name(verdict), err);
        close(fd);
        return;
    }
    out = open_memstream(&reply, &reply_len);
    if (!out) {
        close(fd);
        return;
    }
    if (server_handle_verb(s, msg.verb, msg.nargs, msg.args, out) == 0) {
        s->counters.control_ok++;
    } else {
        s->counters.control_errors++;
    }
    fclose(out);
    if (strcmp(msg.verb, "list") && strcmp(msg.verb, "stats"))
        log_msg(LOG_INFO, "control: uid %d %s: %.*s", (int)cred.uid, msg.verb,
                (int)strcspn(reply, "\n"), reply);
    write_all(fd, reply, reply_len);
    free(reply);
    close(fd);
}

static void on_metrics(struct server *s)
{
    char request[4096], header[160];
    size_t len = 0;
    char *body;
    int fd = accept4(s->metrics_fd, NULL, NULL, SOCK_CLOEXEC);

    if (fd < 0)
        return;
    set_timeouts(fd);
    /* Read the request head so that closing does not reset the reply. */
    (void)read_line(fd, request, sizeof request);
    body = metrics_render(s, &len);
    if (body) {
        int n = snprintf(header, sizeof header,
                         "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                         "Content-Length: %zu\r\nConnection: close\r\n\r\n", len);
        write_all(fd, header, (size_t)n);
        write_all(fd, body, len);
        free(body);
    }
    close(fd);
}

static void on_timer(struct server *s)
{
    uint64_t expirations;

    if (read(s->timer_fd, &expirations, sizeof expirations) < 0)
        return;
    for (struct request *r = s->requests; r; r = r->next) {
        for (unsigned i = 0; i < r->spec.channels; i++) {
            struct channel_stats *st = &r->stats[i];
            uint64_t now = atomic_load(&st->bytes_forward);
            st->rate_bps = (double)(now - st->last_bytes) * 8.0 / (double)expirations;
            st->last_bytes = now;
        }
    }
}

static void reload(struct server *s)
{
    struct proxy_config cfg;
    struct control_key key;
    SSL_CTX *tls_ctx = NULL;
    char err[300];

    if (config_load(s->config_path, &cfg, err, sizeof err) < 0 ||
        control_key_load(cfg.key_file, &key, err, sizeof err) < 0 ||
        tls_context_from_config(&cfg, &tls_ctx, err, sizeof err) < 0) {
        log_msg(LOG_ERROR, "reload failed, the running configuration stays: %s", err);
        return;
    }
    for (const struct request *r = s->requests; r && !tls_ctx; r = r->next) {
        if (r->spec.tls != TLS_LEG_NONE) {
            log_msg(LOG_ERROR, "reload failed, the running configuration stays: request %s "
                               "uses tls and the new config has no tls_cert", r->spec.id);
            return;
        }
    }
    /* Certificates rotate here; live sessions keep the context they began with. */
    SSL_CTX_free(s->tls_ctx);
    s->tls_ctx = tls_ctx;
    strcpy(s->cfg.tls_cert, cfg.tls_cert);
    strcpy(s->cfg.tls_key, cfg.tls_key);
    strcpy(s->cfg.tls_ca, cfg.tls_ca);
    if (strcmp(cfg.control_socket, s->cfg.control_socket) || cfg.workers != s->cfg.workers ||
        cfg.metrics_enabled != s->cfg.metrics_enabled ||
        memcmp(&cfg.metrics_listen, &s->cfg.metrics_listen, sizeof cfg.metrics_listen) ||
        strcmp(cfg.state_file, s->cfg.state_file) || cfg.log_level != s->cfg.log_level)
        log_msg(LOG_WARN, "reload: control_socket, metrics_listen, workers, state_file and "
                          "log_level take effect at the next restart");
    s->key = key;
    s->cfg.port_min = cfg.port_min;
    s->cfg.port_max = cfg.port_max;
    s->cfg.max_connections = cfg.max_connections;
    s->cfg.default_buffer = cfg.default_buffer;
    s->cfg.default_max_conns = cfg.default_max_conns;
    s->cfg.busy_poll_us = cfg.busy_poll_us;
    for (unsigned i = 0; i < s->nworkers; i++)
        worker_busy_poll(&s->workers[i], cfg.busy_poll_us);
    s->counters.reloads++;
    log_msg(LOG_INFO, "reloaded %s: key, TLS certificates, port_range, limits, busy_poll_us "
                      "and defaults",
            s->config_path);
}

static void on_signal(struct server *s)
{
    struct signalfd_siginfo info;

    if (read(s->signal_fd, &info, sizeof info) != sizeof info)
        return;
    if (info.ssi_signo == SIGHUP && !s->relay_mode) {
        reload(s);
    } else if (info.ssi_signo != SIGHUP) {
        log_msg(LOG_INFO, "signal %u: shutting down", info.ssi_signo);
        s->running = false;
    }
}

/* ---- life cycle --------------------------------------------------------- */

static int setup_signals(struct server *s)
{
    sigset_t set;

    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    /* Blocked before the workers start, so they inherit the mask. */
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
        return -1;
    signal(SIGPIPE, SIG_IGN);
    s->signal_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    return s->signal_fd < 0 ? -1 : 0;
}

static int open_control_socket(struct server *s, char *err, size_t errlen)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    struct stat st;
    int fd;

    strcpy(addr.sun_path, s->cfg.control_socket);
    if (lstat(addr.sun_path, &st) == 0) {
        int probe;
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(err, errlen, "control_socket %s exists and is not a socket", addr.sun_path);
            return -1;
        }
        probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (probe >= 0 && connect(probe, (struct sockaddr *)&addr, sizeof addr) == 0) {
            close(probe);
            snprintf(err, errlen, "control_socket %s: another sdmz-proxy is running",
                     addr.sun_path);
            return -1;
        }
        if (probe >= 0)
            close(probe);
        unlink(addr.sun_path); /* stale, from a process that died */
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 ||
        chmod(addr.sun_path, 0660) < 0 || listen(fd, 16) < 0) {
        snprintf(err, errlen, "control_socket %s: %s", addr.sun_path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    s->control_fd = fd;
    return 0;
}

static int server_init(struct server *s, const struct proxy_config *cfg, bool relay_mode)
{
    struct itimerspec tick = {.it_interval = {1, 0}, .it_value = {1, 0}};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    char err[300];

    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->relay_mode = relay_mode;
    s->control_fd = s->metrics_fd = s->timer_fd = s->signal_fd = -1;
    s->pipe_max = read_pipe_max();
    if (tls_context_from_config(cfg, &s->tls_ctx, err, sizeof err) < 0) {
        log_msg(LOG_ERROR, "%s", err);
        return -1;
    }
    for (int k = 0; k <= WATCH_TIMER; k++)
        s->watch[k] = k;
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (s->epfd < 0 || setup_signals(s) < 0 ||
        epoll_watch(s, s->signal_fd, &s->watch[WATCH_SIGNAL]) < 0) {
        log_msg(LOG_ERROR, "epoll/signalfd: %s", strerror(errno));
        return -1;
    }
    s->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (s->timer_fd < 0 || timerfd_settime(s->timer_fd, 0, &tick, NULL) < 0 ||
        epoll_watch(s, s->timer_fd, &s->watch[WATCH_TIMER]) < 0) {
        log_msg(LOG_ERROR, "timerfd: %s", strerror(errno));
        return -1;
    }
    if (!relay_mode) {
        s->replay = calloc(1, sizeof *s->replay);
        if (!s->replay || control_key_load(cfg->key_file, &s->key, err, sizeof err) < 0 ||
            open_control_socket(s, err, sizeof err) < 0 ||
            epoll_watch(s, s->control_fd, &s->watch[WATCH_CONTROL]) < 0) {
            log_msg(LOG_ERROR, "%s", s->replay ? err : "out of memory");
            return -1;
        }
    }
    if (cfg->metrics_enabled) {
        char text[64];
        s->metrics_fd = open_listener(&cfg->metrics_listen, 16);
        if (s->metrics_fd < 0 || epoll_watch(s, s->metrics_fd, &s->watch[WATCH_METRICS]) < 0) {
            netaddr_format(&cfg->metrics_listen, text, sizeof text);
            log_msg(LOG_ERROR, "metrics_listen %s: %s", text, strerror(errno));
            return -1;
        }
    }
    s->nworkers = cfg->workers ? cfg->workers : (cpus > 0 ? (unsigned)cpus : 1);
    s->workers = calloc(s->nworkers, sizeof *s->workers);
    if (!s->workers)
        return -1;
    for (unsigned i = 0; i < s->nworkers; i++) {
        if (worker_start(&s->workers[i], i, &s->total_conns, s->pipe_max,
                         cfg->busy_poll_us) < 0) {
            log_msg(LOG_ERROR, "worker %u: %s", i, strerror(errno));
            s->nworkers = i;
            return -1;
        }
    }
    s->running = true;
    return 0;
}

static void server_run(struct server *s)
{
    struct epoll_event events[SERVER_EVENTS];

    while (s->running) {
        int n = epoll_wait(s->epfd, events, SERVER_EVENTS, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            log_msg(LOG_ERROR, "epoll_wait: %s", strerror(errno));
            return;
        }
        for (int i = 0; i < n && s->running; i++) {
            int *kind = events[i].data.ptr;
            switch (*kind) {
            case WATCH_LISTENER: on_listener(s, (struct listen_watch *)kind); break;
            case WATCH_CONTROL: on_control(s); break;
            case WATCH_METRICS: on_metrics(s); break;
            case WATCH_SIGNAL: on_signal(s); break;
            case WATCH_TIMER: on_timer(s); break;
            }
        }
    }
}

/* Every port is released: listeners first, so no new connection arrives,
 * then the workers close what they relay. The state file is kept. */
static void server_close(struct server *s)
{
    while (s->requests)
        release_request(s, s->requests, false);
    for (unsigned i = 0; i < s->nworkers; i++)
        worker_stop(&s->workers[i]);
    free(s->workers);
    if (s->control_fd >= 0) {
        close(s->control_fd);
        unlink(s->cfg.control_socket);
    }
    if (s->metrics_fd >= 0)
        close(s->metrics_fd);
    if (s->timer_fd >= 0)
        close(s->timer_fd);
    if (s->signal_fd >= 0)
        close(s->signal_fd);
    if (s->epfd >= 0)
        close(s->epfd);
    free(s->replay);
    SSL_CTX_free(s->tls_ctx);
}

static void restore_state(struct server *s)
{
    char line[STATE_LINE_MAX], err[200], *tok[CONTROL_MAX_ARGS], *save;
    struct request_spec spec;
    unsigned lineno = 0, restored = 0;
    FILE *f;

    if (!s->cfg.state_file[0] || !(f = fopen(s->cfg.state_file, "re")))
        return;
    /* The file is read, not rewritten: a request that cannot come back now
     * (its port taken, say) stays in it until the next change. */
    s->restoring = true;
    while (fgets(line, sizeof line, f)) {
        int ntok = 0;
        char *reply = NULL;
        size_t reply_len = 0;
        FILE *out;

        lineno++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        line[strcspn(line, "\n")] = '\0';
        for (char *t = strtok_r(line, " ", &save); t && ntok < CONTROL_MAX_ARGS;
             t = strtok_r(NULL, " ", &save))
            tok[ntok++] = t;
        base_spec(s, &spec);
        if (request_spec_parse(&spec, ntok, tok, &spec, NULL, err, sizeof err) < 0) {
            log_msg(LOG_ERROR, "state %s line %u: %s: skipped", s->cfg.state_file, lineno, err);
            continue;
        }
        out = open_memstream(&reply, &reply_len);
        if (!out)
            break;
        if (create_request(s, &spec, out) == 0)
            restored++;
        fclose(out);
        if (strncmp(reply, "ok", 2))
            log_msg(LOG_ERROR, "state %s line %u: %s", s->cfg.state_file, lineno, reply);
        free(reply);
    }
    fclose(f);
    s->restoring = false;
    log_msg(LOG_INFO, "restored %u request(s) from %s", restored, s->cfg.state_file);
}

int server_serve(const char *config_path)
{
    struct proxy_config cfg;
    struct server *s = calloc(1, sizeof *s);
    char err[300];
    int rc = 1;

    if (!s)
        return 1;
    if (config_load(config_path, &cfg, err, sizeof err) < 0) {
        log_msg(LOG_ERROR, "%s", err);
        free(s);
        return 2;
    }
    log_setup("sdmz-proxy", cfg.log_level);
    if (server_init(s, &cfg, false) == 0) {
        s->config_path = config_path;
        restore_state(s);
        log_msg(LOG_INFO, "serving: control %s, %u worker(s), ports %u-%u",
                cfg.control_socket, s->nworkers, cfg.port_min, cfg.port_max);
        server_run(s);
        rc = 0;
    }
    server_close(s);
    free(s);
    return rc;
}

int server_relay(const struct request_spec *spec, const struct proxy_config *cfg)
{
    struct server *s = calloc(1, sizeof *s);
    char *reply = NULL;
    size_t reply_len = 0;
    FILE *out;
    int rc = 1;

    if (!s)
        return 1;
    if (server_init(s, cfg, true) == 0 && (out = open_memstream(&reply, &reply_len))) {
        int created = create_request(s, spec, out);
        fclose(out);
        if (created == 0) {
            log_msg(LOG_INFO, "relaying %.*s", (int)strcspn(reply, "\n") - 11, reply + 11);
            server_run(s);
            rc = 0;
        } else {
            log_msg(LOG_ERROR, "%.*s", (int)strcspn(reply, "\n"), reply);
        }
        free(reply);
    }
    server_close(s);
    free(s);
    return rc;
}
