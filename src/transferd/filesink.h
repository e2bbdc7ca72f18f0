/* Moving received bytes from a data connection into a file. splice() through
 * a pipe, so the payload is copied once (into the page cache) instead of
 * twice (into a buffer, then into the page cache). Where the file cannot
 * take a splice (EINVAL: O_APPEND, some file systems), or the user's pipe
 * limit leaves only a tiny pipe, it falls back to recv() and pwrite()
 * through a buffer, for good. One sink per receiving
 * thread, kept across files. */
#ifndef SDMZ_FILESINK_H
#define SDMZ_FILESINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct file_sink {
    int pipe[2];
    size_t pipe_size;       /* 0: no pipe yet (a zeroed sink is ready for use) */
    bool copy_only;         /* splice refused once: recv + pwrite from now on */
    char *buf;              /* the copy path's buffer, made when first needed */
};

enum sink_failure {
    SINK_SOCKET,            /* receiving failed (errno), or the peer closed */
    SINK_FILE,              /* writing the file failed (errno: ENOSPC...) */
};

/* Frees the pipe and buffer; the sink can be used again. */
void file_sink_close(struct file_sink *sink);

/* Takes what the socket has, at most max bytes (blocking until there is
 * some), and writes all of it to file_fd at offset. Returns the bytes
 * written (> 0); 0 when the peer closed the connection before any; -1 with
 * errno and *failure set. On failure, bytes taken from the socket may not
 * be in the file: nothing of that call may be claimed as received. */
ssize_t file_sink_move(struct file_sink *sink, int sock, int file_fd, uint64_t offset,
                       size_t max, enum sink_failure *failure);

#endif
