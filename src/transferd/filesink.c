#include "filesink.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* One splice or one recv moves at most this much: a pipe this size (the
 * default pipe-max-size), and the copy path's buffer. */
#define SINK_CHUNK (1u << 20)
#define SINK_PIPE_MIN (64u << 10)

static void close_pipe(struct file_sink *sink)
{
    if (sink->pipe_size) {
        close(sink->pipe[0]);
        close(sink->pipe[1]);
    }
    sink->pipe_size = 0;
}

void file_sink_close(struct file_sink *sink)
{
    close_pipe(sink);
    free(sink->buf);
    *sink = (struct file_sink){0};
}

static int pwrite_all(int fd, const char *buf, size_t len, uint64_t offset)
{
    while (len > 0) {
        ssize_t n = pwrite(fd, buf, len, (off_t)offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
        offset += (uint64_t)n;
    }
    return 0;
}

static int ensure_buffer(struct file_sink *sink)
{
    if (!sink->buf)
        sink->buf = malloc(SINK_CHUNK);
    return sink->buf ? 0 : -1;
}

static ssize_t copy_move(struct file_sink *sink, int sock, int file_fd, uint64_t offset,
                         size_t max, enum sink_failure *failure)
{
    size_t want = max < SINK_CHUNK ? max : SINK_CHUNK;
    ssize_t n;

    if (ensure_buffer(sink) < 0) {
        *failure = SINK_FILE;
        return -1;
    }
    do
        n = recv(sock, sink->buf, want, 0);
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
        *failure = SINK_SOCKET;
        return n;
    }
    if (pwrite_all(file_fd, sink->buf, (size_t)n, offset) < 0) {
        *failure = SINK_FILE;
        return -1;
    }
    return n;
}

/* The file refused its first splice: the bytes already in the pipe (at
 * most SINK_CHUNK) go the copy way, and so does everything after. One read
 * takes all a pipe holds. */
static int drain_by_copy(struct file_sink *sink, int file_fd, uint64_t offset, size_t len)
{
    ssize_t n;

    sink->copy_only = true;
    if (ensure_buffer(sink) < 0)
        return -1;
    do
        n = read(sink->pipe[0], sink->buf, len);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)len) {
        if (n >= 0)
            errno = EIO;
        return -1;
    }
    return pwrite_all(file_fd, sink->buf, len, offset);
}

static int drain_pipe(struct file_sink *sink, int file_fd, uint64_t offset, size_t len)
{
    loff_t at = (loff_t)offset;
    size_t left = len;

    while (left > 0) {
        ssize_t n = splice(sink->pipe[0], NULL, file_fd, &at, left, SPLICE_F_MOVE);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EINVAL && left == len)
            return drain_by_copy(sink, file_fd, offset, len);
        if (n <= 0) {
            if (n == 0)
                errno = EIO;
            return -1;
        }
        left -= (size_t)n;
    }
    return 0;
}

static int make_pipe(struct file_sink *sink)
{
    int size;

    if (pipe2(sink->pipe, O_CLOEXEC) < 0)
        return -1;
    /* A bigger pipe means fewer system calls per MiB; if the limit refuses
     * it, the default size still works. */
    if (fcntl(sink->pipe[1], F_SETPIPE_SZ, (int)SINK_CHUNK) < 0) {
        /* EPERM above pipe-max-size for an unprivileged user: keep it. */
    }
    size = fcntl(sink->pipe[1], F_GETPIPE_SZ);
    /* A user past fs.pipe-user-pages-soft gets pipes of two pages; moving
     * 8 KiB per two splices costs more than the copy it saves. */
    if (size < (int)SINK_PIPE_MIN) {
        close(sink->pipe[0]);
        close(sink->pipe[1]);
        return -1;
    }
    sink->pipe_size = (size_t)size < SINK_CHUNK ? (size_t)size : SINK_CHUNK;
    return 0;
}

ssize_t file_sink_move(struct file_sink *sink, int sock, int file_fd, uint64_t offset,
                       size_t max, enum sink_failure *failure)
{
    ssize_t n;

    if (!sink->copy_only && !sink->pipe_size && make_pipe(sink) < 0)
        sink->copy_only = true;
    if (sink->copy_only)
        return copy_move(sink, sock, file_fd, offset, max, failure);
    do
        n = splice(sock, NULL, sink->pipe[1], NULL, max < sink->pipe_size ? max : sink->pipe_size,
                   SPLICE_F_MOVE);
    while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EINVAL) {
        sink->copy_only = true;
        return copy_move(sink, sock, file_fd, offset, max, failure);
    }
    if (n <= 0) {
        *failure = SINK_SOCKET;
        return n;
    }
    if (drain_pipe(sink, file_fd, offset, (size_t)n) < 0) {
        int saved = errno;
        close_pipe(sink);   /* what is left in it belongs to no offset */
        errno = saved;
        *failure = SINK_FILE;
        return -1;
    }
    return n;
}
