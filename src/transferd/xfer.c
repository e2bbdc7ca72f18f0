/* sdmz-xfer: the transfer client. SRC and DST are local paths (or file://)
 * and ftp:// or sshftp:// URLs; one side is local. Files and directory trees;
 * every file goes over the same parallel MODE E streams, commands pipelined.
 * Exit codes: 0 done, 1 transfer failed, 2 usage, 3 cannot connect or log in,
 * 4 checksum mismatch. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cksum.h"
#include "client.h"
#include "progress.h"
#include "units.h"

/* Files open at once: well under the usual limit of 1024 descriptors. */
#define OPEN_FILES_MAX 256

enum { EXIT_FAILED = 1, EXIT_USAGE = 2, EXIT_CONNECT = 3, EXIT_CHECKSUM = 4 };

struct endpoint {
    bool remote;
    bool sshftp;
    char user[128];
    char password[256];
    char host[256];
    char port[8];
    char path[PATH_MAX];
};

struct options {
    unsigned streams;
    bool resume;
    bool verify;
    enum ftp_cksum_alg verify_alg;
    bool json;
    struct data_tuning tuning;
    uint16_t data_port_lo, data_port_hi;   /* 0, 0: an ephemeral port */
    char journal_dir[PATH_MAX];
};

static int usage(FILE *out, int code)
{
    fprintf(out,
        "usage: sdmz-xfer [-p N] [--resume] [--verify sha256|md5|adler32] [--rate BITS]\n"
        "                 [--tcp-buffer BYTES] [--block BYTES] [--data-ports LO-HI] [--json]\n"
        "                 SRC DST\n"
        "  SRC, DST   a local path (or file:///path) and ftp://[USER@]HOST[:PORT]/PATH or\n"
        "             sshftp://[USER@]HOST/PATH; files or directories (recursive)\n"
        "  -p N       parallel TCP streams (default 4)\n"
        "  --resume   continue an interrupted transfer from its journal; what the\n"
        "             receiver made durable is not sent again\n"
        "  --verify   compare a checksum of every file end to end; a mismatch fails\n"
        "  --rate     pacing per stream in bits per second (500M, 10G)\n"
        "  --data-ports LO-HI  where gets listen for the server's data connections\n"
        "             (the range the firewall opens; default GLOBUS_TCP_PORT_RANGE\n"
        "             \"LO,HI\" if set, else any port)\n"
        "  The token of an ftp:// USER is read from SDMZ_XFER_TOKEN (never the command line).\n");
    return code;
}

static int die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int die(int code, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "sdmz-xfer: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return code;
}

static int parse_endpoint(const char *text, struct endpoint *out)
{
    const char *rest, *slash, *at;

    memset(out, 0, sizeof *out);
    if (strncmp(text, "file://", 7) == 0)
        text += 7;
    if (strncmp(text, "ftp://", 6) == 0 || strncmp(text, "sshftp://", 9) == 0) {
        out->remote = true;
        out->sshftp = text[0] == 's';
        rest = text + (out->sshftp ? 9 : 6);
        slash = strchr(rest, '/');
        if (!slash || slash == rest)
            return -1;
        at = memchr(rest, '@', (size_t)(slash - rest));
        if (at) {
            const char *colon = memchr(rest, ':', (size_t)(at - rest));
            if (colon)   /* a password in a URL ends up in ps and shell history */
                return -1;
            snprintf(out->user, sizeof out->user, "%.*s", (int)(at - rest), rest);
            rest = at + 1;
        }
        const char *host_end = slash, *colon = NULL;
        if (*rest == '[') {
            const char *close = memchr(rest, ']', (size_t)(slash - rest));
            if (!close)
                return -1;
            snprintf(out->host, sizeof out->host, "%.*s", (int)(close - rest - 1), rest + 1);
            colon = close[1] == ':' ? close + 1 : NULL;
        } else {
            colon = memchr(rest, ':', (size_t)(slash - rest));
            host_end = colon ? colon : slash;
            snprintf(out->host, sizeof out->host, "%.*s", (int)(host_end - rest), rest);
        }
        snprintf(out->port, sizeof out->port, "%.*s", colon ? (int)(slash - colon - 1) : 4,
                 colon ? colon + 1 : "2811");
        snprintf(out->path, sizeof out->path, "%s", slash);
        return out->host[0] ? 0 : -1;
    }
    if (!*text)
        return -1;
    snprintf(out->path, sizeof out->path, "%s", text);
    return 0;
}

