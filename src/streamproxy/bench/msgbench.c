/* sdmz-msgbench: ping-pong latency for the proxy benchmark.
 *   sdmz-msgbench echo --listen ADDR:PORT            echo every byte back, per connection
 *   sdmz-msgbench pingpong --connect ADDR:PORT --size BYTES --count N [--warmup N]
 * pingpong prints one JSON object: round-trip percentiles in microseconds. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int parse_addr(const char *text, struct sockaddr_in *addr)
{
    char host[64];
    const char *colon = strrchr(text, ':');

    if (!colon || (size_t)(colon - text) >= sizeof host)
        return -1;
    memcpy(host, text, (size_t)(colon - text));
    host[colon - text] = '\0';
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_port = htons((uint16_t)atoi(colon + 1));
    return inet_pton(AF_INET, host, &addr->sin_addr) == 1 ? 0 : -1;
}

static void *echo_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[1 << 16];
    ssize_t n;

    while ((n = read(fd, buf, sizeof buf)) > 0) {
        ssize_t off = 0;
        while (off < n) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w <= 0)
                goto done;
            off += w;
        }
    }
done:
    close(fd);
    return NULL;
}

static int run_echo(const char *listen_text)
{
    struct sockaddr_in addr;
    int one = 1, fd;

    if (parse_addr(listen_text, &addr) < 0) {
        fprintf(stderr, "sdmz-msgbench: --listen: IPv4:PORT\n");
        return 2;
    }
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, 16) < 0) {
        fprintf(stderr, "sdmz-msgbench: %s: %s\n", listen_text, strerror(errno));
        return 1;
    }
    for (;;) {
        pthread_t thread;
        int c = accept(fd, NULL, NULL);
        if (c < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "sdmz-msgbench: accept: %s\n", strerror(errno));
            return 1;
        }
        (void)setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (pthread_create(&thread, NULL, echo_conn, (void *)(intptr_t)c) != 0)
            close(c);
        else
            pthread_detach(thread);
    }
}

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int round_trip(int fd, char *buf, size_t size)
{
    size_t got = 0;

    for (size_t off = 0; off < size;) {
        ssize_t w = write(fd, buf + off, size - off);
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    return 0;
}

static int run_pingpong(const char *connect_text, size_t size, long count, long warmup)
{
    struct sockaddr_in addr;
    double *rtt;
    char *buf;
    int one = 1, fd;

    if (parse_addr(connect_text, &addr) < 0 || size == 0 || count <= 0) {
        fprintf(stderr, "sdmz-msgbench: pingpong needs --connect IPv4:PORT --size --count\n");
        return 2;
    }
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        fprintf(stderr, "sdmz-msgbench: %s: %s\n", connect_text, strerror(errno));
        return 1;
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    buf = malloc(size);
    rtt = malloc((size_t)count * sizeof *rtt);
    if (!buf || !rtt)
        return 1;
    memset(buf, 'x', size);
    for (long i = 0; i < warmup; i++)
        if (round_trip(fd, buf, size) < 0)
            goto broken;
    for (long i = 0; i < count; i++) {
        double start = now_us();
        if (round_trip(fd, buf, size) < 0)
            goto broken;
        rtt[i] = now_us() - start;
    }
    qsort(rtt, (size_t)count, sizeof *rtt, cmp_double);
    printf("{\"size\": %zu, \"count\": %ld, \"rtt_us_p50\": %.2f, \"rtt_us_p90\": %.2f, "
           "\"rtt_us_p99\": %.2f, \"rtt_us_min\": %.2f}\n",
           size, count, rtt[count / 2], rtt[count * 9 / 10], rtt[count * 99 / 100], rtt[0]);
    close(fd);
    free(buf);
    free(rtt);
    return 0;
broken:
    fprintf(stderr, "sdmz-msgbench: connection ended during the exchange\n");
    return 1;
}

int main(int argc, char **argv)
{
    const char *listen_text = NULL, *connect_text = NULL;
    size_t size = 0;
    long count = 0, warmup = 1000;

    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--listen")) listen_text = argv[i + 1];
        else if (!strcmp(argv[i], "--connect")) connect_text = argv[i + 1];
        else if (!strcmp(argv[i], "--size")) size = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--count")) count = strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--warmup")) warmup = strtol(argv[i + 1], NULL, 10);
        else {
            fprintf(stderr, "sdmz-msgbench: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (argc >= 2 && !strcmp(argv[1], "echo") && listen_text)
        return run_echo(listen_text);
    if (argc >= 2 && !strcmp(argv[1], "pingpong") && connect_text)
        return run_pingpong(connect_text, size, count, warmup);
    fprintf(stderr, "usage: sdmz-msgbench echo --listen IPv4:PORT\n"
                    "       sdmz-msgbench pingpong --connect IPv4:PORT --size BYTES --count N\n");
    return 2;
}
