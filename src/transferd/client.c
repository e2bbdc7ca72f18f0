#include "client.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "netaddr.h"

#define PIPELINE_DEPTH 64
#define RECEIVER_REASON_WAIT_MS 5000
#define QUIT_REPLY_WAIT_MS 5000

/* ---- control channel --------------------------------------------------- */

static int read_line(struct client *c, char *line, size_t len)
{
    for (;;) {
        char *eol = memchr(c->inbuf, '\n', c->inbuf_len);
        if (eol) {
            size_t n = (size_t)(eol - c->inbuf), keep = n;
            if (keep && c->inbuf[keep - 1] == '\r')
                keep--;
            if (keep >= len)
                keep = len - 1;
            memcpy(line, c->inbuf, keep);
            line[keep] = '\0';
            memmove(c->inbuf, eol + 1, c->inbuf_len - n - 1);
            c->inbuf_len -= n + 1;
            return 0;
        }
        if (c->inbuf_len == sizeof c->inbuf)
            return -1;
        struct pollfd pfd = {.fd = c->in_fd, .events = POLLIN};
        int rc = poll(&pfd, 1, c->timeout_ms);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            return -1;
        ssize_t got = read(c->in_fd, c->inbuf + c->inbuf_len, sizeof c->inbuf - c->inbuf_len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            return -1;
        c->inbuf_len += (size_t)got;
    }
}

/* While data flows the control channel is only watched: whatever arrived is
 * buffered for client_read_reply(), and the transfer's own final reply, if
 * it is already there and is an error, ends the wait for data that will not
 * come. 111/112 markers and the 226 a server may send early are not errors. */
static bool sender_gave_up(void *ctx, char *reason, size_t len)
{
    struct client *c = ctx;
    struct pollfd pfd = {.fd = c->in_fd, .events = POLLIN};

    if (poll(&pfd, 1, 0) > 0 && c->inbuf_len < sizeof c->inbuf) {
        ssize_t got = read(c->in_fd, c->inbuf + c->inbuf_len, sizeof c->inbuf - c->inbuf_len);
        if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
            snprintf(reason, len, "control connection lost during the transfer");
            return true;
        }
        if (got > 0)
            c->inbuf_len += (size_t)got;
    }
    for (size_t at = 0; at < c->inbuf_len;) {
        char *eol = memchr(c->inbuf + at, '\n', c->inbuf_len - at);
        char line[8];
        if (!eol)
            break;
        size_t n = (size_t)(eol - (c->inbuf + at));
        snprintf(line, sizeof line, "%.*s", (int)(n < 7 ? n : 7), c->inbuf + at);
        int code = ftp_reply_code(line);
        at += n + 1;
        if (!code || line[3] == '-' || code == 111 || code == 112)
            continue;
        if (code < 400)
            return false;
        snprintf(reason, len, "server: %.*s", (int)(n && c->inbuf[at - 2] == '\r' ? n - 1 : n),
                 c->inbuf + at - n - 1);
        return true;
    }
    return false;
}

int client_read_reply(struct client *c, struct client_reply *out,
                      void (*marker)(void *ctx, const char *ranges), void *marker_ctx)
{
    char line[FTP_LINE_MAX];

    for (;;) {
        int code;
        if (read_line(c, line, sizeof line) < 0)
            return -1;
        code = ftp_reply_code(line);
        if (!code)
            continue;
        if (line[3] == '-') {
            /* Multi-line: read until "CODE " ends it. */
            do {
                if (read_line(c, line, sizeof line) < 0)
                    return -1;
            } while (!ftp_reply_final_code(line, code));
        }
        snprintf(c->reply, sizeof c->reply, "%s", line);
        if (code == 111) {
            static const char prefix[] = "111 Range Marker ";
            if (marker && strncmp(line, prefix, sizeof prefix - 1) == 0)
                marker(marker_ctx, line + sizeof prefix - 1);
            continue;
        }
        if (code == 112)   /* performance markers: progress only */
            continue;
        out->code = code;
        out->text = c->reply;
        return 0;
    }
}

