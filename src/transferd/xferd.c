/* sdmz-xferd: the transfer server. The parent accepts control connections
 * and forks one process per session (bounded by --max-sessions); --inetd
 * serves a single session on stdin/stdout, which is how sshftp:// starts it
 * over sshd. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "auth.h"
#include "log.h"
#include "netaddr.h"
#include "session.h"
#include "units.h"

/* Set by the SIGTERM/SIGINT handler, read by the accept loop. */
static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void usage(FILE *out)
{
    fprintf(out,
        "usage: sdmz-xferd --root DIR [--root DIR ...] (--listen ADDR:PORT | --inetd)\n"
        "                  [--data-ports LO-HI] [--anonymous-read] [--token-file FILE]\n"
        "                  [--log FILE] [--max-sessions N] [--max-streams N]\n"
        "                  [--tcp-buffer BYTES] [--block BYTES] [--pacing-rate BITS]\n"
        "                  [--idle-timeout SECONDS] [--marker-interval SECONDS]\n"
        "                  [--check] [--verbose]\n"
        "  --root DIR          serve paths under DIR (repeatable); clients use real paths\n"
        "  --listen ADDR:PORT  control address, e.g. 198.18.1.11:2812 or [fd53::11]:2812\n"
        "  --data-ports LO-HI  passive data ports (default 50000-51000, the ACL's range)\n"
        "  --anonymous-read    USER anonymous may read; nobody anonymous may write\n"
        "  --token-file FILE   \"USER TOKEN\" lines (mode 0600) for read-write logins\n"
        "  --log FILE          GridFTP-format transfer log, one line per file\n"
        "  --inetd             one session on stdin/stdout (sshftp via sshd)\n"
        "  --tcp-buffer BYTES  SO_SNDBUF/SO_RCVBUF per data stream (DTN tuning; 0: auto)\n"
        "  --check             validate the options and exit\n");
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "sdmz-xferd: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return 2;
}

