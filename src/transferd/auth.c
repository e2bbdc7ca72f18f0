#include "auth.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int auth_check_token_file(const char *path, char *err, size_t errlen)
{
    struct stat st;

    if (stat(path, &st) < 0) {
        snprintf(err, errlen, "--token-file %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "--token-file %s: not a regular file", path);
        return -1;
    }
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        snprintf(err, errlen, "--token-file %s: mode %04o lets others read it; use 0600 or 0400",
                 path, (unsigned)(st.st_mode & 07777));
        return -1;
    }
    return 0;
}

static bool digest(const char *text, unsigned char out[32])
{
    unsigned len = 0;

    return EVP_Digest(text, strlen(text), out, &len, EVP_sha256(), NULL) == 1 && len == 32;
}

bool auth_token_valid(const char *path, const char *user, const char *token)
{
    unsigned char want[32], have[32];
    char line[512];
    bool valid = false;
    FILE *file;

    if (!*user || !*token || !digest(token, have))
        return false;
    file = fopen(path, "re");
    if (!file)
        return false;
    while (fgets(line, sizeof line, file)) {
        char *save = NULL, *name, *secret;
        line[strcspn(line, "#\r\n")] = '\0';
        name = strtok_r(line, " \t", &save);
        secret = name ? strtok_r(NULL, " \t", &save) : NULL;
        if (!secret || strcmp(name, user) != 0)
            continue;
        if (digest(secret, want) && CRYPTO_memcmp(want, have, sizeof want) == 0)
            valid = true;
    }
    OPENSSL_cleanse(line, sizeof line);
    fclose(file);
    return valid;
}
