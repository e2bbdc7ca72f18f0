#include "session.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "cksum.h"
#include "ftp.h"
#include "log.h"
#include "netaddr.h"
#include "xferlog.h"

#define LOGIN_ATTEMPTS_MAX 3

struct session {
    const struct server_config *config;
    int in_fd;
    int out_fd;
    char inbuf[FTP_LINE_MAX];
    size_t inbuf_len;
    char line[FTP_LINE_MAX];        /* the command being served */
    bool closing;

    struct sockaddr_storage peer;   /* control peer: data connections must come from it */
    struct sockaddr_storage local;
    char peer_text[64];

    char user[64];
    bool user_given;
    bool logged_in;
    bool may_write;
    unsigned failed_logins;
    char cwd[PATH_MAX];

    bool mode_e;
    unsigned parallelism;
    struct data_tuning tuning;
    int pasv_fd;                    /* passive listener, -1 when none */
    bool have_port;
    struct sockaddr_storage port_addr;
    struct data_cache cache;
    bool have_rest;
    struct ftp_ranges rest;         /* MODE E: ranges the receiver holds */
    uint64_t rest_offset;           /* MODE S: byte offset */
    unsigned refused_data;
};

/* ---- replies ----------------------------------------------------------- */

static void send_text(struct session *s, const char *text, size_t len)
{
    while (len > 0 && !s->closing) {
        ssize_t n = write(s->out_fd, text, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            s->closing = true;   /* the client is gone; end the session */
            return;
        }
        text += n;
        len -= (size_t)n;
    }
}

static void reply(struct session *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void reply(struct session *s, int code, const char *fmt, ...)
{
    char line[FTP_LINE_MAX];
    int n = snprintf(line, sizeof line, "%d ", code);
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n - 2, fmt, ap);
    va_end(ap);
    /* A reply never carries the peer's CR or LF back (no reply splitting). */
    for (char *p = line; *p; p++)
        if (*p == '\r' || *p == '\n')
            *p = ' ';
    strcat(line, "\r\n");
    send_text(s, line, strlen(line));
}

static void reply_errno(struct session *s, const char *what, int err)
{
    switch (err) {
    case ENOENT: reply(s, 550, "%s: no such file or directory", what); break;
    case EACCES: case EPERM: reply(s, 550, "%s: permission denied", what); break;
    case EXDEV: reply(s, 550, "%s: a symbolic link leads outside the served roots", what); break;
    case ELOOP: reply(s, 550, "%s: symbolic links are not followed here (no openat2)", what); break;
    case EINVAL: reply(s, 553, "%s: path not allowed ('..' or too long)", what); break;
    case ENOSPC: case EDQUOT:
        reply(s, 452, "%s: %s; the partial file is kept for a restart", what, strerror(err));
        break;
    default: reply(s, 550, "%s: %s", what, strerror(err)); break;
    }
}

/* ---- control channel input --------------------------------------------- */

