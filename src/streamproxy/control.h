/* The control protocol between sdmz-streamctl and sdmz-proxy serve, one
 * request per connection on a local socket:
 *
 *   SDMZ1 <unix-time> <nonce: 32 hex> <verb> [key=value ...] <hmac: 64 hex>\n
 *
 * The HMAC-SHA256, keyed with the shared control key, covers everything
 * before the last space. A message is accepted once: its time must be within
 * CONTROL_WINDOW seconds of the server's and its nonce unseen in that window.
 * The reply is "ok ..." or "error <what>: <why>", then data lines, then EOF. */
#ifndef SDMZ_CONTROL_H
#define SDMZ_CONTROL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define CONTROL_VERSION "SDMZ1"
#define CONTROL_MAX_LINE 4096
#define CONTROL_MAX_ARGS 32
#define CONTROL_WINDOW 30
#define CONTROL_NONCE_HEX 32
#define CONTROL_MAC_HEX 64
#define CONTROL_KEY_MIN 16
#define CONTROL_KEY_MAX 256
#define REPLAY_SLOTS 4096

enum control_verdict {
    CONTROL_OK = 0,
    CONTROL_MALFORMED,
    CONTROL_BAD_MAC,
    CONTROL_STALE,
    CONTROL_REPLAY,
    CONTROL_BUSY,
};

struct control_msg {
    long long timestamp;
    char nonce[CONTROL_NONCE_HEX + 1];
    char *verb;
    int nargs;
    char *args[CONTROL_MAX_ARGS];
};

struct control_key {
    uint8_t bytes[CONTROL_KEY_MAX];
    size_t len;
};

struct replay_cache {
    struct {
        char nonce[CONTROL_NONCE_HEX + 1];
        time_t expires;
    } slot[REPLAY_SLOTS];
};

/* Read a key file: its bytes, trailing whitespace removed; at least 16. */
int control_key_load(const char *path, struct control_key *key, char *err, size_t errlen);
/* Check framing and MAC of one line (without its newline) and split it in
 * place. Does not consult the replay cache. */
enum control_verdict control_parse(char *line, size_t len, const struct control_key *key,
                                   struct control_msg *msg, char *err, size_t errlen);
/* Time window and nonce check; remembers the nonce when accepted. */
enum control_verdict control_admit(struct replay_cache *cache, const struct control_msg *msg,
                                   time_t now);
/* Build a signed line (with newline) for verb and args; -1 if it does not fit. */
int control_sign(const struct control_key *key, time_t now, const char *nonce,
                 const char *verb, int nargs, char **args, char *out, size_t outlen);
const char *control_verdict_name(enum control_verdict verdict);

#endif
