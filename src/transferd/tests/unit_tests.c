/* Unit tests for the parsers a peer's bytes reach, the range set, MODE E
 * headers and receiving, path confinement and checksums. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cksum.h"
#include "data.h"
#include "filesink.h"
#include "ftp.h"
#include "modee.h"
#include "netaddr.h"
#include "rootfs.h"
#include "streamthread.h"

static unsigned checks, failures;

#define CHECK(cond) do { \
    checks++; \
    if (!(cond)) { failures++; fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); } \
} while (0)

static void test_commands(void)
{
    struct ftp_command cmd;
    char err[128], line[FTP_LINE_MAX + 8];

    strcpy(line, "retr /data/x y");
    CHECK(ftp_parse_command(line, strlen(line), &cmd, err, sizeof err) == 0);
    CHECK(strcmp(cmd.verb, "RETR") == 0 && strcmp(cmd.arg, "/data/x y") == 0);
    strcpy(line, "PWD");
    CHECK(ftp_parse_command(line, 3, &cmd, err, sizeof err) == 0 && *cmd.arg == '\0');
    strcpy(line, "RE1R x");
    CHECK(ftp_parse_command(line, strlen(line), &cmd, err, sizeof err) < 0);
    strcpy(line, "RETRR x");
    CHECK(ftp_parse_command(line, strlen(line), &cmd, err, sizeof err) < 0);
    memcpy(line, "STOR a\0b", 8);
    CHECK(ftp_parse_command(line, 8, &cmd, err, sizeof err) < 0);
    strcpy(line, "STOR a\rDELE b");
    CHECK(ftp_parse_command(line, strlen(line), &cmd, err, sizeof err) < 0);
    memset(line, 'A', sizeof line);
    CHECK(ftp_parse_command(line, FTP_LINE_MAX, &cmd, err, sizeof err) < 0);
}

static void test_addresses(void)
{
    struct sockaddr_storage a;
    char text[64];
    uint16_t port;

    CHECK(ftp_parse_hostport("127,0,0,1,134,9", &a) == 0 && netaddr_port(&a) == 34313);
    ftp_format_hostport(&a, text, sizeof text);
    CHECK(strcmp(text, "127,0,0,1,134,9") == 0);
    CHECK(ftp_parse_hostport("127,0,0,1,134", &a) < 0);
    CHECK(ftp_parse_hostport("256,0,0,1,1,1", &a) < 0);
    CHECK(ftp_parse_pasv_reply("227 Entering Passive Mode (10,1,2,3,4,1)", &a) == 0 &&
          netaddr_port(&a) == 1025);
    CHECK(ftp_parse_eprt("|2|fd53::12|5000|", &a) == 0 && a.ss_family == AF_INET6 &&
          netaddr_port(&a) == 5000);
    CHECK(ftp_parse_eprt("|1|198.18.1.12|5000|", &a) == 0 && a.ss_family == AF_INET);
    ftp_format_eprt(&a, text, sizeof text);
    CHECK(strcmp(text, "|1|198.18.1.12|5000|") == 0);
    CHECK(ftp_parse_eprt("|1|198.18.1.12|0|", &a) < 0);
    CHECK(ftp_parse_eprt("|3|198.18.1.12|5000|", &a) < 0);
    CHECK(ftp_parse_eprt("|1|fd53::1|5000|", &a) < 0);
    CHECK(ftp_parse_epsv_reply("229 Entering Extended Passive Mode (|||50123|)", &port) == 0 &&
          port == 50123);
    CHECK(ftp_parse_epsv_reply("229 (|||0|)", &port) < 0);
}

static void test_options(void)
{
    unsigned n;
    uint64_t off, len;
    int64_t slen;
    const char *path;
    enum ftp_cksum_alg alg;

    CHECK(ftp_parse_parallelism("RETR Parallelism=4,4,4;", 16, &n) == 0 && n == 4);
    CHECK(ftp_parse_parallelism("RETR Parallelism=8;", 16, &n) == 0 && n == 8);
    CHECK(ftp_parse_parallelism("RETR Parallelism=17,1,1;", 16, &n) < 0);
    CHECK(ftp_parse_parallelism("RETR Parallelism=0;", 16, &n) < 0);
    CHECK(ftp_parse_parallelism("RETR Parallelism=4,4,4;x", 16, &n) < 0);
    CHECK(ftp_parse_partial("P 10 20 /d/f", &off, &len, &path) == 0 && off == 10 && len == 20 &&
          strcmp(path, "/d/f") == 0);
    CHECK(ftp_parse_partial("P 10 /d/f", &off, &len, &path) < 0);
    CHECK(ftp_parse_cksm("SHA256 0 -1 /d/f", &alg, &off, &slen, &path) == 0 &&
          alg == FTP_CKSUM_SHA256 && slen == -1);
    CHECK(ftp_parse_cksm("adler32 5 7 /d/f", &alg, &off, &slen, &path) == 0 &&
          alg == FTP_CKSUM_ADLER32 && off == 5 && slen == 7);
    CHECK(ftp_parse_cksm("CRC32 0 -1 /d/f", &alg, &off, &slen, &path) < 0);
    CHECK(ftp_reply_code("226 Transfer complete") == 226);
    CHECK(ftp_reply_final_code("226-more", 226) == 0);
    CHECK(ftp_reply_final_code("250 End.", 226) == 0);
    CHECK(ftp_reply_final_code("226 End.", 226) == 226);
    CHECK(ftp_reply_code(" 226 x") == 0 && ftp_reply_code("999 x") == 0);
}

static void test_ranges(void)
{
    struct ftp_ranges r = {0};
    char text[256];

    CHECK(ftp_ranges_add(&r, 100, 200) && ftp_ranges_add(&r, 0, 50) && ftp_ranges_add(&r, 300, 400));
    CHECK(r.count == 3);
    CHECK(ftp_ranges_add(&r, 50, 100) && r.count == 2);     /* adjacent ranges merge */
    CHECK(ftp_ranges_add(&r, 150, 350) && r.count == 1 && r.r[0].start == 0 && r.r[0].end == 400);
    CHECK(ftp_format_ranges(&r, text, sizeof text) && strcmp(text, "0-400") == 0);
    CHECK(ftp_parse_ranges("0-10,20-30,25-40", &r) == 0 && r.count == 2 && r.r[1].end == 40);
    CHECK(ftp_ranges_covered(&r, 25) == 15);
    CHECK(ftp_ranges_end(&r) == 40);
    CHECK(ftp_parse_ranges("500-600,0-10", &r) == 0 && ftp_ranges_end(&r) == 600);
    CHECK(ftp_ranges_end(&(struct ftp_ranges){0}) == 0);
    CHECK(ftp_parse_ranges("10-5", &r) < 0);
    CHECK(ftp_parse_ranges("1-2,", &r) == 0 && r.count == 1);
    CHECK(ftp_parse_ranges("1-2;", &r) < 0);
    CHECK(!ftp_format_ranges(&(struct ftp_ranges){1, {{0, 123456789}}}, text, 4));
    struct ftp_ranges full = {0};
    for (unsigned i = 0; i < FTP_RANGES_MAX; i++)
        CHECK(ftp_ranges_add(&full, i * 10, i * 10 + 5));
    CHECK(!ftp_ranges_add(&full, 10000, 10005));
    CHECK(ftp_ranges_add(&full, 5, 10) && full.count == FTP_RANGES_MAX - 1);
}

