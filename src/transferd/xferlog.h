/* The GridFTP transfer log: one line per file, the key=value fields of
 * globus-gridftp-server's transfer log (the study's Table I), so existing log
 * analyses read ours unchanged. RETRANS lists each stream's TCP
 * retransmissions (TCP_INFO). */
#ifndef SDMZ_XFERLOG_H
#define SDMZ_XFERLOG_H

#include <stddef.h>
#include <stdint.h>

#include "data.h"

struct xferlog_entry {
    double start;            /* wall clock, seconds since the epoch */
    double end;
    const char *host;
    const char *program;
    const char *user;
    const char *file;
    uint64_t buffer;         /* TCP buffer asked for (0: system default) */
    uint64_t block;
    uint64_t nbytes;
    const char *dest;        /* the remote host's address */
    const char *type;        /* RETR, STOR, ERET, ESTO */
    int code;
    const struct xfer_stats *stats;
};

void xferlog_format(const struct xferlog_entry *entry, char *buf, size_t len);
/* Appends one line with a single write(2) (O_APPEND keeps lines whole). */
int xferlog_write(int fd, const struct xferlog_entry *entry);
double wall_seconds(void);

#endif