/* One line without its CRLF, or NULL at the end of the session. */
static char *read_line(struct session *s, size_t *len)
{
    for (;;) {
        char *eol = memchr(s->inbuf, '\n', s->inbuf_len);
        if (eol) {
            size_t line_len = (size_t)(eol - s->inbuf);
            char *line = s->line;
            memcpy(line, s->inbuf, line_len);
            if (line_len && line[line_len - 1] == '\r')
                line_len--;
            memmove(s->inbuf, eol + 1, s->inbuf_len - (size_t)(eol - s->inbuf) - 1);
            s->inbuf_len -= (size_t)(eol - s->inbuf) + 1;
            *len = line_len;
            return line;
        }
        if (s->inbuf_len == sizeof s->inbuf) {
            reply(s, 500, "command line longer than %d bytes", FTP_LINE_MAX - 2);
            return NULL;
        }
        struct pollfd pfd = {.fd = s->in_fd, .events = POLLIN};
        int rc = poll(&pfd, 1, s->config->idle_timeout_s * 1000);
        if (rc == 0) {
            reply(s, 421, "idle for %d s; closing the session", s->config->idle_timeout_s);
            return NULL;
        }
        if (rc < 0 && errno == EINTR)
            continue;
        ssize_t n = rc < 0 ? -1 : read(s->in_fd, s->inbuf + s->inbuf_len,
                                       sizeof s->inbuf - s->inbuf_len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return NULL;
        s->inbuf_len += (size_t)n;
    }
}

/* ---- paths ------------------------------------------------------------- */

static bool resolve(struct session *s, const char *arg, struct rootfs_path *out)
{
    if (!*arg) {
        reply(s, 501, "a path is required");
        return false;
    }
    if (rootfs_resolve(&s->config->roots, s->cwd, arg, out) < 0) {
        if (errno == EACCES)
            reply(s, 550, "%s: outside the served roots", arg);
        else
            reply_errno(s, arg, errno);
        log_msg(LOG_WARN, "%s %s: path refused: %s", s->peer_text, s->user, arg);
        return false;
    }
    return true;
}

/* ---- data connections -------------------------------------------------- */

static void drop_passive(struct session *s)
{
    if (s->pasv_fd >= 0)
        close(s->pasv_fd);
    s->pasv_fd = -1;
}

static void forget_data_target(struct session *s)
{
    drop_passive(s);
    s->have_port = false;
    data_cache_close(&s->cache);
}

static void cmd_pasv(struct session *s, int style)
{
    struct sockaddr_storage bound;
    char err[160], text[64];

    forget_data_target(s);
    s->pasv_fd = data_listen(&s->local, s->config->data_port_lo, s->config->data_port_hi,
                             &s->tuning, &bound, err, sizeof err);
    if (s->pasv_fd < 0) {
        log_msg(LOG_ERROR, "%s: passive listener: %s", s->peer_text, err);
        reply(s, 425, "cannot open a passive data port: %s", err);
        return;
    }
    if (style == 'E') {
        reply(s, 229, "Entering Extended Passive Mode (|||%u|)", (unsigned)netaddr_port(&bound));
        return;
    }
    if (bound.ss_family != AF_INET) {
        reply(s, 522, "PASV and SPAS are IPv4 only; use EPSV");
        drop_passive(s);
        return;
    }
    ftp_format_hostport(&bound, text, sizeof text);
    if (style == 'S') {
        char lines[160];
        snprintf(lines, sizeof lines, "229-Entering Striped Passive Mode\r\n %s\r\n229 End\r\n", text);
        send_text(s, lines, strlen(lines));
    } else {
        reply(s, 227, "Entering Passive Mode (%s)", text);
    }
}

static void cmd_port(struct session *s, const char *arg, int style)
{
    struct sockaddr_storage addr;
    int rc = style == 'E' ? ftp_parse_eprt(arg, &addr) : ftp_parse_hostport(arg, &addr);

    if (rc < 0) {
        reply(s, 501, "malformed address: %s", arg);
        return;
    }
    /* No FTP bounce: data goes only to the host on the control connection,
     * and never to a privileged port. */
    if (!netaddr_same_host(&addr, &s->peer) || netaddr_port(&addr) < 1024) {
        char text[80];
        netaddr_format(&addr, text, sizeof text);
        log_msg(LOG_WARN, "%s: refused data address %s (bounce)", s->peer_text, text);
        reply(s, 504, "data connections go only to the client's own address, port 1024 or above");
        return;
    }
    forget_data_target(s);
    s->port_addr = addr;
    s->have_port = true;
    reply(s, 200, "%s command successful", style == 'E' ? "EPRT" : style == 'S' ? "SPOR" : "PORT");
}

/* MODE S: one connection, from the passive listener or to the PORT address. */
static int open_stream_connection(struct session *s, char *err, size_t errlen)
{
    if (s->pasv_fd >= 0) {
        int fd = data_accept(s->pasv_fd, &s->peer, &s->tuning, 30000, &s->refused_data,
                             err, errlen);
        drop_passive(s);
        return fd;
    }
    if (s->have_port) {
        s->have_port = false;
        return data_connect(&s->port_addr, &s->tuning, err, errlen);
    }
    snprintf(err, errlen, "no data connection set up (use PASV, EPSV, PORT or EPRT first)");
    return -1;
}

/* The MODE S connection of a transfer or listing, announced with 150; on
 * failure the client gets the 425 and -1 comes back. */
static int begin_stream_transfer(struct session *s, const char *what)
{
    char err[160];
    int sock = open_stream_connection(s, err, sizeof err);

    if (sock < 0)
        reply(s, 425, "%s", err);
    else
        reply(s, 150, "Opening BINARY mode data connection for %s.", what);
    return sock;
}

/* MODE E sending: the sender opens the connections (GFD.20), so PORT is
 * needed unless connections from an earlier send are cached. */
static int open_send_streams(struct session *s, bool *reused, char *err, size_t errlen)
{
    *reused = false;
    if (s->cache.count && s->cache.sending) {
        *reused = true;
        return 0;
    }
    data_cache_close(&s->cache);
    if (!s->have_port) {
        snprintf(err, errlen, "MODE E sending needs PORT, EPRT or SPOR (the sender opens "
                 "the data connections)");
        return -1;
    }
    for (unsigned i = 0; i < s->parallelism; i++) {
        int fd = data_connect(&s->port_addr, &s->tuning, err, errlen);
        if (fd < 0) {
            data_cache_close(&s->cache);
            return -1;
        }
        data_cache_add(&s->cache, fd);
    }
    s->cache.sending = true;
    return 0;
}

/* ---- transfers --------------------------------------------------------- */

struct transfer {
    const char *type;            /* RETR, STOR, ERET, ESTO */
    struct rootfs_path path;
    double start;
    struct xfer_stats stats;
};

static void log_transfer(struct session *s, const struct transfer *t, int code)
{
    struct xferlog_entry entry = {
        .start = t->start, .end = wall_seconds(), .host = s->config->hostname,
        .program = "sdmz-xferd", .user = s->user, .file = t->path.canon,
        .buffer = (uint64_t)(s->tuning.sndbuf > 0 ? s->tuning.sndbuf : 0),
        .block = s->tuning.block_size, .nbytes = t->stats.bytes, .dest = s->peer_text,
        .type = t->type, .code = code, .stats = &t->stats,
    };

    if (s->config->transfer_log_fd >= 0 && xferlog_write(s->config->transfer_log_fd, &entry) < 0)
        log_msg(LOG_ERROR, "transfer log: %s", strerror(errno));
    /* Where the transfer log keeps the record, a good transfer is only a
     * debug line: journald rate-limits a service (10,000 lines per 30 s by
     * default), and a tree of small files would crowd out what matters. */
    bool recorded = s->config->transfer_log_fd >= 0 && code < 400;
    log_msg(recorded ? LOG_DEBUG : LOG_INFO,
            "%s %s %s %s: %" PRIu64 " bytes, %u streams, %.3f s, code %d",
            s->peer_text, s->user, t->type, t->path.canon, t->stats.bytes, t->stats.streams,
            t->stats.seconds, code);
}

static void finish_transfer(struct session *s, struct transfer *t, int rc, const char *err,
                            int err_code)
{
    if (rc == 0) {
        reply(s, 226, "Transfer complete");
        log_transfer(s, t, 226);
        return;
    }
    log_msg(LOG_ERROR, "%s %s %s %s: %s", s->peer_text, s->user, t->type, t->path.canon, err);
    reply(s, err_code, "%s", err);
    log_transfer(s, t, err_code);
}

static void cmd_retr(struct session *s, const char *arg, bool partial)
{
    struct transfer t = {.type = partial ? "ERET" : "RETR", .start = wall_seconds()};
    uint64_t offset = 0, length = 0;
    const char *path = arg;
    char err[256] = "";
    bool restart = s->have_rest;   /* REST applies to this command only */
    struct stat st;
    int fd, rc;

    s->have_rest = false;
    if (partial && ftp_parse_partial(arg, &offset, &length, &path) < 0) {
        reply(s, 501, "ERET takes: P OFFSET LENGTH PATH");
        return;
    }
    if (!resolve(s, path, &t.path))
        return;
    fd = rootfs_open(&t.path, O_RDONLY, 0);
    if (fd < 0 || fstat(fd, &st) < 0) {
        reply_errno(s, t.path.canon, errno);
        if (fd >= 0)
            close(fd);
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        reply(s, 550, "%s: not a regular file", t.path.canon);
        close(fd);
        return;
    }
    uint64_t size = (uint64_t)st.st_size, start = 0, end = size;
    if (partial) {
        if (offset > size || length > size - offset) {
            reply(s, 501, "ERET range %" PRIu64 "+%" PRIu64 " is past the end (%" PRIu64 " bytes)",
                  offset, length, size);
            close(fd);
            return;
        }
        start = offset;
        end = offset + length;
    }
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);

    if (s->mode_e) {
        bool reused;
        if (open_send_streams(s, &reused, err, sizeof err) < 0) {
            reply(s, 425, "%s", err);
            close(fd);
            return;
        }
        reply(s, reused ? 125 : 150, reused ? "Beginning transfer; reusing existing data "
              "connection." : "Beginning transfer.");
        struct modee_send_job job = {
            .file_fd = fd, .start = start, .end = end, .offset_shift = start,
            .skip = restart ? &s->rest : NULL, .tuning = &s->tuning,
        };
        rc = modee_send(&s->cache, &job, &t.stats, err, sizeof err);
        if (rc < 0)
            data_cache_close(&s->cache);
    } else {
        int sock = begin_stream_transfer(s, t.path.canon);
        if (sock < 0) {
            close(fd);
            return;
        }
        if (restart)
            start = s->rest_offset < end ? s->rest_offset : end;
        rc = stream_send_fd(sock, fd, start, end, &t.stats, err, sizeof err);
        close(sock);
    }
    close(fd);
    finish_transfer(s, &t, rc, err, 426);
}

