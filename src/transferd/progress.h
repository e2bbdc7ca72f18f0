/* sdmz-xfer's progress line on a terminal: percent, bytes, rate and ETA,
 * redrawn on stderr four times a second by a thread of its own. The data
 * threads only add to an atomic counter. */
#ifndef SDMZ_PROGRESS_H
#define SDMZ_PROGRESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct progress {
    atomic_uint_least64_t done;   /* bytes moved so far */
    atomic_uint_least64_t total;  /* bytes this run has to move */
    double t0;
    atomic_bool stop;
    bool running;
    pthread_t thread;
};

/* Starts the redraw thread; 0, or -1 (the transfer runs without it). */
int progress_start(struct progress *p, uint64_t total);
/* Stops it and clears the line. */
void progress_stop(struct progress *p);
/* "1.5 GiB" */
void progress_format_bytes(uint64_t bytes, char *buf, size_t len);

#endif