/* ---- journals ---------------------------------------------------------- */

/* A transfer's journals, in the journal directory:
 * - KEY.journal for a file under way: the ranges the receiver holds
 *   durably, rewritten at each restart marker;
 * - TOPKEY.done for the whole transfer: the KEY of each finished file, a
 *   line each. A finished file needs no journal of its own; creating and
 *   removing one per file cost more than a small file's transfer. */
struct journals {
    char dir[PATH_MAX];
    FILE *done;                 /* appended to as files finish */
    char done_path[PATH_MAX];
    char (*finished)[65];       /* --resume: the KEYs read from it, sorted */
    size_t nfinished;
    bool any_journal;           /* the folder held a KEY.journal(.tmp) when opened */
};

/* One file of the transfer, with its journal. */
struct job {
    char remote[PATH_MAX];
    char local[PATH_MAX];
    char key[65];               /* SHA-256 of (direction, source, destination) */
    bool has_journal;           /* KEY.journal exists */
    uint64_t size;
    struct ftp_ranges have;
    struct journals *journals;
    struct client_file file;
    bool created;               /* get: this run made the local file */
};

static void journal_key(const char *direction, const char *src, const char *dst,
                        char hex[65])
{
    unsigned char digest[32];
    unsigned digest_len = 0;
    char text[3 * PATH_MAX];

    snprintf(text, sizeof text, "%s\n%s\n%s", direction, src, dst);
    EVP_Digest(text, strlen(text), digest, &digest_len, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
}

static void journal_path(const struct job *j, char *out, size_t len)
{
    snprintf(out, len, "%s/%s.journal", j->journals->dir, j->key);
}

static int compare_keys(const void *a, const void *b)
{
    return memcmp(a, b, 64);
}

/* Whether dir holds any file journal (or a temporary one): when it holds
 * none, as after every clean run, no file needs its stale journal looked
 * for, and a tree of small files is spared two system calls a file. */
static bool dir_has_journal(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    bool found = false;

    if (!d)
        return true;   /* cannot tell: look per file */
    while (!found && (e = readdir(d)))
        found = strstr(e->d_name, ".journal") != NULL;
    closedir(d);
    return found;
}

/* Opens the transfer's done log; with --resume, reads what it lists first.
 * Lines that are not a whole KEY (torn by a crash) are ignored. */
static int journals_open(struct journals *js, const char *direction, const char *src,
                         const char *dst, bool resume)
{
    char top[65], line[80];
    size_t cap = 0;

    js->any_journal = dir_has_journal(js->dir);
    journal_key(direction, src, dst, top);
    if (snprintf(js->done_path, sizeof js->done_path, "%s/%s.done", js->dir, top) >=
        (int)sizeof js->done_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    FILE *f = resume ? fopen(js->done_path, "re") : NULL;
    while (f && fgets(line, sizeof line, f)) {
        if (strlen(line) != 65 || line[64] != '\n')
            continue;
        if (js->nfinished == cap) {
            cap = cap ? cap * 2 : 256;
            char (*grown)[65] = realloc(js->finished, cap * sizeof *grown);
            if (!grown) {
                fclose(f);
                return -1;
            }
            js->finished = grown;
        }
        memcpy(js->finished[js->nfinished], line, 64);
        js->finished[js->nfinished++][64] = '\0';
    }
    if (f)
        fclose(f);
    if (js->nfinished)
        qsort(js->finished, js->nfinished, sizeof *js->finished, compare_keys);
    js->done = fopen(js->done_path, resume ? "ae" : "we");
    return js->done ? 0 : -1;
}

static void journals_close(struct journals *js, bool finished)
{
    if (js->done)
        fclose(js->done);
    if (finished)
        unlink(js->done_path);
    free(js->finished);
}

/* "size N\nranges a-b,c-d\n": the ranges the receiver holds durably. A
 * file the done log lists is held whole. */
static void journal_load(struct job *j)
{
    char line[FTP_RANGES_MAX * 42 + 16], path[PATH_MAX + 80];
    uint64_t size = UINT64_MAX;
    struct journals *js = j->journals;

    j->have.count = 0;
    if (js->nfinished &&
        bsearch(j->key, js->finished, js->nfinished, sizeof *js->finished, compare_keys)) {
        if (j->size)
            ftp_ranges_add(&j->have, 0, j->size);
        return;
    }
    if (!js->any_journal)
        return;
    journal_path(j, path, sizeof path);
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    j->has_journal = true;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "size ", 5) == 0)
            size = strtoull(line + 5, NULL, 10);
        else if (strncmp(line, "ranges ", 7) == 0 && ftp_parse_ranges(line + 7, &j->have) < 0)
            j->have.count = 0;
    }
    fclose(f);
    if (size != j->size)   /* the source changed: start over */
        j->have.count = 0;
}