/* 111 restart markers: the client may resume from any range listed, since
 * modee_recv() reports only ranges an fdatasync has made durable. */
static void send_range_marker(void *ctx, const struct ftp_ranges *durable)
{
    struct session *s = ctx;
    char ranges[FTP_RANGES_MAX * 42];

    if (durable->count == 0 || !ftp_format_ranges(durable, ranges, sizeof ranges))
        return;
    reply(s, 111, "Range Marker %s", ranges);
}

static void cmd_stor(struct session *s, const char *arg, bool partial)
{
    struct transfer t = {.type = partial ? "ESTO" : "STOR", .start = wall_seconds()};
    uint64_t shift = 0;
    const char *path = arg;
    char err[256] = "";
    bool restart = s->have_rest;   /* REST applies to this command only */
    int fd, rc;

    s->have_rest = false;

    if (!s->may_write) {
        reply(s, 550, "this login may not write (anonymous access is read-only)");
        log_msg(LOG_WARN, "%s %s: write refused: %s", s->peer_text, s->user, arg);
        return;
    }
    if (partial) {
        /* ESTO A OFFSET PATH: blocks land at their offset + OFFSET. */
        char *end;
        if (arg[0] != 'A' || arg[1] != ' ' || arg[2] < '0' || arg[2] > '9') {
            reply(s, 501, "ESTO takes: A OFFSET PATH");
            return;
        }
        errno = 0;
        shift = strtoull(arg + 2, &end, 10);
        if (errno || *end != ' ' || !end[1] || shift > INT64_MAX) {
            reply(s, 501, "ESTO takes: A OFFSET PATH");
            return;
        }
        path = end + 1;
    }
    if (!resolve(s, path, &t.path))
        return;
    /* A restart or a partial store writes into the file as it is; a plain
     * STOR replaces it, but only once its data connection is there: a STOR
     * refused for want of one leaves the old file untouched. */
    bool replace = !restart && !partial;
    fd = rootfs_open(&t.path, O_WRONLY | O_CREAT, 0666);
    if (fd < 0) {
        reply_errno(s, t.path.canon, errno);
        return;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        reply(s, 550, "%s: not a regular file", t.path.canon);
        close(fd);
        return;
    }
    /* A restart trusts the ranges it names; a file shorter than they claim
     * was changed since (or never held them), and filling it would leave
     * holes of zeros that nothing reports. */
    uint64_t claimed = !restart ? 0 : s->mode_e ? ftp_ranges_end(&s->rest) : s->rest_offset;
    if (claimed > (uint64_t)st.st_size) {
        reply(s, 554, "%s holds %" PRIu64 " bytes, but the restart claims %" PRIu64
              ": the partial file changed; store it again without REST", t.path.canon,
              (uint64_t)st.st_size, claimed);
        log_msg(LOG_WARN, "%s %s: restart past the end of %s refused", s->peer_text, s->user,
                t.path.canon);
        close(fd);
        return;
    }

    if (s->mode_e) {
        if (s->have_port && !s->cache.count) {
            reply(s, 425, "MODE E receiving needs PASV, EPSV or SPAS (the sender opens the "
                  "data connections)");
            close(fd);
            return;
        }
        if (s->cache.count && s->cache.sending)
            data_cache_close(&s->cache);
        if (s->pasv_fd < 0 && !s->cache.count) {
            reply(s, 425, "no data connection set up (use PASV, EPSV or SPAS first)");
            close(fd);
            return;
        }
        if (replace && ftruncate(fd, 0) < 0) {
            reply_errno(s, t.path.canon, errno);
            close(fd);
            return;
        }
        reply(s, s->cache.count ? 125 : 150, s->cache.count ? "Beginning transfer; reusing "
              "existing data connection." : "Beginning transfer.");
        struct ftp_ranges received = {0};
        if (restart)
            received = s->rest;
        struct modee_recv_job job = {
            .file_fd = fd, .offset_shift = shift, .listen_fd = s->pasv_fd,
            .allowed_peer = &s->peer, .tuning = &s->tuning, .cache = &s->cache,
            .received = &received, .marker_interval_ms = s->config->marker_interval_ms,
            .marker = send_range_marker, .marker_ctx = s, .refused = &s->refused_data,
        };
        rc = modee_recv(&job, &t.stats, err, sizeof err);
    } else {
        int sock = begin_stream_transfer(s, t.path.canon);
        if (sock < 0) {
            close(fd);
            return;
        }
        if (replace && ftruncate(fd, 0) < 0) {
            t.stats.write_errno = errno;
            snprintf(err, sizeof err, "truncating: %s", strerror(errno));
            rc = -1;
        } else {
            rc = stream_recv_fd(sock, fd, restart ? s->rest_offset : 0, &t.stats, err,
                                sizeof err);
        }
        close(sock);
        if (rc == 0 && fdatasync(fd) < 0) {
            t.stats.write_errno = errno;
            snprintf(err, sizeof err, "fdatasync: %s", strerror(errno));
            rc = -1;
        }
    }
    close(fd);
    int code = t.stats.write_errno == ENOSPC || t.stats.write_errno == EDQUOT ? 452 : 426;
    if (code == 452)
        snprintf(err + strlen(err), sizeof err - strlen(err),
                 "; the partial file is kept for a restart");
    finish_transfer(s, &t, rc, err, code);
}

