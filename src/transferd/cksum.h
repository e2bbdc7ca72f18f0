/* Checksums GridFTP's CKSM offers (ADLER32, MD5) and SHA256, over a range of
 * an open file, as lower-case hex. ADLER32 from zlib, the digests from
 * OpenSSL's EVP. */
#ifndef SDMZ_CKSUM_H
#define SDMZ_CKSUM_H

#include <stddef.h>
#include <stdint.h>

#include "ftp.h"

#define CKSUM_HEX_MAX 65   /* SHA256 in hex, and the NUL */

/* length -1: to the end of the file. 0, or -1 with the reason in err. */
int cksum_fd(int fd, enum ftp_cksum_alg alg, uint64_t offset, int64_t length,
             char hex[CKSUM_HEX_MAX], char *err, size_t errlen);

#endif
