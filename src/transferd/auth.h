/* Token logins: a file of "USER TOKEN" lines ('#' starts a comment), readable
 * by the service alone. Tokens are compared as SHA-256 digests with
 * CRYPTO_memcmp, so the comparison time says nothing about the token. */
#ifndef SDMZ_AUTH_H
#define SDMZ_AUTH_H

#include <stdbool.h>
#include <stddef.h>

/* Refuses a file that group or others may read or write. 0, or -1 with the
 * reason in err. */
int auth_check_token_file(const char *path, char *err, size_t errlen);
/* True when path lists user with exactly this token. */
bool auth_token_valid(const char *path, const char *user, const char *token);

#endif
