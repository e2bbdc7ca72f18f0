/* Logging to stderr. Under systemd (JOURNAL_STREAM set) each line starts with
 * a <N> syslog priority so journald files it at the right level. */
#ifndef SDMZ_LOG_H
#define SDMZ_LOG_H

enum log_level { LOG_ERROR = 3, LOG_WARN = 4, LOG_INFO = 6, LOG_DEBUG = 7 };

void log_setup(const char *program, enum log_level threshold);
void log_msg(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
