#include "tls.h"

#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

const char *tls_last_error(char *buf, size_t len)
{
    unsigned long code = ERR_get_error();

    if (code == 0)
        snprintf(buf, len, "no OpenSSL error recorded");
    else
        ERR_error_string_n(code, buf, len);
    ERR_clear_error();
    return buf;
}

static SSL_CTX *context_fail(SSL_CTX *ctx, const char *what, const char *file, char *err,
                             size_t errlen)
{
    char why[200];

    snprintf(err, errlen, "%s %s: %s", what, file, tls_last_error(why, sizeof why));
    SSL_CTX_free(ctx);
    return NULL;
}

SSL_CTX *tls_context_new(const char *cert_file, const char *key_file, const char *ca_file,
                         char *err, size_t errlen)
{
    SSL_CTX *ctx;

    ERR_clear_error();
    if (!cert_file[0] || !key_file[0] || !ca_file[0]) {
        snprintf(err, errlen, "tls needs tls_cert, tls_key and tls_ca");
        return NULL;
    }
    ctx = SSL_CTX_new(TLS_method());
    if (!ctx)
        return context_fail(NULL, "tls", "context", err, errlen);
    /* TLS 1.3 only; both ends present certificates signed by the site's CA. */
    if (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION))
        return context_fail(ctx, "tls", "TLS 1.3", err, errlen);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1)
        return context_fail(ctx, "tls_cert", cert_file, err, errlen);
    if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1)
        return context_fail(ctx, "tls_key", key_file, err, errlen);
    if (SSL_CTX_check_private_key(ctx) != 1)
        return context_fail(ctx, "tls_key", key_file, err, errlen);
    if (SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1)
        return context_fail(ctx, "tls_ca", ca_file, err, errlen);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    /* Long-lived relays between two fixed peers: no resumption tickets, so no
     * post-handshake records either (they would stop a kTLS receive path). */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    (void)SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_ENABLE_KTLS);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    return ctx;
}

int tls_context_from_config(const struct proxy_config *cfg, SSL_CTX **ctx, char *err,
                            size_t errlen)
{
    *ctx = NULL;
    if (!cfg->tls_cert[0])
        return 0;
    *ctx = tls_context_new(cfg->tls_cert, cfg->tls_key, cfg->tls_ca, err, errlen);
    return *ctx ? 0 : -1;
}

SSL *tls_session_new(SSL_CTX *ctx, int fd, bool client, const char *peer_name, char *err,
                     size_t errlen)
{
    SSL *ssl;
    char why[200];

    ERR_clear_error();
    ssl = SSL_new(ctx);
    if (!ssl || SSL_set_fd(ssl, fd) != 1 || SSL_set1_host(ssl, peer_name) != 1 ||
        (client && SSL_set_tlsext_host_name(ssl, peer_name) != 1)) {
        snprintf(err, errlen, "tls session: %s", tls_last_error(why, sizeof why));
        SSL_free(ssl);
        return NULL;
    }
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (client)
        SSL_set_connect_state(ssl);
    else
        SSL_set_accept_state(ssl);
    return ssl;
}

/* Map an SSL_* return value to read()/send() conventions. */
static int io_result(SSL *ssl, int ret, uint32_t *want)
{
    int saved = errno;

    switch (SSL_get_error(ssl, ret)) {
    case SSL_ERROR_WANT_READ:
        *want = EPOLLIN;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_WANT_WRITE:
        *want = EPOLLOUT;
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        /* An I/O error, or EOF without close_notify: a truncated stream. */
        errno = saved ? saved : EPROTO;
        return -1;
    default:
        errno = EPROTO;
        return -1;
    }
}

int tls_handshake(SSL *ssl, uint32_t *want, char *why, size_t whylen)
{
    int ret;
    long verify;
    char detail[200];

    ERR_clear_error();
    errno = 0;
    ret = SSL_do_handshake(ssl);
    if (ret == 1)
        return 1;
    if (io_result(ssl, ret, want) < 0 && errno == EAGAIN)
        return 0;
    verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK)
        snprintf(why, whylen, "peer certificate: %s", X509_verify_cert_error_string(verify));
    else if (ERR_peek_error())
        snprintf(why, whylen, "%s", tls_last_error(detail, sizeof detail));
    else
        snprintf(why, whylen, "%s", errno ? strerror(errno) : "peer closed during handshake");
    ERR_clear_error();
    return -1;
}

ssize_t tls_read(SSL *ssl, void *buf, size_t len, uint32_t *want)
{
    size_t done = 0;
    int ret;

    ERR_clear_error();
    errno = 0;
    ret = SSL_read_ex(ssl, buf, len, &done);
    if (ret == 1)
        return (ssize_t)done;
    return io_result(ssl, ret, want);
}

ssize_t tls_write(SSL *ssl, const void *buf, size_t len, uint32_t *want)
{
    size_t done = 0;
    int ret;

    ERR_clear_error();
    errno = 0;
    ret = SSL_write_ex(ssl, buf, len, &done);
    if (ret == 1)
        return (ssize_t)done;
    if (io_result(ssl, ret, want) == 0) {
        errno = EPIPE; /* the peer said close_notify: nothing more can be written */
        return -1;
    }
    return -1;
}

int tls_close_notify(SSL *ssl, uint32_t *want)
{
    int ret;

    ERR_clear_error();
    errno = 0;
    ret = SSL_shutdown(ssl);
    if (ret < 0 && io_result(ssl, ret, want) < 0 && errno == EAGAIN)
        return 0;
    ERR_clear_error();
    return 1;
}

bool tls_has_pending(SSL *ssl)
{
    return SSL_has_pending(ssl) == 1;
}

const char *tls_ktls_mode(SSL *ssl)
{
    bool send = BIO_get_ktls_send(SSL_get_wbio(ssl));
    bool recv = BIO_get_ktls_recv(SSL_get_rbio(ssl));

    return send && recv ? "kernel" : send ? "send" : recv ? "recv" : "off";
}
