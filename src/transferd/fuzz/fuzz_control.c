/* libFuzzer harness: arbitrary bytes through every parser a peer's control
 * or data-channel input reaches (command line, addresses, options, ranges,
 * replies, MODE E headers). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ftp.h"
#include "modee.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char line[FTP_LINE_MAX + 1], err[128], text[FTP_RANGES_MAX * 42];
    struct ftp_command cmd;
    size_t len = size < FTP_LINE_MAX ? size : FTP_LINE_MAX;

    if (size >= MODEE_HEADER_LEN) {
        struct modee_header h;
        modee_decode(data, &h, err, sizeof err);
    }
    memcpy(line, data, len);
    line[len] = '\0';
    if (ftp_parse_command(line, len, &cmd, err, sizeof err) == 0) {
        struct sockaddr_storage addr;
        struct ftp_ranges ranges;
        unsigned streams;
        uint64_t a, b;
        int64_t c;
        uint16_t port;
        const char *path;
        enum ftp_cksum_alg alg;
        ftp_parse_hostport(cmd.arg, &addr);
        ftp_parse_eprt(cmd.arg, &addr);
        ftp_parse_epsv_reply(cmd.arg, &port);
        ftp_parse_parallelism(cmd.arg, 32, &streams);
        if (ftp_parse_ranges(cmd.arg, &ranges) == 0)
            ftp_format_ranges(&ranges, text, sizeof text);
        ftp_parse_partial(cmd.arg, &a, &b, &path);
        ftp_parse_cksm(cmd.arg, &alg, &a, &c, &path);
    }
    ftp_reply_final_code(line, 226);
    return 0;
}
