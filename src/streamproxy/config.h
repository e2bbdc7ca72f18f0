/* sdmz-proxy's configuration file: "key = value" lines, '#' comments.
 * Every key has a default (config_defaults); unknown keys are errors. */
#ifndef SDMZ_CONFIG_H
#define SDMZ_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "log.h"

#define CONFIG_PATH_MAX 256
#define CONFIG_BUSY_POLL_MAX_US 10000
#define CONFIG_STRINGIFY(x) #x
#define CONFIG_STRING(x) CONFIG_STRINGIFY(x)
/* What busy_poll_us and relay --busy-poll take, said once for both errors. */
#define CONFIG_BUSY_POLL_RANGE \
    "microseconds, 0-" CONFIG_STRING(CONFIG_BUSY_POLL_MAX_US) " (0: workers sleep when idle)"

struct proxy_config {
    char control_socket[108];      /* sun_path */
    char key_file[CONFIG_PATH_MAX];
    char state_file[CONFIG_PATH_MAX]; /* "" = requests are not kept across restarts */
    bool metrics_enabled;
    struct sockaddr_storage metrics_listen;
    uint16_t port_min, port_max;   /* request listen ports must fall in here */
    unsigned max_connections;      /* relayed connections in total */
    unsigned workers;              /* 0 = one per online CPU */
    unsigned busy_poll_us;         /* 0 = workers sleep when idle; else spin this long first */
    uint64_t default_buffer;
    unsigned default_max_conns;
    enum log_level log_level;
    /* TLS on gateway-to-gateway legs (tls.h): all three, or none. */
    char tls_cert[CONFIG_PATH_MAX];
    char tls_key[CONFIG_PATH_MAX];
    char tls_ca[CONFIG_PATH_MAX];
};

void config_defaults(struct proxy_config *cfg);
/* Parse text (NUL-terminated); on error one message "line N: key: why". */
int config_parse(const char *text, struct proxy_config *cfg, char *err, size_t errlen);
int config_load(const char *path, struct proxy_config *cfg, char *err, size_t errlen);

#endif