static int parse_options(int argc, char **argv, struct server_config *c, bool *check)
{
    enum { O_ROOT = 256, O_LISTEN, O_DATA, O_ANON, O_TOKEN, O_LOG, O_INETD, O_SESSIONS,
           O_STREAMS, O_BUFFER, O_BLOCK, O_PACING, O_IDLE, O_MARKERS, O_CHECK, O_VERBOSE, O_HELP };
    static const struct option options[] = {
        {"root", required_argument, NULL, O_ROOT},
        {"listen", required_argument, NULL, O_LISTEN},
        {"data-ports", required_argument, NULL, O_DATA},
        {"anonymous-read", no_argument, NULL, O_ANON},
        {"token-file", required_argument, NULL, O_TOKEN},
        {"log", required_argument, NULL, O_LOG},
        {"inetd", no_argument, NULL, O_INETD},
        {"max-sessions", required_argument, NULL, O_SESSIONS},
        {"max-streams", required_argument, NULL, O_STREAMS},
        {"tcp-buffer", required_argument, NULL, O_BUFFER},
        {"block", required_argument, NULL, O_BLOCK},
        {"pacing-rate", required_argument, NULL, O_PACING},
        {"idle-timeout", required_argument, NULL, O_IDLE},
        {"marker-interval", required_argument, NULL, O_MARKERS},
        {"check", no_argument, NULL, O_CHECK},
        {"verbose", no_argument, NULL, O_VERBOSE},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    char err[PATH_MAX + 64];
    const char *log_path = NULL;
    bool have_listen = false;
    uint64_t value;
    int opt;

    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (opt) {
        case O_ROOT:
            if (rootfs_add(&c->roots, optarg, err, sizeof err) < 0)
                return fail("%s", err);
            break;
        case O_LISTEN:
            if (netaddr_parse(optarg, &c->listen_addr, err, sizeof err) < 0)
                return fail("--listen %s", err);
            have_listen = true;
            break;
        case O_DATA:
            if (parse_port_range(optarg, 1024, &c->data_port_lo, &c->data_port_hi) < 0)
                return fail("--data-ports %s: expected LO-HI within 1024-65535", optarg);
            break;
        case O_ANON: c->anonymous_read = true; break;
        case O_TOKEN:
            if (auth_check_token_file(optarg, err, sizeof err) < 0)
                return fail("%s", err);
            c->token_file = optarg;
            break;
        case O_LOG: log_path = optarg; break;
        case O_INETD: c->inetd = true; break;
        case O_SESSIONS:
            if (parse_uint(optarg, 100000, &value) < 0 || value == 0)
                return fail("--max-sessions %s: expected 1 to 100000", optarg);
            c->max_sessions = (unsigned)value;
            break;
        case O_STREAMS:
            if (parse_uint(optarg, DATA_STREAMS_MAX, &value) < 0 || value == 0)
                return fail("--max-streams %s: expected 1 to 32", optarg);
            c->max_streams = (unsigned)value;
            break;
        case O_BUFFER:
            if (parse_bytes(optarg, &value) < 0 || value > (1u << 30))
                return fail("--tcp-buffer %s: expected bytes up to 1G (64M, 256K)", optarg);
            c->tuning.sndbuf = c->tuning.rcvbuf = (int)value;
            break;
        case O_BLOCK:
            if (parse_bytes(optarg, &value) < 0 || value < 4096 || value > (256u << 20))
                return fail("--block %s: expected 4K to 256M", optarg);
            c->tuning.block_size = (uint32_t)value;
            break;
        case O_PACING:
            if (parse_bits(optarg, &value) < 0)
                return fail("--pacing-rate %s: expected bits per second (500M, 10G)", optarg);
            c->tuning.pacing_rate = value;
            break;
        case O_IDLE:
            if (parse_uint(optarg, 86400, &value) < 0 || value == 0)
                return fail("--idle-timeout %s: expected 1 to 86400 seconds", optarg);
            c->idle_timeout_s = c->tuning.idle_timeout_s = (int)value;
            break;
        case O_MARKERS:
            if (parse_uint(optarg, 3600, &value) < 0 || value == 0)
                return fail("--marker-interval %s: expected 1 to 3600 seconds", optarg);
            c->marker_interval_ms = (int)value * 1000;
            break;
        case O_CHECK: *check = true; break;
        case O_VERBOSE: log_setup("sdmz-xferd", LOG_DEBUG); break;
        case O_HELP: usage(stdout); exit(0);
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc)
        return fail("unexpected argument '%s'", argv[optind]);
    if (c->roots.count == 0)
        return fail("%s", "at least one --root DIR is required");
    if (!have_listen && !c->inetd)
        return fail("%s", "--listen ADDR:PORT or --inetd is required");
    if (have_listen && c->inetd)
        return fail("%s", "--listen and --inetd exclude each other");
    if (!c->anonymous_read && !c->token_file && !c->inetd)
        return fail("%s", "no way to log in: give --anonymous-read, --token-file or --inetd");
    if (log_path) {
        c->transfer_log_fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
        if (c->transfer_log_fd < 0) {
            snprintf(err, sizeof err, "--log %s: %s", log_path, strerror(errno));
            return fail("%s", err);
        }
    }
    return 0;
}

static int open_listener(const struct server_config *c)
{
    char where[80];
    int one = 1, fd = socket(c->listen_addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

    netaddr_format(&c->listen_addr, where, sizeof where);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (const struct sockaddr *)&c->listen_addr, netaddr_len(&c->listen_addr)) < 0 ||
        listen(fd, 64) < 0) {
        log_msg(LOG_ERROR, "listen on %s: %s", where, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    log_msg(LOG_INFO, "listening on %s, data ports %u-%u, %u root(s)", where,
            (unsigned)c->data_port_lo, (unsigned)c->data_port_hi, c->roots.count);
    return fd;
}

/* The session processes this server started (max_sessions slots). */
struct sessions {
    pid_t *pids;
    unsigned capacity;
    unsigned active;
};

static void sessions_reap(struct sessions *set)
{
    pid_t pid;

    while (set->active > 0 && (pid = waitpid(-1, NULL, WNOHANG)) > 0) {
        for (unsigned i = 0; i < set->capacity; i++) {
            if (set->pids[i] == pid) {
                set->pids[i] = 0;
                set->active--;
                break;
            }
        }
    }
}

static void sessions_add(struct sessions *set, pid_t pid)
{
    for (unsigned i = 0; i < set->capacity; i++) {
        if (set->pids[i] == 0) {
            set->pids[i] = pid;
            set->active++;
            return;
        }
    }
}

/* Clean shutdown: every session is told to stop, then waited for. */
static void sessions_end(struct sessions *set)
{
    for (unsigned i = 0; i < set->capacity; i++)
        if (set->pids[i] > 0)
            kill(set->pids[i], SIGTERM);
    while (set->active > 0 && wait(NULL) > 0)
        set->active--;
}

static int serve(const struct server_config *c)
{
    struct sessions set = {.pids = calloc(c->max_sessions, sizeof(pid_t)),
                           .capacity = c->max_sessions};
    int listen_fd;

    if (!set.pids) {
        log_msg(LOG_ERROR, "out of memory");
        return 1;
    }
    listen_fd = open_listener(c);
    if (listen_fd < 0) {
        free(set.pids);
        return 1;
    }
    while (!stop_requested) {
        struct pollfd pfd = {.fd = listen_fd, .events = POLLIN};
        int rc = poll(&pfd, 1, 500);

        sessions_reap(&set);
        if (rc <= 0)
            continue;
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EINTR && errno != ECONNABORTED)
                log_msg(LOG_ERROR, "accept: %s", strerror(errno));
            continue;
        }
        if (set.active >= c->max_sessions) {
            static const char busy[] = "421 Too many sessions; try again later.\r\n";
            log_msg(LOG_WARN, "session refused: %u sessions already (--max-sessions)", set.active);
            if (send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
                /* The refusal is a courtesy; the close below is what counts. */
            }
            close(fd);
            continue;
        }
        /* Control replies are small and answered at once: Nagle's wait for
         * an ACK would add a delayed-ACK (40 ms) to every exchange. */
        int one = 1;
        if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
            log_msg(LOG_WARN, "TCP_NODELAY: %s", strerror(errno));
        pid_t pid = fork();
        if (pid < 0) {
            log_msg(LOG_ERROR, "fork: %s", strerror(errno));
            close(fd);
            continue;
        }
        if (pid == 0) {
            close(listen_fd);
            signal(SIGTERM, SIG_DFL);
            signal(SIGINT, SIG_DFL);
            session_run(c, fd, fd);
            close(fd);
            _exit(0);
        }
        close(fd);
        sessions_add(&set, pid);
    }
    close(listen_fd);
    log_msg(LOG_INFO, "stopping: ending %u session(s)", set.active);
    sessions_end(&set);
    free(set.pids);
    return 0;
}