static void test_modee(void)
{
    uint8_t raw[MODEE_HEADER_LEN];
    struct modee_header h = {MODEE_EOD | MODEE_EOF, 0, 4}, out;
    char err[128];

    modee_encode(&h, raw);
    CHECK(raw[0] == 0x48 && raw[16] == 4);
    CHECK(modee_decode(raw, &out, err, sizeof err) == 0 && out.offset == 4);
    h = (struct modee_header){0, 1u << 20, 5ull << 32};
    modee_encode(&h, raw);
    CHECK(modee_decode(raw, &out, err, sizeof err) == 0 && out.count == 1u << 20 &&
          out.offset == 5ull << 32);
    raw[0] = MODEE_RESTART;
    CHECK(modee_decode(raw, &out, err, sizeof err) < 0);
    raw[0] = 0x01;
    CHECK(modee_decode(raw, &out, err, sizeof err) < 0);
    h = (struct modee_header){0, 10, UINT64_MAX - 5};
    modee_encode(&h, raw);
    CHECK(modee_decode(raw, &out, err, sizeof err) < 0);
}

static void test_rootfs(void)
{
    char dir[] = "/tmp/sdmz-rootfs-XXXXXX", path[PATH_MAX], err[256];
    struct rootfs fs = {0};
    struct rootfs_path p;
    int fd;

    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/sub", dir);
    CHECK(mkdir(path, 0755) == 0);
    snprintf(path, sizeof path, "%s/sub/escape", dir);
    CHECK(symlink("/etc", path) == 0);
    CHECK(rootfs_add(&fs, dir, err, sizeof err) == 0);
    CHECK(rootfs_resolve(&fs, "/", dir, &p) == 0 && strcmp(p.rel, ".") == 0);
    snprintf(path, sizeof path, "%s/sub/./f", dir);
    CHECK(rootfs_resolve(&fs, "/", path, &p) == 0 && strcmp(p.rel, "sub/f") == 0);
    CHECK(rootfs_resolve(&fs, dir, "sub", &p) == 0 && strcmp(p.rel, "sub") == 0);
    CHECK(rootfs_resolve(&fs, dir, "../x", &p) < 0 && errno == EINVAL);
    CHECK(rootfs_resolve(&fs, "/", "/etc/passwd", &p) < 0 && errno == EACCES);
    snprintf(path, sizeof path, "%sx/f", dir);    /* a sibling sharing the prefix */
    CHECK(rootfs_resolve(&fs, "/", path, &p) < 0 && errno == EACCES);
    CHECK(rootfs_resolve(&fs, dir, "sub/f", &p) == 0);
    fd = rootfs_open(&p, O_WRONLY | O_CREAT, 0644);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    CHECK(rootfs_resolve(&fs, dir, "sub/escape/passwd", &p) == 0);
    CHECK(rootfs_open(&p, O_RDONLY, 0) < 0 && errno == EXDEV);
    CHECK(rootfs_resolve(&fs, dir, "sub/new", &p) == 0 && rootfs_mkdir(&p, 0755) == 0);
    CHECK(rootfs_resolve(&fs, dir, "sub/escape/newdir", &p) == 0 && rootfs_mkdir(&p, 0755) < 0);
    /* The walk used where openat2 is missing follows no symbolic link. */
    int root = fs.roots[0].fd;
    snprintf(path, sizeof path, "%s/sub/inner", dir);
    CHECK(symlink(".", path) == 0);
    fd = rootfs_open_components(root, "sub/g", O_WRONLY | O_CREAT, 0644);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    fd = rootfs_open_components(root, ".", O_PATH | O_DIRECTORY, 0);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    CHECK(rootfs_open_components(root, "sub/escape/passwd", O_RDONLY, 0) < 0 && errno == ELOOP);
    CHECK(rootfs_open_components(root, "sub/escape", O_PATH, 0) < 0 && errno == ELOOP);
    CHECK(rootfs_open_components(root, "sub/escape", O_RDONLY, 0) < 0 && errno == ELOOP);
    CHECK(rootfs_open_components(root, "sub/inner/g", O_RDONLY, 0) < 0 && errno == ELOOP);
    CHECK(rootfs_open_components(root, "missing/x", O_RDONLY, 0) < 0 && errno == ENOENT);
    CHECK(rootfs_open_components(root, "sub/../sub/g", O_RDONLY, 0) < 0 && errno == EINVAL);
    rootfs_close(&fs);
    snprintf(path, sizeof path, "rm -rf %s", dir);
    CHECK(system(path) == 0);
}

