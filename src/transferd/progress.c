#include "progress.h"

#include <stdio.h>
#include <time.h>

#include "data.h"

#define REDRAW_NS 250000000L

void progress_format_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double value = (double)bytes;
    unsigned u = 0;

    while (value >= 1024 && u + 1 < sizeof unit / sizeof unit[0]) {
        value /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", value, unit[u]);
}

static void draw(const struct progress *p)
{
    uint64_t done = atomic_load(&p->done), all = atomic_load(&p->total);
    double seconds = monotonic_seconds() - p->t0;
    double rate = seconds > 0 ? (double)done / seconds : 0;
    char have[32], total[32], eta[32] = "--:--";

    progress_format_bytes(done, have, sizeof have);
    progress_format_bytes(all, total, sizeof total);
    if (rate > 0 && done <= all) {
        unsigned left = (unsigned)((double)(all - done) / rate + 0.5);
        snprintf(eta, sizeof eta, "%u:%02u", left / 60, left % 60);
    }
    fprintf(stderr, "\r%6.1f%%  %s / %s  %.2f Gbit/s  ETA %s\033[K",
            all ? 100.0 * (double)done / (double)all : 100.0, have, total,
            rate * 8 / 1e9, eta);
    fflush(stderr);
}

static void *redraw(void *arg)
{
    struct progress *p = arg;
    struct timespec pause = {0, REDRAW_NS};

    while (!atomic_load(&p->stop)) {
        draw(p);
        nanosleep(&pause, NULL);
    }
    return NULL;
}

int progress_start(struct progress *p, uint64_t total)
{
    atomic_init(&p->done, 0);
    atomic_init(&p->stop, false);
    atomic_init(&p->total, total);
    p->t0 = monotonic_seconds();
    p->running = pthread_create(&p->thread, NULL, redraw, p) == 0;
    return p->running ? 0 : -1;
}

void progress_stop(struct progress *p)
{
    if (!p->running)
        return;
    atomic_store(&p->stop, true);
    pthread_join(p->thread, NULL);
    p->running = false;
    fputs("\r\033[K", stderr);
    fflush(stderr);
}