/* A file under way: its journal is written to a temporary file, synced and
 * renamed, so a crash leaves the old journal or the new one. A finished
 * file: a line in the done log, not synced (its data was, in modee_recv or
 * by the server before its marker): a crash can only lose the line or tear
 * it, and either means fetching the file again, never trusting it wrongly. */
static void journal_store(void *ctx, const struct ftp_ranges *durable)
{
    struct job *j = ctx;
    char path[PATH_MAX + 80], tmp[PATH_MAX + 88], ranges[FTP_RANGES_MAX * 42];
    int fd;

    journal_path(j, path, sizeof path);
    if (ftp_ranges_covered(durable, j->size) == j->size) {
        if (fprintf(j->journals->done, "%s\n", j->key) > 0 && fflush(j->journals->done) == 0 &&
            j->has_journal && unlink(path) == 0)
            j->has_journal = false;
        return;
    }
    if (!ftp_format_ranges(durable, ranges, sizeof ranges))
        return;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    bool synced = dprintf(fd, "size %" PRIu64 "\nranges %s\n", j->size, ranges) > 0 &&
                  fsync(fd) == 0;
    if (close(fd) == 0 && synced && rename(tmp, path) == 0) {
        j->has_journal = true;
        return;
    }
    unlink(tmp);
}

static int ensure_dir(const char *path)
{
    char buf[PATH_MAX];

    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(buf, 0700) < 0 && errno != EEXIST ? -1 : 0;
}

/* ---- building the file list -------------------------------------------- */

struct plan {
    struct job *jobs;
    size_t count;
    size_t cap;
};

static struct job *plan_add(struct plan *p, const char *remote, const char *local, uint64_t size)
{
    if (p->count == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        struct job *grown = realloc(p->jobs, cap * sizeof *grown);
        if (!grown)
            return NULL;
        p->jobs = grown;
        p->cap = cap;
    }
    struct job *j = &p->jobs[p->count++];
    memset(j, 0, sizeof *j);
    snprintf(j->remote, sizeof j->remote, "%s", remote);
    snprintf(j->local, sizeof j->local, "%s", local);
    j->size = size;
    j->file.local_fd = -1;
    return j;
}

static int plan_remote_tree(struct client *c, struct plan *p, const char *remote,
                            const char *local, char *err, size_t errlen)
{
    struct remote_entry *entries;
    size_t count;

    if (mkdir(local, 0777) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "%s: %s", local, strerror(errno));
        return -1;
    }
    if (client_list(c, remote, &entries, &count, err, errlen) < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        char r[PATH_MAX], l[PATH_MAX];
        if (strchr(entries[i].name, '/'))
            continue;   /* a listing never names anything outside the directory */
        snprintf(r, sizeof r, "%s/%s", remote, entries[i].name);
        snprintf(l, sizeof l, "%s/%s", local, entries[i].name);
        if (entries[i].is_dir)
            rc = plan_remote_tree(c, p, r, l, err, errlen);
        else if (!plan_add(p, r, l, entries[i].size))
            rc = -1;
    }
    free(entries);
    return rc;
}