static void test_cksum(void)
{
    char tmpl[] = "/tmp/sdmz-cksum-XXXXXX", hex[CKSUM_HEX_MAX], err[128];
    int fd = mkstemp(tmpl);

    CHECK(fd >= 0 && write(fd, "hello world", 11) == 11);
    CHECK(cksum_fd(fd, FTP_CKSUM_ADLER32, 0, -1, hex, err, sizeof err) == 0 &&
          strcmp(hex, "1a0b045d") == 0);
    CHECK(cksum_fd(fd, FTP_CKSUM_MD5, 0, -1, hex, err, sizeof err) == 0 &&
          strcmp(hex, "5eb63bbbe01eeed093cb22bb8f5acdc3") == 0);
    CHECK(cksum_fd(fd, FTP_CKSUM_SHA256, 6, 5, hex, err, sizeof err) == 0 &&
          strcmp(hex, "486ea46224d1bb4fb680f34f7c9ad96a8f24ec88be73ea8e5a6c65260e9cb8a7") == 0);
    CHECK(cksum_fd(fd, FTP_CKSUM_MD5, 6, 50, hex, err, sizeof err) < 0);
    close(fd);
    unlink(tmpl);
}

static void test_imbalance(void)
{
    struct xfer_stats s = {.streams = 2};

    s.stream[0] = (struct stream_stats){100, 0.0, 10.0, 0};
    s.stream[1] = (struct stream_stats){100, 0.0, 9.0, 0};
    CHECK(xfer_imbalance(&s) > 0.099 && xfer_imbalance(&s) < 0.101);
    s.streams = 1;
    CHECK(xfer_imbalance(&s) == 0.0);
}

