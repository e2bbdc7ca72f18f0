/* The client side of one GridFTP control session: login, replies, and
 * single-file get/put in MODE E over parallel streams, with pipelined
 * commands on cached data channels. Talks to sdmz-xferd and to
 * globus-gridftp-server alike (only plain GridFTP is used). */
#ifndef SDMZ_CLIENT_H
#define SDMZ_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "data.h"
#include "ftp.h"

struct client {
    int in_fd;
    int out_fd;
    int sock;                        /* the control socket, -1 under sshftp */
    char inbuf[FTP_LINE_MAX];
    size_t inbuf_len;
    struct sockaddr_storage server;  /* data connections go to this host */
    struct sockaddr_storage local;   /* and come back to this one */
    unsigned streams;
    struct data_tuning tuning;
    struct data_cache cache;
    int listen_fd;                   /* for receiving (PORT), kept across files */
    uint16_t data_port_lo;           /* its port: in this range (0, 0: any) */
    uint16_t data_port_hi;
    bool mode_e;
    char reply[FTP_LINE_MAX];        /* the last reply's final line */
    int timeout_ms;
    atomic_uint_least64_t *progress; /* optional: bytes moved are added here */
};

struct client_reply {
    int code;
    const char *text;                /* points into client.reply */
};

/* Connects, reads the greeting, logs in. 0, or -1 with the reason in err. */
int client_open_tcp(struct client *c, const char *host, const char *port, const char *user,
                    const char *password, char *err, size_t errlen);
/* The control channel is a pair of pipes (sshftp: ssh runs the server); data
 * connections go to host. */
int client_open_fds(struct client *c, int in_fd, int out_fd, const char *host,
                    char *err, size_t errlen);
void client_close(struct client *c);

/* Sends one command (the CRLF is added). */
int client_send(struct client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Reads one complete reply; 111 restart markers are handed to marker. */
int client_read_reply(struct client *c, struct client_reply *out,
                      void (*marker)(void *ctx, const char *ranges), void *marker_ctx);
/* Sends a command and reads its reply; -1 when the code is not want. */
int client_command(struct client *c, int want, char *err, size_t errlen,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Sets MODE E and the parallelism once per session. */
int client_prepare(struct client *c, char *err, size_t errlen);

struct remote_entry {
    char name[256];
    bool is_dir;
    uint64_t size;
};
/* MLST: 0 and the entry; 1 on a 550 (absent or refused; the reply in err);
 * -1 on error. */
int client_stat(struct client *c, const char *path, struct remote_entry *out,
                char *err, size_t errlen);
/* MLSD of a directory, "." and ".." left out; *entries is malloc'ed. */
int client_list(struct client *c, const char *path, struct remote_entry **entries,
                size_t *count, char *err, size_t errlen);
int client_mkdir(struct client *c, const char *path, char *err, size_t errlen);
int client_checksum(struct client *c, enum ftp_cksum_alg alg, const char *path,
                    char hex[65], char *err, size_t errlen);

/* A file to move, with what the receiver already holds (resume). */
struct client_file {
    const char *remote;
    int local_fd;
    uint64_t size;                   /* put: the local size */
    struct ftp_ranges *have;         /* NULL: from scratch */
    bool empty_first;                /* get: cut to 0 bytes when its data begins */
    void (*durable)(void *ctx, const struct ftp_ranges *ranges);
    void *durable_ctx;
    struct xfer_stats stats;
};

/* Pipelined: every RETR/STOR of the batch is sent before the first reply is
 * read, so n small files cost one round trip, not n. 0, or -1 with the
 * failing file's index in *failed and the reason in err. */
int client_get(struct client *c, struct client_file *files, size_t n, size_t *failed,
               char *err, size_t errlen);
int client_put(struct client *c, struct client_file *files, size_t n, size_t *failed,
               char *err, size_t errlen);

#endif
