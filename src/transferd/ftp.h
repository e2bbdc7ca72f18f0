/* The FTP/GridFTP control language, as text: one command line in, its parts
 * out; the arguments GridFTP adds (PORT/EPRT host-ports, PASV/EPSV replies,
 * OPTS RETR Parallelism, REST ranges, ERET/ESTO, CKSM). Pure functions over
 * bytes the peer sent, so they are unit-tested and fuzzed on their own.
 * RFC 959, RFC 2428 (EPRT/EPSV), RFC 3659 (MLST/SIZE/REST), GFD.20. */
#ifndef SDMZ_FTP_H
#define SDMZ_FTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define FTP_LINE_MAX 4096   /* a command line, CRLF included */
#define FTP_RANGES_MAX 64   /* ranges one REST or restart marker may name */

struct ftp_command {
    char verb[8];            /* upper-cased, 3 or 4 letters */
    const char *arg;         /* points into the caller's line; "" when none */
};

/* line holds len bytes without the CRLF (the caller's reader strips it).
 * 0, or -1 with the reason in err. The line is modified (NUL-terminated). */
int ftp_parse_command(char *line, size_t len, struct ftp_command *out,
                      char *err, size_t errlen);

/* PORT "h1,h2,h3,h4,p1,p2" and the PASV reply's parenthesised same. */
int ftp_parse_hostport(const char *text, struct sockaddr_storage *out);
void ftp_format_hostport(const struct sockaddr_storage *addr, char *buf, size_t len);
/* EPRT "|1|192.0.2.1|5000|" or "|2|2001:db8::1|5000|". */
int ftp_parse_eprt(const char *text, struct sockaddr_storage *out);
void ftp_format_eprt(const struct sockaddr_storage *addr, char *buf, size_t len);
/* The port of an EPSV reply: "Entering Extended Passive Mode (|||5000|)". */
int ftp_parse_epsv_reply(const char *text, uint16_t *port);
/* The host-port of a PASV reply: "Entering Passive Mode (127,0,0,1,4,1)". */
int ftp_parse_pasv_reply(const char *text, struct sockaddr_storage *out);

/* "RETR Parallelism=4,4,4;" -> 4 (the starting value; GridFTP's min and max
 * are accepted and ignored: work-sharing makes them unnecessary). */
int ftp_parse_parallelism(const char *text, unsigned max, unsigned *streams);

/* Byte ranges [start, end) as REST takes them in MODE E and as the 111
 * Range Marker reply reports them: "0-1000,2000-3000". */
struct ftp_range {
    uint64_t start;
    uint64_t end;
};
struct ftp_ranges {
    unsigned count;
    struct ftp_range r[FTP_RANGES_MAX];
};
int ftp_parse_ranges(const char *text, struct ftp_ranges *out);
/* Writes "a-b,c-d"; false if buf is too small. */
bool ftp_format_ranges(const struct ftp_ranges *ranges, char *buf, size_t len);
/* Adds [start, end), merging with neighbours; false when the set is full. */
bool ftp_ranges_add(struct ftp_ranges *ranges, uint64_t start, uint64_t end);
/* Bytes covered within [0, limit). */
uint64_t ftp_ranges_covered(const struct ftp_ranges *ranges, uint64_t limit);
/* The end of the last range (ranges are kept sorted and merged); 0 if none. */
uint64_t ftp_ranges_end(const struct ftp_ranges *ranges);

/* "P OFFSET LENGTH PATH" (ERET/ESTO partial); path points into text. */
int ftp_parse_partial(const char *text, uint64_t *offset, uint64_t *length,
                      const char **path);

/* "ALGORITHM OFFSET LENGTH PATH" with LENGTH -1 meaning to the end. */
enum ftp_cksum_alg { FTP_CKSUM_ADLER32, FTP_CKSUM_MD5, FTP_CKSUM_SHA256 };
int ftp_parse_cksum_alg(const char *name, enum ftp_cksum_alg *out);
const char *ftp_cksum_alg_name(enum ftp_cksum_alg alg);
int ftp_parse_cksm(const char *text, enum ftp_cksum_alg *alg, uint64_t *offset,
                   int64_t *length, const char **path);

/* A reply's code when line is its last line ("226 Transfer complete."):
 * 100..599, or 0 for a continuation line ("226-..." or " text"). */
int ftp_reply_final_code(const char *line, int expected_code);
/* The code that opens a reply line ("226-" or "226 "), or 0. */
int ftp_reply_code(const char *line);

#endif