/* A socket pair whose writing end got len bytes of a pattern and was shut. */
static int fed_socket(size_t len)
{
    int sv[2];
    char *data = malloc(len);

    if (!data || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
        free(data);
        return -1;
    }
    for (size_t i = 0; i < len; i++)
        data[i] = (char)(i * 7 + i / 4096);
    if (write(sv[1], data, len) != (ssize_t)len)
        len = 0;
    close(sv[1]);
    free(data);
    return len ? sv[0] : -1;
}

/* Moves everything from sock into fd at offset 1000; true if the file
 * then holds exactly the pattern there and the end was seen. */
static bool sink_all(struct file_sink *sink, int sock, int fd, size_t len)
{
    enum sink_failure failure;
    uint64_t at = 1000;
    ssize_t n;
    bool same = true;

    while ((n = file_sink_move(sink, sock, fd, at, 64 << 10, &failure)) > 0)
        at += (uint64_t)n;
    if (n != 0 || failure != SINK_SOCKET || at != 1000 + len)
        return false;
    char *back = malloc(len);
    if (!back || pread(fd, back, len, 1000) != (ssize_t)len)
        same = false;
    for (size_t i = 0; same && i < len; i++)
        same = back[i] == (char)(i * 7 + i / 4096);
    free(back);
    return same;
}

static void test_file_sink(void)
{
    char path[] = "/tmp/sdmz-sink-XXXXXX";
    int fd = mkstemp(path), sock;
    struct file_sink sink = {0};
    enum sink_failure failure;

    CHECK(fd >= 0);
    unlink(path);
    /* Spliced: the bytes land at their offsets, and the sink keeps splicing. */
    sock = fed_socket(150000);
    CHECK(sock >= 0 && sink_all(&sink, sock, fd, 150000) && !sink.copy_only);
    close(sock);
    /* A file that refuses splice (O_APPEND: EINVAL) gets the bytes copied. */
    CHECK(ftruncate(fd, 1000) == 0);
    int append = open(path, O_RDWR | O_CREAT | O_APPEND, 0600);
    CHECK(append >= 0);
    unlink(path);
    CHECK(ftruncate(append, 1000) == 0);
    sock = fed_socket(70000);
    CHECK(sock >= 0 && sink_all(&sink, sock, append, 70000) && sink.copy_only);
    close(sock);
    close(append);
    file_sink_close(&sink);
    /* A file that cannot be written: a file failure, not a socket one. */
    int readonly = open("/dev/null", O_RDONLY);
    sock = fed_socket(1000);
    CHECK(file_sink_move(&sink, sock, readonly, 0, 1000, &failure) < 0 && failure == SINK_FILE);
    close(sock);
    close(readonly);
    file_sink_close(&sink);
    close(fd);
}