/* ---- listings ---------------------------------------------------------- */

static void format_facts(const struct stat *st, const char *type, char *buf, size_t len)
{
    struct tm tm;
    char modify[32];

    gmtime_r(&st->st_mtime, &tm);
    strftime(modify, sizeof modify, "%Y%m%d%H%M%S", &tm);
    snprintf(buf, len, "Type=%s;Modify=%s;Size=%" PRIu64 ";Perm=%s;UNIX.mode=%04o;",
             type, modify, (uint64_t)st->st_size, S_ISDIR(st->st_mode) ? "el" : "r",
             (unsigned)(st->st_mode & 07777));
}

static const char *fact_type(const struct stat *st)
{
    return S_ISDIR(st->st_mode) ? "dir" : S_ISREG(st->st_mode) ? "file" : "OS.unix=other";
}

static void cmd_mlst(struct session *s, const char *arg)
{
    struct rootfs_path path;
    struct stat st;
    char facts[256], lines[2 * PATH_MAX + 320];

    if (!resolve(s, *arg ? arg : ".", &path))
        return;
    if (rootfs_stat(&path, &st) < 0) {
        reply_errno(s, path.canon, errno);
        return;
    }
    format_facts(&st, fact_type(&st), facts, sizeof facts);
    snprintf(lines, sizeof lines, "250-Listing %s\r\n %s %s\r\n250 End.\r\n", path.canon,
             facts, path.canon);
    send_text(s, lines, strlen(lines));
}