static int send_line(struct client *c, const char *line)
{
    size_t len = strlen(line);

    while (len > 0) {
        ssize_t n = write(c->out_fd, line, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        line += n;
        len -= (size_t)n;
    }
    return 0;
}

static int vsend(struct client *c, const char *fmt, va_list ap)
{
    char line[FTP_LINE_MAX];
    int n = vsnprintf(line, sizeof line - 2, fmt, ap);

    if (n < 0 || (size_t)n >= sizeof line - 2 || strpbrk(line, "\r\n"))
        return -1;   /* never let a file name end the command early */
    memcpy(line + n, "\r\n", 3);
    return send_line(c, line);
}

int client_send(struct client *c, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = vsend(c, fmt, ap);
    va_end(ap);
    return rc;
}

int client_command(struct client *c, int want, char *err, size_t errlen, const char *fmt, ...)
{
    struct client_reply reply;
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = vsend(c, fmt, ap);
    va_end(ap);
    if (rc < 0 || client_read_reply(c, &reply, NULL, NULL) < 0) {
        snprintf(err, errlen, "control connection lost");
        return -1;
    }
    if (reply.code != want) {
        snprintf(err, errlen, "server: %s", reply.text);
        return -1;
    }
    return 0;
}

/* ---- session ----------------------------------------------------------- */

static int login(struct client *c, const char *user, const char *password, char *err,
                 size_t errlen)
{
    struct client_reply reply;

    if (client_read_reply(c, &reply, NULL, NULL) < 0 || reply.code != 220) {
        snprintf(err, errlen, "no FTP greeting from the server%s%s",
                 c->reply[0] ? ": " : "", c->reply);
        return -1;
    }
    if (client_send(c, "USER %s", user) < 0 || client_read_reply(c, &reply, NULL, NULL) < 0) {
        snprintf(err, errlen, "control connection lost during login");
        return -1;
    }
    if (reply.code == 331 &&
        (client_send(c, "PASS %s", password) < 0 || client_read_reply(c, &reply, NULL, NULL) < 0)) {
        snprintf(err, errlen, "control connection lost during login");
        return -1;
    }
    if (reply.code != 230) {
        snprintf(err, errlen, "login as %s refused: %s", user, reply.text);
        return -1;
    }
    return 0;
}

static void client_init(struct client *c)
{
    struct data_tuning tuning = c->tuning;
    unsigned streams = c->streams;
    uint16_t port_lo = c->data_port_lo, port_hi = c->data_port_hi;

    memset(c, 0, sizeof *c);
    c->tuning = tuning;
    c->streams = streams ? streams : 1;
    c->data_port_lo = port_lo;
    c->data_port_hi = port_hi;
    c->sock = c->listen_fd = -1;
    c->timeout_ms = 600000;
}

int client_open_tcp(struct client *c, const char *host, const char *port, const char *user,
                    const char *password, char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
    socklen_t len = sizeof c->local;
    int rc;

    client_init(c);
    rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "%s: %s", host, gai_strerror(rc));
        return -1;
    }
    for (ai = res; ai; ai = ai->ai_next) {
        c->sock = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c->sock < 0)
            continue;
        if (connect(c->sock, ai->ai_addr, ai->ai_addrlen) == 0) {
            memcpy(&c->server, ai->ai_addr, ai->ai_addrlen);
            break;
        }
        snprintf(err, errlen, "connecting to %s port %s: %s", host, port, strerror(errno));
        close(c->sock);
        c->sock = -1;
    }
    freeaddrinfo(res);
    if (c->sock < 0)
        return -1;
    if (getsockname(c->sock, (struct sockaddr *)&c->local, &len) < 0) {
        snprintf(err, errlen, "getsockname: %s", strerror(errno));
        return -1;
    }
    /* Pipelined commands and their replies are small: no Nagle wait. */
    int one = 1;
    if (setsockopt(c->sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) {
        snprintf(err, errlen, "TCP_NODELAY: %s", strerror(errno));
        return -1;
    }
    c->in_fd = c->out_fd = c->sock;
    return login(c, user, password, err, errlen);
}