struct thread_probe {
    pthread_t self;
    unsigned runs;
};

static void *probe_task(void *arg)
{
    struct thread_probe *probe = arg;

    probe->self = pthread_self();
    probe->runs++;
    return NULL;
}

static void test_stream_thread(void)
{
    struct stream_thread t = {0};
    struct thread_probe first = {0}, second = {0};

    CHECK(stream_thread_start(&t, probe_task, &first) == 0);
    stream_thread_join(&t);
    CHECK(stream_thread_start(&t, probe_task, &second) == 0);
    stream_thread_join(&t);
    /* Both tasks ran once, on the same thread, which is not the caller. */
    CHECK(first.runs == 1 && second.runs == 1);
    CHECK(pthread_equal(first.self, second.self) && !pthread_equal(first.self, pthread_self()));
    stream_thread_stop(&t);
    CHECK(!t.alive);
    CHECK(stream_thread_start(&t, probe_task, &first) == 0);
    stream_thread_join(&t);
    CHECK(first.runs == 2);
    stream_thread_stop(&t);
    stream_thread_stop(&t);   /* stopping a stopped thread is harmless */
}

/* ---- MODE E receiving: one thread for small files, threads past a block -- */

#define RECV_STREAMS 2
#define BIG_BLOCK (DATA_BLOCK_MIN + 37856)   /* past the one-thread limit */
#define TAIL_BLOCK 4000

struct modee_peer {
    int send[RECV_STREAMS];     /* the sender's ends */
    int recv[RECV_STREAMS];     /* the receiver's ends, in its cache */
};

static int peer_open(struct modee_peer *p, struct data_cache *cache)
{
    for (unsigned i = 0; i < RECV_STREAMS; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
            return -1;
        p->recv[i] = sv[0];
        p->send[i] = sv[1];
        data_cache_add(cache, sv[0]);
    }
    return 0;
}

static bool send_all(int fd, const void *buf, size_t len)
{
    const char *at = buf;

    while (len > 0) {
        ssize_t n = write(fd, at, len);
        if (n <= 0)
            return false;
        at += n;
        len -= (size_t)n;
    }
    return true;
}

static bool send_header(int fd, uint8_t descriptor, uint64_t count, uint64_t offset)
{
    uint8_t raw[MODEE_HEADER_LEN];
    struct modee_header h = {descriptor, count, offset};

    modee_encode(&h, raw);
    return send_all(fd, raw, sizeof raw);
}

static uint8_t pattern_at(uint64_t offset)
{
    return (uint8_t)(offset * 131 + offset / 977);
}

static bool send_block(int fd, uint64_t offset, size_t len)
{
    uint8_t *buf = malloc(len);
    bool ok = buf && send_header(fd, 0, len, offset);

    for (size_t i = 0; ok && i < len; i++)
        buf[i] = pattern_at(offset + i);
    ok = ok && send_all(fd, buf, len);
    free(buf);
    return ok;
}

static bool file_has_pattern(int fd, uint64_t len)
{
    uint8_t *back = malloc(len);
    bool same = back && pread(fd, back, len, 0) == (ssize_t)len;

    for (uint64_t i = 0; same && i < len; i++)
        same = back[i] == pattern_at(i);
    free(back);
    return same;
}