static void cmd_mlsd(struct session *s, const char *arg)
{
    struct rootfs_path path;
    struct stat st;
    char err[160], facts[256], line[PATH_MAX + 300];
    int dirfd, sock;
    DIR *dir;

    if (s->mode_e) {
        reply(s, 504, "MLSD is served in MODE S");
        return;
    }
    if (!resolve(s, *arg ? arg : ".", &path))
        return;
    dirfd = rootfs_open(&path, O_RDONLY | O_DIRECTORY, 0);
    if (dirfd < 0) {
        reply_errno(s, path.canon, errno);
        return;
    }
    dir = fdopendir(dirfd);
    if (!dir) {
        reply_errno(s, path.canon, errno);
        close(dirfd);
        return;
    }
    sock = begin_stream_transfer(s, path.canon);
    if (sock < 0) {
        closedir(dir);
        return;
    }
    int rc = 0;
    for (struct dirent *de; rc == 0 && (de = readdir(dir));) {
        const char *type;
        if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        if (strcmp(de->d_name, ".") == 0)
            type = "cdir";
        else if (strcmp(de->d_name, "..") == 0)
            type = "pdir";
        else
            type = S_ISLNK(st.st_mode) ? "OS.unix=slink" : fact_type(&st);
        format_facts(&st, type, facts, sizeof facts);
        snprintf(line, sizeof line, "%s %s\r\n", facts, de->d_name);
        rc = stream_send_buf(sock, line, strlen(line), err, sizeof err);
    }
    closedir(dir);
    close(sock);
    if (rc == 0)
        reply(s, 226, "Listing complete");
    else
        reply(s, 426, "%s", err);
}

/* ---- small commands ---------------------------------------------------- */

static void cmd_size(struct session *s, const char *arg)
{
    struct rootfs_path path;
    struct stat st;

    if (!resolve(s, arg, &path))
        return;
    if (rootfs_stat(&path, &st) < 0)
        reply_errno(s, path.canon, errno);
    else if (!S_ISREG(st.st_mode))
        reply(s, 550, "%s: not a regular file", path.canon);
    else
        reply(s, 213, "%" PRIu64, (uint64_t)st.st_size);
}

