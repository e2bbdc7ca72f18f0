#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* Set once by log_setup() before any thread starts; read-only afterwards. */
static struct {
    const char *program;
    enum log_level threshold;
    int journal;
} log_config = {"sdmz-proxy", LOG_INFO, 0};

void log_setup(const char *program, enum log_level threshold)
{
    log_config.program = program;
    log_config.threshold = threshold;
    log_config.journal = getenv("JOURNAL_STREAM") != NULL;
}

static const char *level_name(enum log_level level)
{
    switch (level) {
    case LOG_ERROR: return "error";
    case LOG_WARN: return "warning";
    case LOG_INFO: return "info";
    default: return "debug";
    }
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    if (level > log_config.threshold)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One fprintf per line: stderr is unbuffered, so lines from workers do
     * not interleave mid-line. */
    if (log_config.journal)
        fprintf(stderr, "<%d>%s\n", (int)level, line);
    else
        fprintf(stderr, "%s: %s: %s\n", log_config.program, level_name(level), line);
}
