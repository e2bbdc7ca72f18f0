/* TLS 1.3 with mutual certificates on the gateway-to-gateway leg (OpenSSL).
 * One context per daemon (its certificate, key and the CA that signs its peer
 * gateways); one session per relayed connection, driven non-blocking by the
 * connection's worker. kTLS is asked for: where the kernel offers it (the
 * "tls" TCP ULP), OpenSSL hands record encryption to the kernel. */
#ifndef SDMZ_TLS_H
#define SDMZ_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/ssl.h>

/* Loads and checks certificate, key and CA; NULL with one message in err. */
SSL_CTX *tls_context_new(const char *cert_file, const char *key_file, const char *ca_file,
                         char *err, size_t errlen);

struct proxy_config;
/* The context a configuration names (tls_cert, tls_key, tls_ca): 0 with *ctx
 * NULL when it names none, -1 with one message in err when they do not load. */
int tls_context_from_config(const struct proxy_config *cfg, SSL_CTX **ctx, char *err,
                            size_t errlen);

/* A session on fd, client or server; the peer's certificate must chain to the
 * CA and name peer_name (DNS SAN or CN). NULL with a message in err. */
SSL *tls_session_new(SSL_CTX *ctx, int fd, bool client, const char *peer_name, char *err,
                     size_t errlen);

/* Progress a handshake: 1 done, 0 in progress (*want: EPOLLIN or EPOLLOUT),
 * -1 failed with the reason (certificate check included) in why. */
int tls_handshake(SSL *ssl, uint32_t *want, char *why, size_t whylen);

/* Non-blocking I/O with read()/send() conventions: >0 bytes, 0 end of stream
 * (read: close_notify), -1 with errno EAGAIN (*want says for which event) or
 * EPROTO (reason logged by the caller from tls_last_error). */
ssize_t tls_read(SSL *ssl, void *buf, size_t len, uint32_t *want);
ssize_t tls_write(SSL *ssl, const void *buf, size_t len, uint32_t *want);
/* Send close_notify: 1 sent (or hopeless: the TCP half-close follows
 * anyway), 0 the socket is full (*want says when to retry). */
int tls_close_notify(SSL *ssl, uint32_t *want);
/* Decrypted bytes OpenSSL holds that epoll cannot see. */
bool tls_has_pending(SSL *ssl);
/* "kernel" when kTLS carries both directions, "send" or "recv" for one,
 * "off" otherwise. */
const char *tls_ktls_mode(SSL *ssl);
/* The most recent OpenSSL error as text (thread-local queue). */
const char *tls_last_error(char *buf, size_t len);

#endif
