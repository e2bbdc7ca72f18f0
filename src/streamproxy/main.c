/* sdmz-proxy: the Science DMZ Kit's stream proxy (see README.md). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "request.h"
#include "server.h"
#include "tls.h"
#include "units.h"

#define VERSION "0.1.0"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: sdmz-proxy serve --config FILE\n"
            "       sdmz-proxy relay --listen ADDR:PORT --connect ADDR:PORT [--buffer BYTES]\n"
            "                        [--rate BITS] [--allow CIDR ...] [--policy block|drop-oldest]\n"
            "                        [--record BYTES] [--channels N] [--workers N] [--busy-poll USEC]\n"
            "                        [--metrics ADDR:PORT] [--verbose]\n"
            "                        [--tls-client|--tls-server --tls-peer NAME --tls-cert FILE\n"
            "                         --tls-key FILE --tls-ca FILE]\n"
            "       sdmz-proxy check --config FILE\n"
            "       sdmz-proxy --version\n"
            "BYTES take K, M, G (binary); BITS take K, M, G (decimal), per second.\n"
            "--tls-client: TLS 1.3 towards --connect; --tls-server: TLS 1.3 on --listen.\n"
            "Both ends show certificates signed by --tls-ca; the peer's must name NAME.\n"
            "--busy-poll USEC: workers poll without sleeping for USEC after their last event\n"
            "(lower latency for small messages, at the price of a busy core).\n");
}

static int has_key(int ntok, char **tok, const char *prefix)
{
    for (int i = 0; i < ntok; i++)
        if (!strncmp(tok[i], prefix, strlen(prefix)))
            return 1;
    return 0;
}

/* relay: build one request from the options, as create's key=value tokens,
 * so the command line and the control socket share one parser. */
