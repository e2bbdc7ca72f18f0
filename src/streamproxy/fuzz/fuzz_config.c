/* libFuzzer harness: the configuration file parser. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct proxy_config cfg;
    char err[256];
    char *text = malloc(size + 1);

    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    (void)config_parse(text, &cfg, err, sizeof err);
    free(text);
    return 0;
}