static void cmd_cksm(struct session *s, const char *arg)
{
    enum ftp_cksum_alg alg;
    uint64_t offset;
    int64_t length;
    const char *file;
    struct rootfs_path path;
    char hex[CKSUM_HEX_MAX], err[160];
    int fd;

    if (ftp_parse_cksm(arg, &alg, &offset, &length, &file) < 0) {
        reply(s, 501, "CKSM takes: ADLER32|MD5|SHA256 OFFSET LENGTH|-1 PATH");
        return;
    }
    if (!resolve(s, file, &path))
        return;
    fd = rootfs_open(&path, O_RDONLY, 0);
    if (fd < 0) {
        reply_errno(s, path.canon, errno);
        return;
    }
    if (cksum_fd(fd, alg, offset, length, hex, err, sizeof err) < 0)
        reply(s, 550, "%s: %s", path.canon, err);
    else
        reply(s, 213, "%s", hex);
    close(fd);
}

static void cmd_cwd(struct session *s, const char *arg)
{
    struct rootfs_path path;
    struct stat st;

    if (!resolve(s, arg, &path))
        return;
    if (rootfs_stat(&path, &st) < 0) {
        reply_errno(s, path.canon, errno);
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        reply(s, 550, "%s: not a directory", path.canon);
        return;
    }
    snprintf(s->cwd, sizeof s->cwd, "%s", path.canon);
    reply(s, 250, "CWD command successful.");
}

static void cmd_mkd(struct session *s, const char *arg)
{
    struct rootfs_path path;

    if (!s->may_write) {
        reply(s, 550, "this login may not write (anonymous access is read-only)");
        return;
    }
    if (!resolve(s, arg, &path))
        return;
    if (rootfs_mkdir(&path, 0777) < 0)
        reply_errno(s, path.canon, errno);
    else
        reply(s, 257, "\"%s\" directory created.", path.canon);
}

static void cmd_rest(struct session *s, const char *arg)
{
    if (s->mode_e) {
        if (ftp_parse_ranges(arg, &s->rest) < 0) {
            reply(s, 501, "MODE E REST takes ranges: START-END[,START-END...]");
            return;
        }
    } else {
        char *end;
        errno = 0;
        unsigned long long offset = strtoull(arg, &end, 10);
        if (errno || end == arg || *end || offset > INT64_MAX) {
            reply(s, 501, "REST takes a byte offset");
            return;
        }
        s->rest_offset = offset;
    }
    s->have_rest = true;
    reply(s, 350, "Restart marker accepted.");
}

static void cmd_opts(struct session *s, const char *arg)
{
    unsigned streams;

    if (strncasecmp(arg, "RETR ", 5) == 0) {
        if (ftp_parse_parallelism(arg, s->config->max_streams, &streams) < 0) {
            reply(s, 501, "OPTS RETR takes Parallelism=N[,MIN,MAX]; with N from 1 to %u",
                  s->config->max_streams);
            return;
        }
        if (streams != s->parallelism)
            data_cache_close(&s->cache);
        s->parallelism = streams;
        reply(s, 200, "OPTS Command Successful.");
    } else if (strncasecmp(arg, "UTF8 ", 5) == 0) {
        reply(s, 200, "UTF8 mode always on.");
    } else {
        reply(s, 501, "unsupported option: %s", arg);
    }
}

static void cmd_sbuf(struct session *s, const char *arg)
{
    char *end;
    unsigned long long size;

    errno = 0;
    size = strtoull(arg, &end, 10);
    if (errno || end == arg || *end || size > 1ull << 30) {
        reply(s, 501, "SBUF takes a buffer size in bytes, at most 1 GiB");
        return;
    }
    s->tuning.sndbuf = s->tuning.rcvbuf = (int)size;
    data_cache_close(&s->cache);   /* new buffers apply to new connections */
    reply(s, 200, "SBUF Command Successful.");
}

static void cmd_feat(struct session *s)
{
    static const char feat[] =
        "211-Extensions supported\r\n"
        " CKSM ADLER32;MD5;SHA256;\r\n"
        " PARALLEL\r\n"
        " SIZE\r\n"
        " MLST Type*;Size*;Modify*;Perm*;UNIX.mode*;\r\n"
        " ERET\r\n"
        " ESTO\r\n"
        " SPAS\r\n"
        " SPOR\r\n"
        " REST STREAM\r\n"
        " DCAU\r\n"
        " UTF8\r\n"
        "211 End.\r\n";

    send_text(s, feat, sizeof feat - 1);
}