static int run_relay(int argc, char **argv)
{
    static const struct option options[] = {
        {"listen", required_argument, 0, 'l'}, {"connect", required_argument, 0, 'c'},
        {"buffer", required_argument, 0, 'b'}, {"rate", required_argument, 0, 'r'},
        {"allow", required_argument, 0, 'a'},  {"policy", required_argument, 0, 'p'},
        {"record", required_argument, 0, 'R'}, {"channels", required_argument, 0, 'n'},
        {"workers", required_argument, 0, 'w'}, {"metrics", required_argument, 0, 'm'},
        {"busy-poll", required_argument, 0, 'B'}, {"verbose", no_argument, 0, 'v'},
        {"help", no_argument, 0, 'h'},
        {"tls-client", no_argument, 0, 'C'},   {"tls-server", no_argument, 0, 'S'},
        {"tls-peer", required_argument, 0, 'P'}, {"tls-cert", required_argument, 0, 'T'},
        {"tls-key", required_argument, 0, 'K'}, {"tls-ca", required_argument, 0, 'A'},
        {0, 0, 0, 0}};
    char *tok[16], bufs[16][1100], allow[1000] = "", err[200];
    struct proxy_config cfg;
    struct request_spec spec;
    int ntok = 0, opt;
    uint64_t workers = 0, busy_poll_us;

    config_defaults(&cfg);
    cfg.metrics_enabled = false;
    cfg.state_file[0] = '\0';
    tok[ntok++] = strcpy(bufs[0], "id=relay");
    tok[ntok++] = strcpy(bufs[1], "side=producer");
    optind = 2;
    while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
        const char *key = NULL;
        switch (opt) {
        case 'l': key = "listen"; break;
        case 'c': key = "connect"; break;
        case 'b': key = "buffer"; break;
        case 'r': key = "rate"; break;
        case 'p': key = "policy"; break;
        case 'R': key = "record"; break;
        case 'n': key = "channels"; break;
        case 'a':
            if (strlen(allow) + strlen(optarg) + 2 > sizeof allow) {
                fprintf(stderr, "sdmz-proxy: --allow: too many prefixes\n");
                return 2;
            }
            if (allow[0])
                strcat(allow, ",");
            strcat(allow, optarg);
            continue;
        case 'w':
            workers = strtoull(optarg, NULL, 10);
            if (workers == 0 || workers > 256) {
                fprintf(stderr, "sdmz-proxy: --workers: 1-256\n");
                return 2;
            }
            cfg.workers = (unsigned)workers;
            continue;
        case 'B':
            if (parse_uint(optarg, CONFIG_BUSY_POLL_MAX_US, &busy_poll_us) < 0) {
                fprintf(stderr, "sdmz-proxy: --busy-poll: %s\n", CONFIG_BUSY_POLL_RANGE);
                return 2;
            }
            cfg.busy_poll_us = (unsigned)busy_poll_us;
            continue;
        case 'm':
            cfg.metrics_enabled = true;
            if (netaddr_parse(optarg, &cfg.metrics_listen, err, sizeof err) < 0) {
                fprintf(stderr, "sdmz-proxy: --metrics: %s\n", err);
                return 2;
            }
            continue;
        case 'v': cfg.log_level = LOG_DEBUG; continue;
        case 'C':
        case 'S':
            if (ntok >= 14) {
                fprintf(stderr, "sdmz-proxy: too many options\n");
                return 2;
            }
            tok[ntok] = strcpy(bufs[ntok], opt == 'C' ? "tls=connect" : "tls=listen");
            ntok++;
            continue;
        case 'P': key = "tls-peer"; break;
        case 'T':
        case 'K':
        case 'A': {
            char *dst = opt == 'T' ? cfg.tls_cert : opt == 'K' ? cfg.tls_key : cfg.tls_ca;
            if (strlen(optarg) >= CONFIG_PATH_MAX) {
                fprintf(stderr, "sdmz-proxy: --tls-*: path too long\n");
                return 2;
            }
            strcpy(dst, optarg);
            continue;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (ntok >= 14 || strlen(optarg) > 1000) {
            fprintf(stderr, "sdmz-proxy: --%s: too long or repeated\n", key);
            return 2;
        }
        snprintf(bufs[ntok], sizeof bufs[ntok], "%s=%s", key, optarg);
        tok[ntok] = bufs[ntok];
        ntok++;
    }
    if (optind != argc) {
        fprintf(stderr, "sdmz-proxy: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (has_key(ntok, tok, "tls=") && !(cfg.tls_cert[0] && cfg.tls_key[0] && cfg.tls_ca[0])) {
        fprintf(stderr, "sdmz-proxy: relay: --tls-client/--tls-server need --tls-cert, "
                        "--tls-key and --tls-ca\n");
        return 2;
    }
    /* One fixed destination: like socat, any source unless --allow narrows it. */
    snprintf(bufs[ntok], sizeof bufs[ntok], "allow=%s", allow[0] ? allow : "0.0.0.0/0,::/0");
    tok[ntok] = bufs[ntok];
    ntok++;
    if (!has_key(ntok, tok, "channels="))
        tok[ntok++] = strcpy(bufs[15], "channels=1");
    memset(&spec, 0, sizeof spec);
    spec.buffer_bytes = cfg.default_buffer;
    spec.record_bytes = 1;
    spec.max_conns = cfg.max_connections;
    if (request_spec_parse(&spec, ntok, tok, &spec, NULL, err, sizeof err) < 0) {
        fprintf(stderr, "sdmz-proxy: relay: %s\n", err);
        return 2;
    }
    log_setup("sdmz-proxy", cfg.log_level);
    return server_relay(&spec, &cfg);
}

static int run_check(int argc, char **argv)
{
    struct proxy_config cfg;
    SSL_CTX *ctx;
    char err[300];

    if (argc != 4 || strcmp(argv[2], "--config")) {
        usage(stderr);
        return 2;
    }
    if (config_load(argv[3], &cfg, err, sizeof err) < 0) {
        fprintf(stderr, "sdmz-proxy: %s\n", err);
        return 2;
    }
    /* The certificate files are part of the config: they must load too. */
    if (tls_context_from_config(&cfg, &ctx, err, sizeof err) < 0) {
        fprintf(stderr, "sdmz-proxy: %s: %s\n", argv[3], err);
        return 2;
    }
    SSL_CTX_free(ctx);
    printf("%s: ok\n", argv[3]);
    return 0;
}

int main(int argc, char **argv)
{
    log_setup("sdmz-proxy", LOG_INFO);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("sdmz-proxy %s\n", VERSION);
        return 0;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "relay"))
        return run_relay(argc, argv);
    if (!strcmp(argv[1], "check"))
        return run_check(argc, argv);
    if (!strcmp(argv[1], "serve")) {
        if (argc != 4 || strcmp(argv[2], "--config")) {
            usage(stderr);
            return 2;
        }
        return server_serve(argv[3]);
    }
    fprintf(stderr, "sdmz-proxy: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