static int plan_local_tree(struct client *c, struct plan *p, const char *local,
                           const char *remote, char *err, size_t errlen)
{
    struct remote_entry entry;
    DIR *dir;
    int rc = client_stat(c, remote, &entry, err, errlen);

    if (rc < 0 || (rc == 1 && client_mkdir(c, remote, err, errlen) < 0))
        return -1;
    dir = opendir(local);
    if (!dir) {
        snprintf(err, errlen, "%s: %s", local, strerror(errno));
        return -1;
    }
    rc = 0;
    for (struct dirent *de; rc == 0 && (de = readdir(dir));) {
        char r[PATH_MAX], l[PATH_MAX];
        struct stat st;
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        snprintf(l, sizeof l, "%s/%s", local, de->d_name);
        snprintf(r, sizeof r, "%s/%s", remote, de->d_name);
        if (lstat(l, &st) < 0)
            continue;
        if (S_ISDIR(st.st_mode))
            rc = plan_local_tree(c, p, l, r, err, errlen);
        else if (S_ISREG(st.st_mode) && !plan_add(p, r, l, (uint64_t)st.st_size))
            rc = -1;
    }
    closedir(dir);
    return rc;
}

static void strip_trailing_slash(char *path)
{
    size_t len = strlen(path);

    while (len > 1 && path[len - 1] == '/')
        path[--len] = '\0';
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');

    return slash ? slash + 1 : path;
}

/* ---- the run ----------------------------------------------------------- */