static void cmd_site(struct session *s, const char *arg)
{
    if (strncasecmp(arg, "HELP", 4) == 0) {
        static const char help[] =
            "214-The following commands are recognized:\r\n"
            "    ALLO    CDUP    CKSM    CWD     DCAU    EPRT    EPSV    ERET\r\n"
            "    ESTO    FEAT    MKD     MLSD    MLST    MODE    NOOP    OPTS\r\n"
            "    PASS    PASV    PORT    PWD     QUIT    REST    RETR    SBUF\r\n"
            "    SITE    SIZE    SPAS    SPOR    STOR    SYST    TYPE    USER\r\n"
            "214 End\r\n";
        send_text(s, help, sizeof help - 1);
    } else if (strncasecmp(arg, "CLIENTINFO", 10) == 0) {
        reply(s, 250, "OK.");
    } else {
        reply(s, 500, "unsupported SITE command");
    }
}

/* ---- login ------------------------------------------------------------- */

static bool is_anonymous(const char *user)
{
    return strcmp(user, "anonymous") == 0 || strcmp(user, "ftp") == 0;
}

static void cmd_user(struct session *s, const char *arg)
{
    if (s->logged_in) {
        reply(s, 503, "already logged in");
        return;
    }
    if (!*arg || strlen(arg) >= sizeof s->user || strpbrk(arg, " \t=/")) {
        reply(s, 501, "malformed user name");
        return;
    }
    snprintf(s->user, sizeof s->user, "%s", arg);
    s->user_given = true;
    reply(s, 331, "Password required for %s.", s->user);
}

static void cmd_pass(struct session *s, const char *arg)
{
    const struct server_config *c = s->config;

    if (!s->user_given || s->logged_in) {
        reply(s, 503, "send USER first");
        return;
    }
    if (c->inetd) {
        /* sshftp: sshd authenticated the Unix user; USER/PASS are a formality. */
        snprintf(s->user, sizeof s->user, "%s", c->inetd_user);
        s->logged_in = s->may_write = true;
    } else if (is_anonymous(s->user) && c->anonymous_read) {
        snprintf(s->user, sizeof s->user, "anonymous");
        s->logged_in = true;
    } else if (!is_anonymous(s->user) && c->token_file &&
               auth_token_valid(c->token_file, s->user, arg)) {
        s->logged_in = s->may_write = true;
    }
    if (s->logged_in) {
        log_msg(LOG_INFO, "%s: %s logged in (%s)", s->peer_text, s->user,
                s->may_write ? "read-write" : "read-only");
        reply(s, 230, "User %s logged in.", s->user);
        return;
    }
    log_msg(LOG_WARN, "%s: login refused for %s", s->peer_text, s->user);
    s->user_given = false;
    if (++s->failed_logins >= LOGIN_ATTEMPTS_MAX) {
        reply(s, 421, "too many failed logins; closing the session");
        s->closing = true;
        return;
    }
    reply(s, 530, "Login incorrect.");
}

/* ---- dispatch ---------------------------------------------------------- */