/* Waits (at most 5 s) until the receiver has taken all fd holds. */
static bool drained(int fd)
{
    for (int tries = 0; tries < 5000; tries++) {
        int queued = -1;
        if (ioctl(fd, FIONREAD, &queued) < 0)
            return false;
        if (queued == 0)
            return true;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    return false;
}

static int receive(int file_fd, struct data_cache *cache, struct xfer_stats *stats)
{
    struct data_tuning tuning = {.idle_timeout_s = 10};
    struct ftp_ranges received = {0};
    struct modee_recv_job job = {.file_fd = file_fd, .listen_fd = -1, .tuning = &tuning,
                                 .cache = cache, .received = &received};
    char err[256] = "";
    int rc = modee_recv(&job, stats, err, sizeof err);

    if (rc < 0)
        fprintf(stderr, "modee_recv: %s\n", err);
    return rc;
}

/* Past one block, the connections go to threads; the one whose header was
 * half read by the poll goes on from the middle of it. */
static void *send_across_the_handover(void *arg)
{
    struct modee_peer *p = arg;
    uint8_t raw[MODEE_HEADER_LEN];
    struct modee_header tail = {0, TAIL_BLOCK, BIG_BLOCK};
    uint8_t *payload = malloc(TAIL_BLOCK);
    bool ok = payload != NULL;

    modee_encode(&tail, raw);
    /* Five bytes of stream 1's header, taken by the poll... */
    ok = ok && send_all(p->send[1], raw, 5) && drained(p->recv[1]);
    /* ...then a block past the limit on stream 0, which ends the polling... */
    ok = ok && send_block(p->send[0], 0, BIG_BLOCK) && drained(p->recv[0]) &&
         send_header(p->send[0], MODEE_EOD | MODEE_EOF, 0, RECV_STREAMS);
    /* ...and the rest of the header, which stream 1's thread must finish. */
    for (size_t i = 0; ok && i < TAIL_BLOCK; i++)
        payload[i] = pattern_at(BIG_BLOCK + i);
    ok = ok && send_all(p->send[1], raw + 5, sizeof raw - 5) &&
         send_all(p->send[1], payload, TAIL_BLOCK) && send_header(p->send[1], MODEE_EOD, 0, 0);
    free(payload);
    return ok ? arg : NULL;
}

static void test_modee_recv(void)
{
    char path[] = "/tmp/sdmz-recv-XXXXXX";
    int fd = mkstemp(path);
    struct data_cache cache = {0};
    struct modee_peer peer;
    struct xfer_stats stats;
    pthread_t sender;
    void *sent = NULL;

    CHECK(fd >= 0);
    unlink(path);
    CHECK(peer_open(&peer, &cache) == 0);
    /* A small file: one block and the EODs, read by the calling thread. */
    CHECK(send_block(peer.send[1], 0, 1000) && send_header(peer.send[1], MODEE_EOD, 0, 0) &&
          send_header(peer.send[0], MODEE_EOD | MODEE_EOF, 0, RECV_STREAMS));
    CHECK(receive(fd, &cache, &stats) == 0);
    CHECK(stats.bytes == 1000 && stats.stream[1].bytes == 1000 && file_has_pattern(fd, 1000));
    CHECK(cache.count == RECV_STREAMS);   /* kept for the next file */
    CHECK(!cache.threads[0].alive && !cache.threads[1].alive);
    /* A bigger one, handed over to threads in the middle of a header. */
    CHECK(ftruncate(fd, 0) == 0);
    CHECK(pthread_create(&sender, NULL, send_across_the_handover, &peer) == 0);
    CHECK(receive(fd, &cache, &stats) == 0);
    pthread_join(sender, &sent);
    CHECK(sent == &peer);
    CHECK(stats.bytes == BIG_BLOCK + TAIL_BLOCK && file_has_pattern(fd, BIG_BLOCK + TAIL_BLOCK));
    CHECK(cache.threads[1].alive && cache.count == RECV_STREAMS);
    /* The sender going away inside a header is an error, not an end. */
    CHECK(send_all(peer.send[0], "\x08\0\0", 3) && shutdown(peer.send[0], SHUT_WR) == 0);
    CHECK(receive(fd, &cache, &stats) < 0);
    data_cache_close(&cache);
    for (unsigned i = 0; i < RECV_STREAMS; i++)
        close(peer.send[i]);
    close(fd);
}

int main(void)
{
    test_commands();
    test_addresses();
    test_options();
    test_ranges();
    test_modee();
    test_rootfs();
    test_cksum();
    test_imbalance();
    test_file_sink();
    test_stream_thread();
    test_modee_recv();
    printf("unit-tests: %u checks, %u failed\n", checks, failures);
    return failures ? 1 : 0;
}
