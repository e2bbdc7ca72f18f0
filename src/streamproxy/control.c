#include "control.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int control_key_load(const char *path, struct control_key *key, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0) {
        snprintf(err, errlen, "control key %s: %s", path, strerror(errno));
        return -1;
    }
    n = read(fd, key->bytes, sizeof key->bytes);
    if (n < 0) {
        snprintf(err, errlen, "control key %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    close(fd);
    while (n > 0 && (key->bytes[n - 1] == '\n' || key->bytes[n - 1] == '\r' ||
                     key->bytes[n - 1] == ' ' || key->bytes[n - 1] == '\t'))
        n--;
    if ((size_t)n < CONTROL_KEY_MIN) {
        snprintf(err, errlen, "control key %s: shorter than %d bytes", path, CONTROL_KEY_MIN);
        return -1;
    }
    key->len = (size_t)n;
    return 0;
}

static int is_hex(const char *s, size_t len)
{
    if (strlen(s) != len)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

static void mac_hex(const struct control_key *key, const char *body, size_t len,
                    char out[CONTROL_MAC_HEX + 1])
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;

    HMAC(EVP_sha256(), key->bytes, (int)key->len, (const unsigned char *)body, len, mac,
         &mac_len);
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", mac[i]);
}

/* Printable ASCII without space: what a token may hold. */
static int valid_token(const char *tok)
{
    for (; *tok; tok++)
        if (*tok <= ' ' || *tok > '~')
            return 0;
    return 1;
}

enum control_verdict control_parse(char *line, size_t len, const struct control_key *key,
                                   struct control_msg *msg, char *err, size_t errlen)
{
    char expected[CONTROL_MAC_HEX + 1];
    char *last_space, *save = NULL, *tok, *end;
    int index = 0;

    memset(msg, 0, sizeof *msg);
    if (len == 0 || len >= CONTROL_MAX_LINE || memchr(line, '\0', len)) {
        snprintf(err, errlen, "empty, oversized or binary message");
        return CONTROL_MALFORMED;
    }
    line[len] = '\0';
    last_space = strrchr(line, ' ');
    if (!last_space || !is_hex(last_space + 1, CONTROL_MAC_HEX)) {
        snprintf(err, errlen, "no HMAC at the end of the message");
        return CONTROL_MALFORMED;
    }
    mac_hex(key, line, (size_t)(last_space - line), expected);
    if (CRYPTO_memcmp(expected, last_space + 1, CONTROL_MAC_HEX) != 0) {
        snprintf(err, errlen, "HMAC does not match the control key");
        return CONTROL_BAD_MAC;
    }
    *last_space = '\0';
    for (tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save), index++) {
        if (!valid_token(tok)) {
            snprintf(err, errlen, "token %d has control characters", index);
            return CONTROL_MALFORMED;
        }
        if (index == 0) {
            if (strcmp(tok, CONTROL_VERSION) != 0) {
                snprintf(err, errlen, "unknown protocol version '%.16s'", tok);
                return CONTROL_MALFORMED;
            }
        } else if (index == 1) {
            errno = 0;
            msg->timestamp = strtoll(tok, &end, 10);
            if (errno || *end || tok[0] == '-' || tok[0] == '+') {
                snprintf(err, errlen, "timestamp is not a number");
                return CONTROL_MALFORMED;
            }
        } else if (index == 2) {
            if (!is_hex(tok, CONTROL_NONCE_HEX)) {
                snprintf(err, errlen, "nonce must be 32 lowercase hex digits");
                return CONTROL_MALFORMED;
            }
            memcpy(msg->nonce, tok, CONTROL_NONCE_HEX + 1);
        } else if (index == 3) {
            msg->verb = tok;
        } else {
            if (msg->nargs == CONTROL_MAX_ARGS) {
                snprintf(err, errlen, "more than %d arguments", CONTROL_MAX_ARGS);
                return CONTROL_MALFORMED;
            }
            msg->args[msg->nargs++] = tok;
        }
    }
    if (!msg->verb) {
        snprintf(err, errlen, "no verb");
        return CONTROL_MALFORMED;
    }
    return CONTROL_OK;
}

enum control_verdict control_admit(struct replay_cache *cache, const struct control_msg *msg,
                                   time_t now)
{
    int free_slot = -1;

    if (msg->timestamp < (long long)now - CONTROL_WINDOW ||
        msg->timestamp > (long long)now + CONTROL_WINDOW)
        return CONTROL_STALE;
    for (int i = 0; i < REPLAY_SLOTS; i++) {
        if (cache->slot[i].expires > now) {
            if (!strcmp(cache->slot[i].nonce, msg->nonce))
                return CONTROL_REPLAY;
        } else if (free_slot < 0) {
            free_slot = i;
        }
    }
    if (free_slot < 0)
        return CONTROL_BUSY;
    memcpy(cache->slot[free_slot].nonce, msg->nonce, CONTROL_NONCE_HEX + 1);
    /* Kept until no message with this nonce could pass the time check. */
    cache->slot[free_slot].expires = (time_t)msg->timestamp + CONTROL_WINDOW + 1;
    return CONTROL_OK;
}

int control_sign(const struct control_key *key, time_t now, const char *nonce,
                 const char *verb, int nargs, char **args, char *out, size_t outlen)
{
    char mac[CONTROL_MAC_HEX + 1];
    size_t used;
    int n = snprintf(out, outlen, "%s %lld %s %s", CONTROL_VERSION, (long long)now, nonce, verb);

    if (n < 0 || (size_t)n >= outlen)
        return -1;
    used = (size_t)n;
    for (int i = 0; i < nargs; i++) {
        n = snprintf(out + used, outlen - used, " %s", args[i]);
        if (n < 0 || (size_t)n >= outlen - used)
            return -1;
        used += (size_t)n;
    }
    mac_hex(key, out, used, mac);
    n = snprintf(out + used, outlen - used, " %s\n", mac);
    if (n < 0 || (size_t)n >= outlen - used || used + (size_t)n >= CONTROL_MAX_LINE)
        return -1;
    return (int)(used + (size_t)n);
}

const char *control_verdict_name(enum control_verdict verdict)
{
    switch (verdict) {
    case CONTROL_OK: return "ok";
    case CONTROL_MALFORMED: return "malformed";
    case CONTROL_BAD_MAC: return "bad_hmac";
    case CONTROL_STALE: return "stale";
    case CONTROL_REPLAY: return "replay";
    default: return "busy";
    }
}
