#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "netaddr.h"
#include "request.h"
#include "units.h"

#define CONFIG_MAX_BYTES 65536

void config_defaults(struct proxy_config *cfg)
{
    char err[128];

    memset(cfg, 0, sizeof *cfg);
    strcpy(cfg->control_socket, "/run/sdmz-proxy/control.sock");
    strcpy(cfg->key_file, "/etc/sdmz-proxy/control.key");
    strcpy(cfg->state_file, "/var/lib/sdmz-proxy/requests");
    cfg->metrics_enabled = true;
    netaddr_parse("127.0.0.1:9105", &cfg->metrics_listen, err, sizeof err);
    cfg->port_min = 5100;
    cfg->port_max = 5199;
    cfg->max_connections = 1024;
    cfg->workers = 0;
    cfg->default_buffer = 1024 * 1024;
    cfg->default_max_conns = 64;
    cfg->log_level = LOG_INFO;
}

static char *trim(char *s)
{
    char *end;

    while (*s == ' ' || *s == '\t')
        s++;
    end = s + strlen(s);
    while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
        *--end = '\0';
    return s;
}

static int copy_path(char *dst, size_t size, const char *value, int allow_empty)
{
    if ((!allow_empty && value[0] != '/') || (value[0] && value[0] != '/') ||
        strlen(value) >= size)
        return -1;
    strcpy(dst, value);
    return 0;
}

static int set_key(struct proxy_config *cfg, const char *key, const char *value,
                   const char **why)
{
    uint64_t n;
    char err[160];

    *why = NULL;
    if (!strcmp(key, "control_socket")) {
        if (copy_path(cfg->control_socket, sizeof cfg->control_socket, value, 0) < 0)
            *why = "an absolute path shorter than 108 bytes";
    } else if (!strcmp(key, "key_file")) {
        if (copy_path(cfg->key_file, sizeof cfg->key_file, value, 0) < 0)
            *why = "an absolute path";
    } else if (!strcmp(key, "state_file")) {
        if (copy_path(cfg->state_file, sizeof cfg->state_file, value, 1) < 0)
            *why = "an absolute path, or empty for none";
    } else if (!strcmp(key, "tls_cert") || !strcmp(key, "tls_key") || !strcmp(key, "tls_ca")) {
        char *dst = key[4] == 'c' && key[5] == 'e' ? cfg->tls_cert
                    : key[4] == 'k'                ? cfg->tls_key
                                                   : cfg->tls_ca;
        if (copy_path(dst, CONFIG_PATH_MAX, value, 1) < 0)
            *why = "an absolute path, or empty for none";
    } else if (!strcmp(key, "metrics_listen")) {
        cfg->metrics_enabled = strcmp(value, "off") != 0;
        if (cfg->metrics_enabled && netaddr_parse(value, &cfg->metrics_listen, err, sizeof err) < 0)
            *why = "ADDRESS:PORT or off";
    } else if (!strcmp(key, "port_range")) {
        if (parse_port_range(value, 1, &cfg->port_min, &cfg->port_max) < 0)
            *why = "LOW-HIGH, 1-65535";
    } else if (!strcmp(key, "max_connections")) {
        if (parse_uint(value, 1000000, &n) < 0 || n == 0)
            *why = "1-1000000";
        else
            cfg->max_connections = (unsigned)n;
    } else if (!strcmp(key, "workers")) {
        if (!strcmp(value, "auto"))
            cfg->workers = 0;
        else if (parse_uint(value, 256, &n) < 0 || n == 0)
            *why = "auto or 1-256";
        else
            cfg->workers = (unsigned)n;
    } else if (!strcmp(key, "busy_poll_us")) {
        if (parse_uint(value, CONFIG_BUSY_POLL_MAX_US, &n) < 0)
            *why = CONFIG_BUSY_POLL_RANGE;
        else
            cfg->busy_poll_us = (unsigned)n;
    } else if (!strcmp(key, "default_buffer")) {
        if (parse_bytes(value, &n) < 0 || n < REQUEST_MIN_BUFFER || n > REQUEST_MAX_BUFFER)
            *why = "bytes from 4K to 1G";
        else
            cfg->default_buffer = n;
    } else if (!strcmp(key, "default_max_conns")) {
        if (parse_uint(value, 65536, &n) < 0 || n == 0)
            *why = "1-65536";
        else
            cfg->default_max_conns = (unsigned)n;
    } else if (!strcmp(key, "log_level")) {
        if (!strcmp(value, "error")) cfg->log_level = LOG_ERROR;
        else if (!strcmp(value, "warning")) cfg->log_level = LOG_WARN;
        else if (!strcmp(value, "info")) cfg->log_level = LOG_INFO;
        else if (!strcmp(value, "debug")) cfg->log_level = LOG_DEBUG;
        else *why = "error, warning, info or debug";
    } else {
        *why = "unknown key";
    }
    return *why ? -1 : 0;
}

int config_parse(const char *text, struct proxy_config *cfg, char *err, size_t errlen)
{
    const char *p = text;
    unsigned lineno = 0;
    int tls_given;

    config_defaults(cfg);
    while (*p) {
        char line[512], *key, *value, *eq, *hash;
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        const char *why;

        lineno++;
        if (n >= sizeof line) {
            snprintf(err, errlen, "line %u: longer than %zu bytes", lineno, sizeof line - 1);
            return -1;
        }
        memcpy(line, p, n);
        line[n] = '\0';
        p += nl ? n + 1 : n;
        if ((hash = strchr(line, '#')))
            *hash = '\0';
        key = trim(line);
        if (!*key)
            continue;
        eq = strchr(key, '=');
        if (!eq) {
            snprintf(err, errlen, "line %u: expected key = value", lineno);
            return -1;
        }
        *eq = '\0';
        key = trim(key);
        value = trim(eq + 1);
        if (set_key(cfg, key, value, &why) < 0) {
            snprintf(err, errlen, "line %u: %.40s: %s", lineno, key, why);
            return -1;
        }
    }
    tls_given = !!cfg->tls_cert[0] + !!cfg->tls_key[0] + !!cfg->tls_ca[0];
    if (tls_given != 0 && tls_given != 3) {
        snprintf(err, errlen, "tls_cert, tls_key, tls_ca: give all three or none");
        return -1;
    }
    return 0;
}

int config_load(const char *path, struct proxy_config *cfg, char *err, size_t errlen)
{
    char *text;
    ssize_t n;
    size_t used = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc;

    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    text = malloc(CONFIG_MAX_BYTES + 1);
    if (!text) {
        close(fd);
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    while ((n = read(fd, text + used, CONFIG_MAX_BYTES + 1 - used)) > 0)
        used += (size_t)n;
    close(fd);
    if (n < 0 || used > CONFIG_MAX_BYTES) {
        snprintf(err, errlen, "%s: %s", path, n < 0 ? strerror(errno) : "larger than 64 KiB");
        free(text);
        return -1;
    }
    text[used] = '\0';
    if (memchr(text, '\0', used)) {
        snprintf(err, errlen, "%s: binary content", path);
        free(text);
        return -1;
    }
    rc = config_parse(text, cfg, err, errlen);
    if (rc < 0) {
        /* Prefix the file name to the line message. */
        char msg[256];
        snprintf(msg, sizeof msg, "%s: %s", path, err);
        snprintf(err, errlen, "%s", msg);
    }
    free(text);
    return rc;
}