static int open_session(struct client *c, const struct endpoint *remote, pid_t *ssh_pid,
                        char *err, size_t errlen)
{
    if (!remote->sshftp) {
        const char *user = remote->user[0] ? remote->user : "anonymous";
        const char *token = getenv("SDMZ_XFER_TOKEN");
        if (remote->user[0] && !token) {
            snprintf(err, errlen, "ftp://%s@...: set SDMZ_XFER_TOKEN to %s's token", user, user);
            return -1;
        }
        return client_open_tcp(c, remote->host, remote->port, user,
                               remote->user[0] ? token : "sdmz-xfer@", err, errlen);
    }
    /* sshftp: ssh runs the server's sshftp entry; its stdin/stdout carry
     * the control channel, authenticated by SSH keys. */
    int to_ssh[2], from_ssh[2];
    char target[400];
    const char *command = getenv("SDMZ_SSHFTP_COMMAND");
    if (pipe2(to_ssh, O_CLOEXEC) < 0 || pipe2(from_ssh, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    snprintf(target, sizeof target, "%s%s%s", remote->user, remote->user[0] ? "@" : "",
             remote->host);
    *ssh_pid = fork();
    if (*ssh_pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        return -1;
    }
    if (*ssh_pid == 0) {
        dup2(to_ssh[0], STDIN_FILENO);
        dup2(from_ssh[1], STDOUT_FILENO);
        execlp("ssh", "ssh", "-o", "BatchMode=yes", "--", target,
               command ? command : "sdmz-sshftp", (char *)NULL);
        _exit(127);
    }
    close(to_ssh[0]);
    close(from_ssh[1]);
    return client_open_fds(c, from_ssh[0], to_ssh[1], remote->host, err, errlen);
}

static int local_checksum(const char *path, enum ftp_cksum_alg alg, char *hex, char *err,
                          size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc;

    if (fd < 0) {
        snprintf(err, errlen, "%.300s: %s", path, strerror(errno));
        return -1;
    }
    rc = cksum_fd(fd, alg, 0, -1, hex, err, errlen);
    close(fd);
    return rc;
}

static int verify_files(struct client *c, const struct options *o, struct plan *p,
                        char *err, size_t errlen)
{
    for (size_t i = 0; i < p->count; i++) {
        struct job *j = &p->jobs[i];
        char remote_hex[65], local_hex[CKSUM_HEX_MAX];
        if (client_checksum(c, o->verify_alg, j->remote, remote_hex, err, errlen) < 0 ||
            local_checksum(j->local, o->verify_alg, local_hex, err, errlen) < 0)
            return EXIT_FAILED;
        if (strcmp(remote_hex, local_hex) != 0) {
            if (snprintf(err, errlen, "%s checksum mismatch on %s: remote %s, local %s",
                         ftp_cksum_alg_name(o->verify_alg), j->remote, remote_hex,
                         local_hex) >= (int)errlen)
                snprintf(err, errlen, "%s checksum mismatch on %s",
                         ftp_cksum_alg_name(o->verify_alg), base_name(j->remote));
            return EXIT_CHECKSUM;
        }
    }
    return 0;
}

static void print_summary(const struct options *o, const struct plan *p, double seconds,
                          bool ok)
{
    uint64_t bytes = 0, retrans = 0;
    const struct job *largest = NULL;

    for (size_t i = 0; i < p->count; i++) {
        const struct xfer_stats *s = &p->jobs[i].file.stats;
        bytes += s->bytes;
        for (unsigned k = 0; k < s->streams; k++)
            retrans += s->stream[k].retrans;
        if (!largest || p->jobs[i].size > largest->size)
            largest = &p->jobs[i];
    }
    double imbalance = largest ? xfer_imbalance(&largest->file.stats) : 0.0;
    double gbps = seconds > 0 ? (double)bytes * 8 / seconds / 1e9 : 0.0;
    if (o->json) {
        printf("{\"ok\": %s, \"files\": %zu, \"bytes\": %" PRIu64 ", \"seconds\": %.6f, "
               "\"gbps\": %.3f, \"streams\": %u, \"imbalance\": %.6f, \"retransmits\": %" PRIu64
               ", \"verified\": %s}\n", ok ? "true" : "false", p->count, bytes, seconds, gbps,
               o->streams, imbalance, retrans, o->verify && ok ? "true" : "false");
    } else if (isatty(STDERR_FILENO)) {
        fprintf(stderr, "%zu file(s), %" PRIu64 " bytes in %.2f s: %.2f Gbit/s over %u streams, "
                "imbalance %.1f%%\n", p->count, bytes, seconds, gbps, o->streams, imbalance * 100);
    }
}

/* A get's local file is opened as it is: it is emptied only when its own
 * data begins (client.c, receive_file), so a batch that fails before a file's
 * turn leaves that file as it was. One that did not exist is created, and
 * removed again if the batch fails before its turn (discard_unstarted). */
static int open_local(struct job *j, bool get)
{
    int fd = open(j->local, (get ? O_RDWR : O_RDONLY) | O_CLOEXEC);

    j->created = false;
    if (fd < 0 && get && errno == ENOENT) {
        fd = open(j->local, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        j->created = fd >= 0;
    }
    return fd;
}

/* Opens a job's local file; its journal is trusted only if the file
 * bears it out. 0, or an exit code after saying why. */
static int open_job(const struct options *o, struct job *j, bool get)
{
    /* What an earlier, killed run may have left: a half-written temporary
     * journal, never trusted; and, when starting over, a journal that would
     * describe a file this run replaces. */
    if (j->journals->any_journal) {
        char path[PATH_MAX + 80], tmp[PATH_MAX + 88];
        journal_path(j, path, sizeof path);
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        unlink(tmp);
        if (!o->resume)
            unlink(path);
    }
    if (o->resume)
        journal_load(j);
    j->file = (struct client_file){
        .remote = j->remote, .size = j->size, .have = j->have.count ? &j->have : NULL,
        .durable = journal_store, .durable_ctx = j,
    };
    j->file.local_fd = open_local(j, get);
    if (j->file.local_fd < 0)
        return die(EXIT_FAILED, "%s: %s", j->local, strerror(errno));
    if (!get)
        return 0;
    struct stat st;
    if (fstat(j->file.local_fd, &st) < 0)
        return die(EXIT_FAILED, "%s: %s", j->local, strerror(errno));
    if (!S_ISREG(st.st_mode)) {
        /* /dev/null, a FIFO: nothing to cut, sync, journal, resume or read back. */
        if (o->verify)
            return die(EXIT_USAGE, "%s: --verify reads the copy back, and this is not a "
                       "regular file", j->local);
        j->file.durable = NULL;
        j->have.count = 0;
        j->file.have = NULL;
        return 0;
    }
    /* The journal names ranges the file held durably; a file shorter than
     * that was changed since, and its journal is not trusted. */
    if (j->have.count && (uint64_t)st.st_size < ftp_ranges_end(&j->have)) {
        fprintf(stderr, "sdmz-xfer: %s is shorter than its journal says; fetching it again\n",
                j->local);
        j->have.count = 0;
        j->file.have = NULL;
    }
    j->file.empty_first = j->file.have == NULL;
    return 0;
}

/* After a failed batch: the files this run created whose turn never came
 * (still empty) are removed, so a failed get leaves no empty stand-ins. */
static void discard_unstarted(struct job *jobs, size_t from, size_t to)
{
    struct stat st;

    for (size_t i = from; i < to; i++)
        if (jobs[i].created && jobs[i].file.local_fd >= 0 &&
            fstat(jobs[i].file.local_fd, &st) == 0 && st.st_size == 0 &&
            unlink(jobs[i].local) < 0)
            fprintf(stderr, "sdmz-xfer: %s: %s\n", jobs[i].local, strerror(errno));
}

/* A received file needs no sync here: every get into a regular file passes
 * journal_store as modee_recv()'s marker, so modee_recv() ends the file with an
 * fdatasync (a failed one fails the file) before the done log names it. */
static void close_job(struct job *j)
{
    if (j->file.local_fd < 0)
        return;
    close(j->file.local_fd);
    j->file.local_fd = -1;
}

/* Whether --resume would save anything: files that finished before the
 * failing one (replies come in order), or a journal of some file's durable
 * ranges. A transfer refused before any byte moved gains nothing from it. */
static bool resumable(const struct plan *p, size_t failing)
{
    if (failing > 0)
        return true;
    for (size_t i = 0; i < p->count; i++)
        if (p->jobs[i].has_journal)
            return true;
    return false;
}

/* The files go in batches of OPEN_FILES_MAX, each batch pipelined by
 * client_get()/client_put(): a tree of any size stays within the open-file
 * limit, and the data connections stay open from batch to batch. */
static int move_files(struct client *c, const struct options *o, struct plan *p, bool get,
                      double t0, struct progress *bar)
{
    struct client_file *files = calloc(OPEN_FILES_MAX, sizeof *files);
    char err[512] = "";
    int code = 0;

    if (!files)
        return die(EXIT_FAILED, "out of memory");

    for (size_t base = 0; base < p->count && !code; base += OPEN_FILES_MAX) {
        size_t n = p->count - base < OPEN_FILES_MAX ? p->count - base : OPEN_FILES_MAX;
        size_t opened = 0, failed = 0;
        for (; opened < n && !code; opened++) {
            struct job *j = &p->jobs[base + opened];
            code = open_job(o, j, get);
            files[opened] = j->file;
            if (!code && bar)
                atomic_fetch_sub(&bar->total, ftp_ranges_covered(&j->have, j->size));
        }
        if (code) {
            discard_unstarted(p->jobs, base, base + opened);
        } else {
            int rc = get ? client_get(c, files, n, &failed, err, sizeof err)
                         : client_put(c, files, n, &failed, err, sizeof err);
            for (size_t i = 0; i < n; i++)
                p->jobs[base + i].file.stats = files[i].stats;
            if (rc < 0) {
                discard_unstarted(p->jobs, base + failed, base + n);
                print_summary(o, p, monotonic_seconds() - t0, false);
                code = die(EXIT_FAILED, "%s: %s%s", p->jobs[base + failed].remote, err,
                           resumable(p, base + failed) ? " (run again with --resume to continue)"
                                                       : "");
            }
        }
        for (size_t i = 0; i < opened; i++)
            close_job(&p->jobs[base + i]);
    }
    free(files);
    return code;
}

static int run(const struct options *o, const struct endpoint *src, const struct endpoint *dst)
{
    const struct endpoint *remote = src->remote ? src : dst;
    bool get = src->remote;
    struct client c = {.streams = o->streams, .tuning = o->tuning,
                       .data_port_lo = o->data_port_lo, .data_port_hi = o->data_port_hi};
    struct plan p = {0};
    char err[512] = "", remote_path[PATH_MAX], local_path[PATH_MAX];
    pid_t ssh_pid = -1;
    int code = 0;
    double t0;
    struct journals journals = {.done = NULL};
    bool finished = false;

    snprintf(journals.dir, sizeof journals.dir, "%s", o->journal_dir);

    if (open_session(&c, remote, &ssh_pid, err, sizeof err) < 0)
        return die(EXIT_CONNECT, "%s", err);
    snprintf(remote_path, sizeof remote_path, "%s", remote->path);
    snprintf(local_path, sizeof local_path, "%s", (get ? dst : src)->path);
    strip_trailing_slash(remote_path);
    strip_trailing_slash(local_path);

    if (get) {
        struct remote_entry entry;
        struct stat st;
        int rc = client_stat(&c, remote_path, &entry, err, sizeof err);
        if (rc != 0) {
            code = die(EXIT_FAILED, "%s", err);
            goto out;
        }
        bool into_dir = stat(local_path, &st) == 0 && S_ISDIR(st.st_mode);
        char target[PATH_MAX];
        if (snprintf(target, sizeof target, "%s%s%s", local_path, into_dir ? "/" : "",
                     into_dir ? base_name(remote_path) : "") >= (int)sizeof target) {
            code = die(EXIT_USAGE, "%s: path too long", local_path);
            goto out;
        }
        if (entry.is_dir)
            rc = plan_remote_tree(&c, &p, remote_path, target, err, sizeof err);
        else
            rc = plan_add(&p, remote_path, target, entry.size) ? 0 : -1;
        if (rc < 0) {
            code = die(EXIT_FAILED, "%s", err[0] ? err : "out of memory");
            goto out;
        }
    } else {
        struct stat st;
        struct remote_entry entry;
        if (stat(local_path, &st) < 0) {
            code = die(EXIT_FAILED, "%s: %s", local_path, strerror(errno));
            goto out;
        }
        int rc = client_stat(&c, remote_path, &entry, err, sizeof err);
        if (rc < 0) {
            code = die(EXIT_FAILED, "%s", err);
            goto out;
        }
        char target[PATH_MAX];
        if (snprintf(target, sizeof target, "%s%s%s", remote_path,
                     rc == 0 && entry.is_dir ? "/" : "",
                     rc == 0 && entry.is_dir ? base_name(local_path) : "") >= (int)sizeof target) {
            code = die(EXIT_USAGE, "%s: path too long", remote_path);
            goto out;
        }
        if (S_ISDIR(st.st_mode))
            rc = plan_local_tree(&c, &p, local_path, target, err, sizeof err);
        else
            rc = plan_add(&p, target, local_path, (uint64_t)st.st_size) ? 0 : -1;
        if (rc < 0) {
            code = die(EXIT_FAILED, "%s", err[0] ? err : "out of memory");
            goto out;
        }
    }

    if (ensure_dir(o->journal_dir) < 0 ||
        journals_open(&journals, get ? "get" : "put", get ? remote_path : local_path,
                      get ? local_path : remote_path, o->resume) < 0) {
        code = die(EXIT_FAILED, "journal directory %s: %s", o->journal_dir, strerror(errno));
        goto out;
    }
    for (size_t i = 0; i < p.count; i++) {
        struct job *j = &p.jobs[i];
        j->journals = &journals;
        journal_key(get ? "get" : "put", get ? j->remote : j->local, get ? j->local : j->remote,
                    j->key);
    }

    /* The progress line: on a terminal only, and never with --json. */
    struct progress bar = {.running = false};
    if (!o->json && isatty(STDERR_FILENO)) {
        uint64_t total = 0;
        for (size_t i = 0; i < p.count; i++)
            total += p.jobs[i].size;
        if (progress_start(&bar, total) == 0)
            c.progress = &bar.done;
    }
    t0 = monotonic_seconds();
    code = move_files(&c, o, &p, get, t0, bar.running ? &bar : NULL);
    progress_stop(&bar);
    c.progress = NULL;
    if (code)
        goto out;
    if (o->verify) {
        code = verify_files(&c, o, &p, err, sizeof err);
        if (code) {
            print_summary(o, &p, monotonic_seconds() - t0, false);
            die(code, "%s", err);
            goto out;
        }
    }
    for (size_t i = 0; i < p.count; i++) {
        char path[PATH_MAX + 80];
        journal_path(&p.jobs[i], path, sizeof path);
        if (p.jobs[i].has_journal)
            unlink(path);
    }
    finished = true;
    print_summary(o, &p, monotonic_seconds() - t0, true);
out:
    journals_close(&journals, finished);
    free(p.jobs);
    client_close(&c);
    if (ssh_pid > 0) {
        close(c.in_fd);
        close(c.out_fd);
        waitpid(ssh_pid, NULL, 0);
    }
    return code;
}

int main(int argc, char **argv)
{
    enum { O_RESUME = 256, O_VERIFY, O_RATE, O_BUFFER, O_BLOCK, O_PORTS, O_JSON, O_JOURNAL,
           O_HELP };
    static const struct option options[] = {
        {"resume", no_argument, NULL, O_RESUME},
        {"verify", required_argument, NULL, O_VERIFY},
        {"rate", required_argument, NULL, O_RATE},
        {"tcp-buffer", required_argument, NULL, O_BUFFER},
        {"block", required_argument, NULL, O_BLOCK},
        {"data-ports", required_argument, NULL, O_PORTS},
        {"json", no_argument, NULL, O_JSON},
        {"journal-dir", required_argument, NULL, O_JOURNAL},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    struct options o = {.streams = 4, .tuning = {.block_size = DATA_BLOCK_DEFAULT,
                                                 .idle_timeout_s = 600}};
    struct endpoint src, dst;
    uint64_t value;
    int opt;

    const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    /* Sites that run Globus tools have their firewall's range here already,
     * as "LO,HI"; --data-ports overrides it. */
    const char *globus_range = getenv("GLOBUS_TCP_PORT_RANGE");
    if (globus_range && *globus_range) {
        char range[32];
        snprintf(range, sizeof range, "%s", globus_range);
        char *comma = strchr(range, ',');
        if (comma)
            *comma = '-';
        if (!comma || parse_port_range(range, 1024, &o.data_port_lo, &o.data_port_hi) < 0)
            return die(EXIT_USAGE, "GLOBUS_TCP_PORT_RANGE=%s: expected LO,HI within 1024-65535",
                       globus_range);
    }
    snprintf(o.journal_dir, sizeof o.journal_dir, "%s%s/sdmz-xfer", state ? state : home ? home : "/tmp",
             state ? "" : "/.local/state");
    while ((opt = getopt_long(argc, argv, "p:", options, NULL)) != -1) {
        switch (opt) {
        case 'p':
            if (parse_uint(optarg, DATA_STREAMS_MAX, &value) < 0 || value == 0)
                return die(EXIT_USAGE, "-p %s: expected 1 to %d streams", optarg, DATA_STREAMS_MAX);
            o.streams = (unsigned)value;
            break;
        case O_RESUME: o.resume = true; break;
        case O_VERIFY:
            if (ftp_parse_cksum_alg(optarg, &o.verify_alg) < 0)
                return die(EXIT_USAGE, "--verify %s: expected sha256, md5 or adler32", optarg);
            o.verify = true;
            break;
        case O_RATE:
            if (parse_bits(optarg, &value) < 0)
                return die(EXIT_USAGE, "--rate %s: expected bits per second (500M, 10G)", optarg);
            o.tuning.pacing_rate = value;
            break;
        case O_BUFFER:
            if (parse_bytes(optarg, &value) < 0 || value > (1u << 30))
                return die(EXIT_USAGE, "--tcp-buffer %s: expected bytes up to 1G", optarg);
            o.tuning.sndbuf = o.tuning.rcvbuf = (int)value;
            break;
        case O_BLOCK:
            if (parse_bytes(optarg, &value) < 0 || value < 4096 || value > (256u << 20))
                return die(EXIT_USAGE, "--block %s: expected 4K to 256M", optarg);
            o.tuning.block_size = (uint32_t)value;
            break;
        case O_PORTS:
            if (parse_port_range(optarg, 1024, &o.data_port_lo, &o.data_port_hi) < 0)
                return die(EXIT_USAGE, "--data-ports %s: expected LO-HI within 1024-65535",
                           optarg);
            break;
        case O_JSON: o.json = true; break;
        case O_JOURNAL:
            snprintf(o.journal_dir, sizeof o.journal_dir, "%s", optarg);
            break;
        case O_HELP: return usage(stdout, 0);
        default: return usage(stderr, EXIT_USAGE);
        }
    }
    if (argc - optind != 2)
        return usage(stderr, EXIT_USAGE);
    if (parse_endpoint(argv[optind], &src) < 0)
        return die(EXIT_USAGE, "%s: not a path or an ftp:// or sshftp:// URL "
                   "(passwords do not go in URLs; use SDMZ_XFER_TOKEN)", argv[optind]);
    if (parse_endpoint(argv[optind + 1], &dst) < 0)
        return die(EXIT_USAGE, "%s: not a path or an ftp:// or sshftp:// URL "
                   "(passwords do not go in URLs; use SDMZ_XFER_TOKEN)", argv[optind + 1]);
    if (src.remote == dst.remote)
        return die(EXIT_USAGE, "one of SRC and DST must be local and the other remote");
    signal(SIGPIPE, SIG_IGN);
    return run(&o, &src, &dst);
}