static void dispatch(struct session *s, const struct ftp_command *cmd)
{
    const char *v = cmd->verb, *arg = cmd->arg;

    if (!strcmp(v, "USER")) return cmd_user(s, arg);
    if (!strcmp(v, "PASS")) return cmd_pass(s, arg);
    if (!strcmp(v, "QUIT")) {
        reply(s, 221, "Goodbye.");
        s->closing = true;
        return;
    }
    if (!strcmp(v, "FEAT")) return cmd_feat(s);
    if (!strcmp(v, "NOOP")) return reply(s, 200, "NOOP command successful.");
    if (!strcmp(v, "SYST")) return reply(s, 215, "UNIX Type: L8");
    if (!s->logged_in)
        return reply(s, 530, "Please login with USER and PASS.");

    if (!strcmp(v, "TYPE")) {
        if (!strcasecmp(arg, "I") || !strcasecmp(arg, "A") || !strcasecmp(arg, "L 8"))
            return reply(s, 200, "Type set to %c.", (char)toupper((unsigned char)arg[0]));
        return reply(s, 504, "TYPE %s is not supported", arg);
    }
    if (!strcmp(v, "MODE")) {
        if (!strcasecmp(arg, "S") || !strcasecmp(arg, "E")) {
            bool mode_e = toupper((unsigned char)arg[0]) == 'E';
            if (mode_e != s->mode_e)
                data_cache_close(&s->cache);
            s->mode_e = mode_e;
            return reply(s, 200, "Mode set to %c.", mode_e ? 'E' : 'S');
        }
        return reply(s, 504, "MODE %s is not supported", arg);
    }
    if (!strcmp(v, "STRU"))
        return !strcasecmp(arg, "F") ? reply(s, 200, "Structure set to F.")
                                     : reply(s, 504, "only STRU F");
    if (!strcmp(v, "DCAU"))
        return !strcasecmp(arg, "N") ? reply(s, 200, "DCAU N.")
                                     : reply(s, 504, "only DCAU N (no GSI on this server)");
    if (!strcmp(v, "PASV")) return cmd_pasv(s, 'P');
    if (!strcmp(v, "EPSV")) return cmd_pasv(s, 'E');
    if (!strcmp(v, "SPAS")) return cmd_pasv(s, 'S');
    if (!strcmp(v, "PORT")) return cmd_port(s, arg, 'P');
    if (!strcmp(v, "EPRT")) return cmd_port(s, arg, 'E');
    if (!strcmp(v, "SPOR")) return cmd_port(s, arg, 'S');
    if (!strcmp(v, "OPTS")) return cmd_opts(s, arg);
    if (!strcmp(v, "SBUF")) return cmd_sbuf(s, arg);
    if (!strcmp(v, "ALLO")) return reply(s, 200, "ALLO command successful.");
    if (!strcmp(v, "REST")) return cmd_rest(s, arg);
    if (!strcmp(v, "RETR")) return cmd_retr(s, arg, false);
    if (!strcmp(v, "ERET")) return cmd_retr(s, arg, true);
    if (!strcmp(v, "STOR")) return cmd_stor(s, arg, false);
    if (!strcmp(v, "ESTO")) return cmd_stor(s, arg, true);
    if (!strcmp(v, "SIZE")) return cmd_size(s, arg);
    if (!strcmp(v, "CKSM")) return cmd_cksm(s, arg);
    if (!strcmp(v, "MLST")) return cmd_mlst(s, arg);
    if (!strcmp(v, "MLSD")) return cmd_mlsd(s, arg);
    if (!strcmp(v, "CWD")) return cmd_cwd(s, arg);
    if (!strcmp(v, "CDUP")) return cmd_cwd(s, "..");
    if (!strcmp(v, "PWD")) return reply(s, 257, "\"%s\" is current directory.", s->cwd);
    if (!strcmp(v, "MKD")) return cmd_mkd(s, arg);
    if (!strcmp(v, "SITE")) return cmd_site(s, arg);
    if (!strcmp(v, "ABOR")) return reply(s, 226, "No transfer to abort.");
    reply(s, 502, "%s not implemented.", v);
}

void session_run(const struct server_config *config, int in_fd, int out_fd)
{
    struct session s = {
        .config = config, .in_fd = in_fd, .out_fd = out_fd, .parallelism = 1,
        .tuning = config->tuning, .pasv_fd = -1,
    };
    socklen_t len = sizeof s.peer;

    if (getpeername(in_fd, (struct sockaddr *)&s.peer, &len) < 0) {
        /* --inetd under sshd: stdin is a pipe; data connections come back
         * from the SSH client's address, given by sshd. */
        const char *conn = getenv("SSH_CONNECTION");
        char host[64] = "";
        if (!conn || sscanf(conn, "%63s", host) != 1 ||
            netaddr_parse_host(host, &s.peer) < 0) {
            log_msg(LOG_ERROR, "--inetd: stdin is not a socket and SSH_CONNECTION is unset");
            return;
        }
    }
    len = sizeof s.local;
    if (getsockname(in_fd, (struct sockaddr *)&s.local, &len) < 0) {
        const char *conn = getenv("SSH_CONNECTION");
        char host[3][64];
        if (!conn || sscanf(conn, "%63s %63s %63s", host[0], host[1], host[2]) != 3 ||
            netaddr_parse_host(host[2], &s.local) < 0)
            s.local = config->listen_addr;
    }
    netaddr_format_host(&s.peer, s.peer_text, sizeof s.peer_text);
    snprintf(s.cwd, sizeof s.cwd, "%s", config->roots.roots[0].path);
    snprintf(s.user, sizeof s.user, "-");
    reply(&s, 220, "%s sdmz-xferd ready (GridFTP MODE E, parallel streams).", config->hostname);

    while (!s.closing) {
        struct ftp_command cmd;
        char err[128];
        size_t line_len;
        char *line = read_line(&s, &line_len);

        if (!line)
            break;
        if (ftp_parse_command(line, line_len, &cmd, err, sizeof err) < 0) {
            reply(&s, 500, "%s", err);
            continue;
        }
        dispatch(&s, &cmd);
    }
    forget_data_target(&s);
    if (s.refused_data)
        log_msg(LOG_WARN, "%s: refused %u data connection(s) from other hosts", s.peer_text,
                s.refused_data);
    if (s.logged_in)
        log_msg(LOG_INFO, "%s: %s session ended", s.peer_text, s.user);
}
