#include "xferlog.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double wall_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 20180422105055.986780, UTC. */
static void format_date(double when, char *buf, size_t len)
{
    time_t secs = (time_t)when;
    long usecs = (long)((when - (double)secs) * 1e6);
    struct tm tm;

    gmtime_r(&secs, &tm);
    size_t n = strftime(buf, len, "%Y%m%d%H%M%S", &tm);
    snprintf(buf + n, len - n, ".%06ld", usecs < 0 ? 0 : usecs > 999999 ? 999999 : usecs);
}

void xferlog_format(const struct xferlog_entry *e, char *buf, size_t len)
{
    char date[32], start[32], retrans[DATA_STREAMS_MAX * 11];

    format_date(e->end, date, sizeof date);
    format_date(e->start, start, sizeof start);
    xfer_format_retrans(e->stats, retrans, sizeof retrans);
    /* Spaces in a file name would split the field for every parser of this
     * format; the original server writes them as they are, we do the same
     * (the analyses take FILE as everything up to " BUFFER="). */
    snprintf(buf, len,
             "DATE=%s HOST=%s PROG=%s NL.EVNT=FTP_INFO START=%s USER=%s FILE=%s "
             "BUFFER=%" PRIu64 " BLOCK=%" PRIu64 " NBYTES=%" PRIu64 " VOLUME=/ "
             "STREAMS=%u STRIPES=1 DEST=[%s] TYPE=%s CODE=%d TASKID=none RETRANS=%s\n",
             date, e->host, e->program, start, e->user, e->file, e->buffer, e->block,
             e->nbytes, e->stats->streams ? e->stats->streams : 1, e->dest, e->type,
             e->code, retrans[0] ? retrans : "0");
}

int xferlog_write(int fd, const struct xferlog_entry *entry)
{
    char line[8192];
    ssize_t n;

    xferlog_format(entry, line, sizeof line);
    do
        n = write(fd, line, strlen(line));
    while (n < 0 && errno == EINTR);
    return n < 0 ? -1 : 0;
}
