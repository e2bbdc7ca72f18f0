#include "cksum.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define CKSUM_READ_SIZE (4u << 20)

struct cksum_state {
    enum ftp_cksum_alg alg;
    uLong adler;
    EVP_MD_CTX *md;
};

static int cksum_begin(struct cksum_state *state, enum ftp_cksum_alg alg)
{
    state->alg = alg;
    state->adler = adler32(0L, Z_NULL, 0);
    state->md = NULL;
    if (alg == FTP_CKSUM_ADLER32)
        return 0;
    state->md = EVP_MD_CTX_new();
    if (!state->md)
        return -1;
    return EVP_DigestInit_ex(state->md, alg == FTP_CKSUM_MD5 ? EVP_md5() : EVP_sha256(),
                             NULL) == 1 ? 0 : -1;
}

static int cksum_update(struct cksum_state *state, const unsigned char *data, size_t len)
{
    if (state->alg == FTP_CKSUM_ADLER32) {
        state->adler = adler32_z(state->adler, data, len);
        return 0;
    }
    return EVP_DigestUpdate(state->md, data, len) == 1 ? 0 : -1;
}

static int cksum_end(struct cksum_state *state, char hex[CKSUM_HEX_MAX])
{
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned digest_len = 0;

    if (state->alg == FTP_CKSUM_ADLER32) {
        snprintf(hex, CKSUM_HEX_MAX, "%08lx", (unsigned long)state->adler);
        return 0;
    }
    if (EVP_DigestFinal_ex(state->md, digest, &digest_len) != 1)
        return -1;
    for (unsigned i = 0; i < digest_len; i++)
        snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    return 0;
}

int cksum_fd(int fd, enum ftp_cksum_alg alg, uint64_t offset, int64_t length,
             char hex[CKSUM_HEX_MAX], char *err, size_t errlen)
{
    struct cksum_state state = {.md = NULL};
    unsigned char *buf = malloc(CKSUM_READ_SIZE);
    uint64_t left = length < 0 ? UINT64_MAX : (uint64_t)length;
    int rc = -1;

    if (!buf || cksum_begin(&state, alg) < 0) {
        snprintf(err, errlen, "checksum: out of memory");
        goto out;
    }
    while (left > 0) {
        size_t want = left < CKSUM_READ_SIZE ? (size_t)left : CKSUM_READ_SIZE;
        ssize_t n = pread(fd, buf, want, (off_t)offset);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            snprintf(err, errlen, "checksum: read: %s", strerror(errno));
            goto out;
        }
        if (n == 0) {
            if (length >= 0) {
                snprintf(err, errlen, "checksum: range ends past the end of the file");
                goto out;
            }
            break;
        }
        if (cksum_update(&state, buf, (size_t)n) < 0) {
            snprintf(err, errlen, "checksum: digest failed");
            goto out;
        }
        offset += (uint64_t)n;
        left -= (uint64_t)n;
    }
    if (cksum_end(&state, hex) < 0)
        snprintf(err, errlen, "checksum: digest failed");
    else
        rc = 0;
out:
    EVP_MD_CTX_free(state.md);
    free(buf);
    return rc;
}