int main(int argc, char **argv)
{
    struct server_config config = {
        .data_port_lo = 50000, .data_port_hi = 51000, .transfer_log_fd = -1,
        .max_sessions = 64, .max_streams = 16, .idle_timeout_s = 600,
        .marker_interval_ms = 5000,
        .tuning = {.block_size = DATA_BLOCK_DEFAULT, .idle_timeout_s = 600},
    };
    struct sigaction stop = {.sa_handler = on_stop};
    bool check = false;
    int rc;

    log_setup("sdmz-xferd", LOG_INFO);
    rc = parse_options(argc, argv, &config, &check);
    if (rc != 0)
        return rc;
    if (gethostname(config.hostname, sizeof config.hostname - 1) < 0)
        snprintf(config.hostname, sizeof config.hostname, "localhost");
    if (check) {
        printf("sdmz-xferd: configuration OK (%u root(s))\n", config.roots.count);
        return 0;
    }
    umask(022);
    signal(SIGPIPE, SIG_IGN);
    if (config.inetd) {
        struct passwd *pw = getpwuid(getuid());
        snprintf(config.inetd_user, sizeof config.inetd_user, "%s", pw ? pw->pw_name : "unknown");
        session_run(&config, STDIN_FILENO, STDOUT_FILENO);
        return 0;
    }
    sigaction(SIGTERM, &stop, NULL);
    sigaction(SIGINT, &stop, NULL);
    return serve(&config);
}
