/* libFuzzer harness: a control message as it arrives on the socket, through
 * framing, HMAC, replay checks and the request-spec parser. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "request.h"

static struct replay_cache cache;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct control_key key = {.len = 16};
    struct control_msg msg;
    struct request_spec spec, base = {.buffer_bytes = 1 << 20, .record_bytes = 1,
                                      .max_conns = 8};
    char line[CONTROL_MAX_LINE + 1], err[256], signed_line[CONTROL_MAX_LINE + 1];
    unsigned mask;

    if (size > CONTROL_MAX_LINE)
        return 0;
    memset(key.bytes, 'k', key.len);
    memcpy(line, data, size);
    line[size] = '\0';
    /* Raw input: almost always rejected by the HMAC, which must not crash. */
    (void)control_parse(line, size, &key, &msg, err, sizeof err);

    /* Signed input: the fuzzer's bytes as arguments reach the parsers. */
    memcpy(line, data, size);
    line[size] = '\0';
    {
        char *args[CONTROL_MAX_ARGS], *save = NULL;
        int nargs = 0;
        for (char *t = strtok_r(line, " \n", &save); t && nargs < CONTROL_MAX_ARGS;
             t = strtok_r(NULL, " \n", &save))
            args[nargs++] = t;
        int n = control_sign(&key, 1800000000, "00112233445566778899aabbccddeeff", "create",
                             nargs, args, signed_line, sizeof signed_line);
        if (n <= 0)
            return 0;
        if (control_parse(signed_line, (size_t)n - 1, &key, &msg, err, sizeof err) != CONTROL_OK)
            return 0;
        (void)control_admit(&cache, &msg, 1800000000);
        if (request_spec_parse(&spec, msg.nargs, msg.args, &base, NULL, err, sizeof err) == 0) {
            char text[4096];
            (void)request_spec_format(&spec, text, sizeof text);
        }
        spec = base;
        (void)request_spec_parse(&spec, msg.nargs, msg.args, NULL, &mask, err, sizeof err);
    }
    return 0;
}