int client_open_fds(struct client *c, int in_fd, int out_fd, const char *host,
                    char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
    int rc, probe;
    socklen_t len = sizeof c->local;

    client_init(c);
    c->in_fd = in_fd;
    c->out_fd = out_fd;
    rc = getaddrinfo(host, "9", &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "%s: %s", host, gai_strerror(rc));
        return -1;
    }
    memcpy(&c->server, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    /* The local address the kernel would use towards the server: a UDP
     * socket's connect picks it without sending anything. */
    probe = socket(c->server.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (probe < 0 || connect(probe, (struct sockaddr *)&c->server, netaddr_len(&c->server)) < 0 ||
        getsockname(probe, (struct sockaddr *)&c->local, &len) < 0) {
        snprintf(err, errlen, "no route to %s: %s", host, strerror(errno));
        if (probe >= 0)
            close(probe);
        return -1;
    }
    close(probe);
    return login(c, "sshftp", "sshftp", err, errlen);
}

/* Data connections and the listener go first: after a failed get, a
 * connection the server opened may still wait, unaccepted, in the
 * listener's backlog, the server blocked sending into it; closing resets
 * it, and the server can answer QUIT. */
void client_close(struct client *c)
{
    struct client_reply reply;

    data_cache_close(&c->cache);
    if (c->listen_fd >= 0)
        close(c->listen_fd);
    c->listen_fd = -1;
    c->timeout_ms = QUIT_REPLY_WAIT_MS;
    if (client_send(c, "QUIT") == 0)
        client_read_reply(c, &reply, NULL, NULL);
    if (c->sock >= 0)
        close(c->sock);
    c->listen_fd = c->sock = -1;
}

int client_prepare(struct client *c, char *err, size_t errlen)
{
    if (c->mode_e)
        return 0;
    if (client_command(c, 200, err, errlen, "TYPE I") < 0 ||
        client_command(c, 200, err, errlen, "MODE E") < 0 ||
        client_command(c, 200, err, errlen, "OPTS RETR Parallelism=%u,%u,%u;", c->streams,
                       c->streams, c->streams) < 0)
        return -1;
    if (c->tuning.sndbuf > 0 && client_command(c, 200, err, errlen, "SBUF %d", c->tuning.sndbuf) < 0)
        return -1;
    c->mode_e = true;
    return 0;
}

/* ---- metadata ---------------------------------------------------------- */

/* "Type=file;Size=3;... name" -> entry. */
static int parse_facts(const char *line, struct remote_entry *out)
{
    const char *space = strchr(line, ' ');
    char facts[1024];

    if (!space || (size_t)(space - line) >= sizeof facts)
        return -1;
    memcpy(facts, line, (size_t)(space - line));
    facts[space - line] = '\0';
    snprintf(out->name, sizeof out->name, "%s", space + 1);
    out->is_dir = false;
    out->size = 0;
    char *save = NULL;
    for (char *f = strtok_r(facts, ";", &save); f; f = strtok_r(NULL, ";", &save)) {
        if (strncasecmp(f, "Type=", 5) == 0) {
            const char *t = f + 5;
            out->is_dir = !strcasecmp(t, "dir") || !strcasecmp(t, "cdir") || !strcasecmp(t, "pdir");
            if (!strcasecmp(t, "cdir") || !strcasecmp(t, "pdir"))
                snprintf(out->name, sizeof out->name, ".");
        } else if (strncasecmp(f, "Size=", 5) == 0) {
            out->size = strtoull(f + 5, NULL, 10);
        }
    }
    return 0;
}

int client_stat(struct client *c, const char *path, struct remote_entry *out,
                char *err, size_t errlen)
{
    char line[FTP_LINE_MAX];
    int code;

    if (client_send(c, "MLST %s", path) < 0 || read_line(c, line, sizeof line) < 0)
        goto lost;
    code = ftp_reply_code(line);
    if (code == 250 && line[3] == '-') {
        bool found = false;
        for (;;) {
            if (read_line(c, line, sizeof line) < 0)
                goto lost;
            if (ftp_reply_final_code(line, 250))
                break;
            if (line[0] == ' ' && parse_facts(line + 1, out) == 0)
                found = true;
        }
        if (found)
            return 0;
        snprintf(err, errlen, "MLST %s: no facts in the reply", path);
        return -1;
    }
    if (line[3] == '-') {
        do {
            if (read_line(c, line, sizeof line) < 0)
                goto lost;
        } while (!ftp_reply_final_code(line, code));
    }
    /* 550: absent, or refused (outside the roots...): the reply says which. */
    if (code == 550) {
        snprintf(err, errlen, "server: %s", line);
        return 1;
    }
    snprintf(err, errlen, "MLST %s: %s", path, line);
    return -1;
lost:
    snprintf(err, errlen, "control connection lost");
    return -1;
}

/* PASV (EPSV over IPv6): the server's passive port, at the host the control
 * connection reached (a server behind NAT names a private address). */
static int request_passive(struct client *c, struct sockaddr_storage *addr, char *err,
                           size_t errlen)
{
    struct client_reply reply;
    bool v6 = c->server.ss_family == AF_INET6;
    uint16_t port;

    if (client_send(c, v6 ? "EPSV" : "PASV") < 0 || client_read_reply(c, &reply, NULL, NULL) < 0) {
        snprintf(err, errlen, "control connection lost");
        return -1;
    }
    if (v6) {
        if (reply.code != 229 || ftp_parse_epsv_reply(reply.text, &port) < 0) {
            snprintf(err, errlen, "EPSV: %s", reply.text);
            return -1;
        }
    } else {
        struct sockaddr_storage named;
        if (reply.code != 227 || ftp_parse_pasv_reply(reply.text, &named) < 0) {
            snprintf(err, errlen, "PASV: %s", reply.text);
            return -1;
        }
        port = netaddr_port(&named);
    }
    *addr = c->server;
    netaddr_set_port(addr, port);
    return 0;
}

/* MODE S connection for a listing. */
static int open_listing_connection(struct client *c, char *err, size_t errlen)
{
    struct sockaddr_storage addr;

    if (request_passive(c, &addr, err, errlen) < 0)
        return -1;
    return data_connect(&addr, &c->tuning, err, errlen);
}

int client_list(struct client *c, const char *path, struct remote_entry **entries,
                size_t *count, char *err, size_t errlen)
{
    struct client_reply reply;
    size_t cap = 0, len = 0, used = 0;
    char *text = NULL;
    int sock, rc = -1;

    *entries = NULL;
    *count = 0;
    /* Listings travel in MODE S; MODE E is set again for the next file. */
    if (c->mode_e) {
        if (client_command(c, 200, err, errlen, "MODE S") < 0)
            return -1;
        c->mode_e = false;
        data_cache_close(&c->cache);
    }
    if (client_command(c, 200, err, errlen, "TYPE I") < 0)
        return -1;
    sock = open_listing_connection(c, err, errlen);
    if (sock < 0)
        return -1;
    if (client_send(c, "MLSD %s", path) < 0 || client_read_reply(c, &reply, NULL, NULL) < 0 ||
        (reply.code != 150 && reply.code != 125)) {
        snprintf(err, errlen, "MLSD %s: %s", path, c->reply);
        close(sock);
        return -1;
    }
    for (;;) {
        if (len + 65536 > cap) {
            char *grown = realloc(text, cap = cap * 2 + 65536);
            if (!grown) {
                snprintf(err, errlen, "out of memory");
                goto out;
            }
            text = grown;
        }
        ssize_t n = recv(sock, text + len, cap - len - 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(err, errlen, "MLSD %s: %s", path, strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    text[len] = '\0';
    if (client_read_reply(c, &reply, NULL, NULL) < 0 || reply.code != 226) {
        snprintf(err, errlen, "MLSD %s: %s", path, c->reply);
        goto out;
    }
    for (char *save = NULL, *line = strtok_r(text, "\r\n", &save); line;
         line = strtok_r(NULL, "\r\n", &save)) {
        struct remote_entry entry;
        if (parse_facts(line, &entry) < 0 || !strcmp(entry.name, ".") || !strcmp(entry.name, ".."))
            continue;
        struct remote_entry *grown = realloc(*entries, (used + 1) * sizeof entry);
        if (!grown) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        *entries = grown;
        (*entries)[used++] = entry;
    }
    *count = used;
    rc = 0;
out:
    free(text);
    close(sock);
    return rc;
}

int client_mkdir(struct client *c, const char *path, char *err, size_t errlen)
{
    struct client_reply reply;

    if (client_send(c, "MKD %s", path) < 0 || client_read_reply(c, &reply, NULL, NULL) < 0) {
        snprintf(err, errlen, "control connection lost");
        return -1;
    }
    if (reply.code == 257)
        return 0;
    snprintf(err, errlen, "MKD %s: %s", path, reply.text);
    return -1;
}

int client_checksum(struct client *c, enum ftp_cksum_alg alg, const char *path,
                    char hex[65], char *err, size_t errlen)
{
    struct client_reply reply;

    if (client_send(c, "CKSM %s 0 -1 %s", ftp_cksum_alg_name(alg), path) < 0 ||
        client_read_reply(c, &reply, NULL, NULL) < 0) {
        snprintf(err, errlen, "control connection lost");
        return -1;
    }
    if (reply.code != 213 || strlen(reply.text) < 5 || strlen(reply.text + 4) > 64) {
        snprintf(err, errlen, "CKSM %s: %s", path, reply.text);
        return -1;
    }
    snprintf(hex, 65, "%s", reply.text + 4);
    for (char *p = hex; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    return 0;
}

/* ---- transfers --------------------------------------------------------- */

/* A 111 Range Marker from the receiving server: those ranges are durable
 * there, so a restart need not send them again. */
static void relay_marker(void *ctx, const char *text)
{
    struct client_file *file = ctx;
    struct ftp_ranges ranges;

    if (file->durable && ftp_parse_ranges(text, &ranges) == 0)
        file->durable(file->durable_ctx, &ranges);
}

static int send_rest(struct client *c, const struct client_file *f)
{
    char ranges[FTP_RANGES_MAX * 42];

    if (!f->have || f->have->count == 0)
        return 0;
    if (!ftp_format_ranges(f->have, ranges, sizeof ranges))
        return -1;
    return client_send(c, "REST %s", ranges) < 0 ? -1 : 1;
}

static int expect_rest_reply(struct client *c, int sent, char *err, size_t errlen)
{
    struct client_reply reply;

    if (sent <= 0)
        return sent;
    if (client_read_reply(c, &reply, NULL, NULL) < 0 || reply.code != 350) {
        snprintf(err, errlen, "REST: %s", c->reply);
        return -1;
    }
    return 0;
}

static int expect_start(struct client *c, const char *what, const char *path, char *err,
                        size_t errlen)
{
    struct client_reply reply;

    if (client_read_reply(c, &reply, NULL, NULL) < 0) {
        snprintf(err, errlen, "control connection lost");
        return -1;
    }
    if (reply.code != 150 && reply.code != 125) {
        snprintf(err, errlen, "%s %s: %s", what, path, reply.text);
        return -1;
    }
    return 0;
}

static int expect_done(struct client *c, struct client_file *f, const char *what, char *err,
                       size_t errlen)
{
    struct client_reply reply;

    if (client_read_reply(c, &reply, relay_marker, f) < 0) {
        snprintf(err, errlen, "control connection lost");
        return -1;
    }
    if (reply.code != 226 && reply.code != 250) {
        snprintf(err, errlen, "%s %s: %s", what, f->remote, reply.text);
        return -1;
    }
    return 0;
}

/* Receiving: the server connects to our listener (PORT/EPRT), once; the
 * connections are then cached by both sides for the next files. */
static int ready_to_receive(struct client *c, char *err, size_t errlen)
{
    struct sockaddr_storage bound;
    socklen_t len = sizeof bound;
    char text[80];

    if (c->cache.count && !c->cache.sending)
        return 0;
    data_cache_close(&c->cache);
    if (c->listen_fd < 0) {
        c->listen_fd = data_listen(&c->local, c->data_port_lo, c->data_port_hi, &c->tuning,
                                   &bound, err, errlen);
        if (c->listen_fd < 0)
            return -1;
    } else if (getsockname(c->listen_fd, (struct sockaddr *)&bound, &len) < 0) {
        snprintf(err, errlen, "getsockname: %s", strerror(errno));
        return -1;
    }
    if (bound.ss_family == AF_INET) {
        ftp_format_hostport(&bound, text, sizeof text);
        return client_command(c, 200, err, errlen, "PORT %s", text);
    }
    ftp_format_eprt(&bound, text, sizeof text);
    return client_command(c, 200, err, errlen, "EPRT %s", text);
}

/* Sending: the connections are made as soon as the server names its passive
 * port (globus-gridftp-server answers STOR only once they exist). */
static int ready_to_send(struct client *c, char *err, size_t errlen)
{
    struct sockaddr_storage addr;

    if (c->cache.count && c->cache.sending)
        return 0;
    data_cache_close(&c->cache);
    if (request_passive(c, &addr, err, errlen) < 0)
        return -1;
    for (unsigned i = 0; i < c->streams; i++) {
        int fd = data_connect(&addr, &c->tuning, err, errlen);
        if (fd < 0) {
            data_cache_close(&c->cache);
            return -1;
        }
        data_cache_add(&c->cache, fd);
    }
    c->cache.sending = true;
    return 0;
}

static int receive_file(struct client *c, struct client_file *f, char *err, size_t errlen)
{
    struct ftp_ranges received = {0};

    /* What the file held goes now that its data begins, not when the batch
     * was opened (a batch failing earlier leaves it be). */
    if (f->empty_first && ftruncate(f->local_fd, 0) < 0) {
        snprintf(err, errlen, "truncating the local file: %s", strerror(errno));
        return -1;
    }
    if (f->have)
        received = *f->have;
    struct modee_recv_job job = {
        .file_fd = f->local_fd, .listen_fd = c->listen_fd, .allowed_peer = &c->server,
        .tuning = &c->tuning, .cache = &c->cache, .received = &received,
        .marker_interval_ms = 2000, .marker = f->durable, .marker_ctx = f->durable_ctx,
        .watch_fd = c->in_fd, .watch = sender_gave_up, .watch_ctx = c,
        .progress = c->progress,
    };
    return modee_recv(&job, &f->stats, err, errlen);
}

static int send_file(struct client *c, struct client_file *f, char *err, size_t errlen)
{
    struct modee_send_job job = {
        .file_fd = f->local_fd, .start = 0, .end = f->size, .skip = f->have,
        .tuning = &c->tuning, .progress = c->progress,
    };
    return modee_send(&c->cache, &job, &f->stats, err, errlen);
}

/* Sending failed because the receiving server dropped the data connections:
 * its reply says why (452 for a full disk) and its last 111 Range Marker
 * says what it kept; both are worth a short wait. */
static void take_receivers_reason(struct client *c, struct client_file *f, char *err,
                                  size_t errlen)
{
    struct client_reply reply;
    int timeout_ms = c->timeout_ms;

    c->timeout_ms = RECEIVER_REASON_WAIT_MS;
    if (client_read_reply(c, &reply, relay_marker, f) == 0 && reply.code >= 400)
        snprintf(err, errlen, "STOR %s: %s", f->remote, reply.text);
    c->timeout_ms = timeout_ms;
}

struct direction {
    const char *verb;                  /* RETR or STOR */
    int (*ready)(struct client *c, char *err, size_t errlen);
    int (*move)(struct client *c, struct client_file *f, char *err, size_t errlen);
    /* After move() failed: what the other side has to say, if anything. */
    void (*explain)(struct client *c, struct client_file *f, char *err, size_t errlen);
};

static const struct direction getting = {"RETR", ready_to_receive, receive_file, NULL};
static const struct direction putting = {"STOR", ready_to_send, send_file,
                                         take_receivers_reason};

/* Pipelined batches: the whole batch's REST/RETR or REST/STOR commands go out,
 * then each file's replies are read and its data moved, in order. */
static int transfer(struct client *c, const struct direction *d, struct client_file *files,
                    size_t n, size_t *failed, char *err, size_t errlen)
{
    if (client_prepare(c, err, errlen) < 0)
        return -1;
    for (size_t base = 0; base < n; base += PIPELINE_DEPTH) {
        size_t batch = n - base < PIPELINE_DEPTH ? n - base : PIPELINE_DEPTH;
        int rest_sent[PIPELINE_DEPTH];

        *failed = base;
        if (d->ready(c, err, errlen) < 0)
            return -1;
        for (size_t i = 0; i < batch; i++) {
            struct client_file *f = &files[base + i];
            rest_sent[i] = send_rest(c, f);
            if (rest_sent[i] < 0 || client_send(c, "%s %s", d->verb, f->remote) < 0) {
                *failed = base + i;
                snprintf(err, errlen, "control connection lost");
                return -1;
            }
        }
        for (size_t i = 0; i < batch; i++) {
            struct client_file *f = &files[base + i];
            *failed = base + i;
            if (expect_rest_reply(c, rest_sent[i], err, errlen) < 0 ||
                expect_start(c, d->verb, f->remote, err, errlen) < 0)
                return -1;
            if (d->move(c, f, err, errlen) < 0) {
                data_cache_close(&c->cache);
                if (d->explain)
                    d->explain(c, f, err, errlen);
                return -1;
            }
            if (expect_done(c, f, d->verb, err, errlen) < 0)
                return -1;
        }
    }
    return 0;
}

int client_get(struct client *c, struct client_file *files, size_t n, size_t *failed,
               char *err, size_t errlen)
{
    return transfer(c, &getting, files, n, failed, err, errlen);
}

int client_put(struct client *c, struct client_file *files, size_t n, size_t *failed,
               char *err, size_t errlen)
{
    return transfer(c, &putting, files, n, failed, err, errlen);
}
