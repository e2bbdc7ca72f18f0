/* One control session of sdmz-xferd: the FTP/GridFTP command interpreter.
 * A session runs in its own process (forked per connection, or the whole
 * process under --inetd), so its state is plain and its failure contained. */
#ifndef SDMZ_SESSION_H
#define SDMZ_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "data.h"
#include "rootfs.h"

struct server_config {
    struct rootfs roots;
    struct sockaddr_storage listen_addr;
    uint16_t data_port_lo;
    uint16_t data_port_hi;
    bool anonymous_read;
    const char *token_file;        /* "USER TOKEN" lines; NULL: no token logins */
    int transfer_log_fd;           /* -1: no transfer log */
    unsigned max_sessions;
    unsigned max_streams;          /* data connections per transfer */
    struct data_tuning tuning;
    int idle_timeout_s;            /* control channel */
    int marker_interval_ms;        /* 111 restart markers while receiving */
    bool inetd;                    /* authenticated by the transport (sshftp) */
    char inetd_user[64];
    char hostname[256];
};

/* Serves one session on in/out (the same socket, or stdin/stdout). Returns
 * when the client quits or the connection ends. */
void session_run(const struct server_config *config, int in_fd, int out_fd);

#endif
