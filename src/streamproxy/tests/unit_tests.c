/* C unit tests: ring buffer, request specs and table rules, control-message
 * HMAC and replay checks, config parser, address matching. Exit 1 on any
 * failure, printing each failed check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "control.h"
#include "netaddr.h"
#include "request.h"
#include "ring.h"
#include "units.h"

static int failures, checks;

#define CHECK(cond)                                                              \
    do {                                                                         \
        checks++;                                                                \
        if (!(cond)) {                                                           \
            failures++;                                                          \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                        \
    } while (0)

static void ring_put(struct ring *r, const char *text)
{
    size_t len = strlen(text);

    while (len > 0) {
        uint8_t *span;
        size_t room = ring_free_span(r, &span);
        size_t n = room < len ? room : len;
        if (n == 0)
            return;
        memcpy(span, text, n);
        ring_commit(r, n);
        text += n;
        len -= n;
    }
}

static void ring_take(struct ring *r, char *out, size_t max)
{
    size_t used = 0;
    const uint8_t *span;
    size_t n;

    while ((n = ring_data_span(r, &span)) > 0 && used < max) {
        if (n > max - used)
            n = max - used;
        memcpy(out + used, span, n);
        ring_consume(r, n);
        used += n;
    }
    out[used] = '\0';
}

static void test_ring(void)
{
    struct ring r;
    char out[64];
    uint8_t *span;

    CHECK(ring_init(&r, 8) == 0);
    ring_put(&r, "abcdef");
    ring_take(&r, out, 4);
    CHECK(!strcmp(out, "abcd"));
    ring_put(&r, "ghijkl");             /* wraps around */
    CHECK(r.len == 8);
    CHECK(ring_free_span(&r, &span) == 0);
    ring_take(&r, out, sizeof out - 1);
    CHECK(!strcmp(out, "efghijkl"));
    CHECK(r.len == 0 && r.sent == 12);

    /* Resizing keeps content and order, across the wrap. */
    ring_put(&r, "mnopqr");
    CHECK(ring_resize(&r, 4) == -1);    /* 6 bytes do not fit in 4 */
    CHECK(ring_resize(&r, 32) == 0 && r.cap == 32);
    ring_put(&r, "stuvwxyz");
    ring_take(&r, out, sizeof out - 1);
    CHECK(!strcmp(out, "mnopqrstuvwxyz"));
    ring_free(&r);

    /* Drop-oldest keeps a partly sent record whole and drops whole records. */
    CHECK(ring_init(&r, 16) == 0);
    ring_put(&r, "AAAABBBBCCCCDDDD");
    ring_take(&r, out, 2);              /* "AA" of record A has left */
    CHECK(ring_drop_oldest(&r, 4, 4, 0) == 4);
    ring_take(&r, out, sizeof out - 1);
    CHECK(!strcmp(out, "AACCCCDDDD"));  /* B dropped, A completed */
    CHECK(r.sent % 4 == 0);
    ring_put(&r, "EEEEFFFF");
    CHECK(ring_drop_oldest(&r, 5, 4, 0) == 8);  /* rounds up to whole records */
    CHECK(r.len == 0);
    ring_put(&r, "GG");
    CHECK(ring_drop_oldest(&r, 4, 4, 0) == 0);  /* no whole record waiting */
    ring_free(&r);

    /* Bytes a TLS layer has taken (keep) stay, with the rest of their record. */
    CHECK(ring_init(&r, 16) == 0);
    ring_put(&r, "AAAABBBBCCCCDDDD");
    CHECK(ring_drop_oldest(&r, 8, 4, 6) == 8);   /* A and B's start kept: C, D go */
    ring_take(&r, out, sizeof out - 1);
    CHECK(!strcmp(out, "AAAABBBB"));
    ring_put(&r, "EEEE");
    CHECK(ring_drop_oldest(&r, 4, 4, 4) == 0);   /* the only record is leaving */
    CHECK(r.len == 4);
    ring_free(&r);
}

static int parse_spec(struct request_spec *spec, const char *line, char *err, size_t errlen)
{
    static char copy[2048];
    char *tok[32], *save = NULL;
    int n = 0;

    strcpy(copy, line);
    for (char *t = strtok_r(copy, " ", &save); t; t = strtok_r(NULL, " ", &save))
        tok[n++] = t;
    memset(spec, 0, sizeof *spec);
    spec->buffer_bytes = 1 << 20;
    spec->record_bytes = 1;
    spec->max_conns = 64;
    return request_spec_parse(spec, n, tok, spec, NULL, err, errlen);
}

static void test_request(void)
{
    struct request_spec spec, again;
    char err[200], text[2048];
    struct sockaddr_storage peer;
    const char *good = "id=beamline-7 side=producer channels=4 listen=0.0.0.0:5100 "
                       "connect=198.18.2.12:5100 rate=8G buffer=4M allow=198.18.1.0/24,fd53:444d:1::/64";

    CHECK(parse_spec(&spec, good, err, sizeof err) == 0);
    CHECK(spec.channels == 4 && spec.rate_bps == 8000000000ULL && spec.buffer_bytes == 4 << 20);
    CHECK(request_port(&spec.listen_base, 3) == 5103);
    CHECK(netaddr_parse("198.18.1.11:40000", &peer, err, sizeof err) == 0);
    CHECK(request_source_allowed(&spec, &peer));
    CHECK(netaddr_parse("198.18.3.66:40000", &peer, err, sizeof err) == 0);
    CHECK(!request_source_allowed(&spec, &peer));
    CHECK(netaddr_parse("[::ffff:198.18.1.11]:4", &peer, err, sizeof err) == 0);
    CHECK(request_source_allowed(&spec, &peer)); /* IPv4 seen by a dual-stack socket */

    /* format -> parse is the identity (the state file relies on it). */
    CHECK(request_spec_format(&spec, text, sizeof text) > 0);
    CHECK(parse_spec(&again, text, err, sizeof err) == 0);
    CHECK(!memcmp(&spec, &again, sizeof spec));

    /* One message naming the key. */
    CHECK(parse_spec(&spec, "id=a side=producer channels=1 listen=0.0.0.0:5100 "
                            "connect=198.18.2.12:5100", err, sizeof err) < 0);
    CHECK(!strcmp(err, "allow: required"));
    CHECK(parse_spec(&spec, "id=a/b side=producer channels=1 listen=0.0.0.0:5100 "
                            "connect=1.2.3.4:5 allow=10.0.0.0/8", err, sizeof err) < 0);
    CHECK(!strncmp(err, "id:", 3));
    CHECK(parse_spec(&spec, "id=a side=producer channels=65 listen=0.0.0.0:5100 "
                            "connect=1.2.3.4:5 allow=10.0.0.0/8", err, sizeof err) < 0);
    CHECK(!strncmp(err, "channels:", 9));
    CHECK(parse_spec(&spec, "id=a side=producer channels=2 listen=0.0.0.0:65535 "
                            "connect=1.2.3.4:5 allow=10.0.0.0/8", err, sizeof err) < 0);
    CHECK(!strncmp(err, "listen:", 7));
    CHECK(parse_spec(&spec, "id=a side=producer channels=1 listen=0.0.0.0:5100 "
                            "connect=gw2.example.org:5100 allow=10.0.0.0/8", err, sizeof err) < 0);
    CHECK(strstr(err, "connect:") == err && strstr(err, "names are not resolved"));
    CHECK(parse_spec(&spec, "id=a side=producer channels=1 listen=0.0.0.0:5100 "
                            "connect=1.2.3.4:5 allow=10.0.0.1/8", err, sizeof err) < 0);
    CHECK(strstr(err, "host bits"));
    CHECK(parse_spec(&spec, "id=a id=b side=producer channels=1 listen=0.0.0.0:5100 "
                            "connect=1.2.3.4:5 allow=10.0.0.0/8", err, sizeof err) < 0);
    CHECK(!strcmp(err, "id: given twice"));
    CHECK(parse_spec(&spec, "id=a side=producer channels=1 listen=0.0.0.0:5100 "
                            "connect=1.2.3.4:5 allow=10.0.0.0/8 buffer=1K", err, sizeof err) < 0);
    CHECK(!strncmp(err, "buffer:", 7));

    /* The TLS leg: a peer name goes with it, and survives format -> parse. */
    CHECK(parse_spec(&spec, "id=a side=producer channels=1 listen=0.0.0.0:5100 "
                            "connect=1.2.3.4:5 allow=10.0.0.0/8 tls=connect", err, sizeof err) < 0);
    CHECK(!strncmp(err, "tls-peer: required", 18));
    CHECK(parse_spec(&spec, "id=a side=producer channels=1 listen=0.0.0.0:5100 "
                            "connect=1.2.3.4:5 allow=10.0.0.0/8 tls-peer=gw2", err, sizeof err) < 0);
    CHECK(!strncmp(err, "tls-peer: given without", 23));
    CHECK(parse_spec(&spec, "id=a side=producer channels=1 listen=0.0.0.0:5100 "
                            "connect=1.2.3.4:5 allow=10.0.0.0/8 tls=on tls-peer=gw2", err, sizeof err) < 0);
    CHECK(!strncmp(err, "tls:", 4));
    CHECK(parse_spec(&spec, "id=a side=producer channels=1 listen=0.0.0.0:5100 connect=1.2.3.4:5 "
                            "allow=10.0.0.0/8 tls=connect tls-peer=gw2/../x", err, sizeof err) < 0);
    CHECK(!strncmp(err, "tls-peer:", 9));
    CHECK(parse_spec(&spec, "id=a side=consumer channels=1 listen=0.0.0.0:5100 connect=1.2.3.4:5 "
                            "allow=10.0.0.0/8 tls=listen tls-peer=gw1.lab", err, sizeof err) == 0);
    CHECK(spec.tls == TLS_LEG_LISTEN && !strcmp(spec.tls_peer, "gw1.lab"));
    CHECK(request_spec_format(&spec, text, sizeof text) > 0);
    CHECK(strstr(text, "tls=listen tls-peer=gw1.lab"));
    CHECK(parse_spec(&again, text, err, sizeof err) == 0);
    CHECK(!memcmp(&spec, &again, sizeof spec));

    /* Updates accept only what a live request can change. */
    {
        char *upd[] = {"rate=1G", "buffer=8M"}, *bad[] = {"channels=2"};
        unsigned mask;
        CHECK(parse_spec(&spec, good, err, sizeof err) == 0);
        CHECK(request_spec_parse(&spec, 2, upd, NULL, &mask, err, sizeof err) == 0);
        CHECK(mask == (SPEC_RATE | SPEC_BUFFER) && spec.rate_bps == 1000000000ULL);
        CHECK(request_spec_parse(&spec, 1, bad, NULL, &mask, err, sizeof err) < 0);
        CHECK(strstr(err, "channels: cannot be changed"));
    }
}

static void test_control(void)
{
    struct control_key key = {.len = 32}, other = {.len = 32};
    struct replay_cache *cache = calloc(1, sizeof *cache);
    struct control_msg msg;
    char line[CONTROL_MAX_LINE + 1], err[200];
    char *args[] = {"id=x", "rate=1G"};
    const char *nonce = "00112233445566778899aabbccddeeff";
    time_t now = 1800000000;
    int n;

    memset(key.bytes, 'k', key.len);
    memset(other.bytes, 'o', other.len);
    n = control_sign(&key, now, nonce, "update", 2, args, line, sizeof line);
    CHECK(n > 0 && line[n - 1] == '\n');
    CHECK(control_parse(line, (size_t)n - 1, &key, &msg, err, sizeof err) == CONTROL_OK);
    CHECK(!strcmp(msg.verb, "update") && msg.nargs == 2 && !strcmp(msg.args[1], "rate=1G"));
    CHECK(control_admit(cache, &msg, now) == CONTROL_OK);
    CHECK(control_admit(cache, &msg, now + 1) == CONTROL_REPLAY);
    CHECK(control_admit(cache, &msg, now + CONTROL_WINDOW + 1) == CONTROL_STALE);

    /* Wrong key, and a tampered argument, fail the HMAC. */
    n = control_sign(&key, now, nonce, "update", 2, args, line, sizeof line);
    CHECK(control_parse(line, (size_t)n - 1, &other, &msg, err, sizeof err) == CONTROL_BAD_MAC);
    n = control_sign(&key, now, nonce, "update", 2, args, line, sizeof line);
    line[strlen("SDMZ1 1800000000 ") + 32 + strlen(" update id=")] = 'y';
    CHECK(control_parse(line, (size_t)n - 1, &key, &msg, err, sizeof err) == CONTROL_BAD_MAC);

    /* Framing errors. */
    strcpy(line, "SDMZ1 1 2 list");
    CHECK(control_parse(line, strlen(line), &key, &msg, err, sizeof err) == CONTROL_MALFORMED);
    n = control_sign(&key, now, "XYZ", "list", 0, NULL, line, sizeof line);
    CHECK(control_parse(line, (size_t)n - 1, &key, &msg, err, sizeof err) == CONTROL_MALFORMED);
    CHECK(strstr(err, "nonce"));

    /* A message from the past window expires from the cache and the cache
     * has room again; a fresh one with a new nonce passes. */
    n = control_sign(&key, now + 100, "ffeeddccbbaa99887766554433221100", "list", 0, NULL, line,
                     sizeof line);
    CHECK(control_parse(line, (size_t)n - 1, &key, &msg, err, sizeof err) == CONTROL_OK);
    CHECK(control_admit(cache, &msg, now + 100) == CONTROL_OK);
    free(cache);
}

static void test_config(void)
{
    struct proxy_config cfg;
    char err[300];

    CHECK(config_parse("# comment\ncontrol_socket = /tmp/x.sock\nport_range = 6000-6009\n"
                       "max_connections=10\nworkers = 2 # two\nmetrics_listen = off\n"
                       "state_file =\n", &cfg, err, sizeof err) == 0);
    CHECK(cfg.port_min == 6000 && cfg.port_max == 6009 && cfg.max_connections == 10);
    CHECK(cfg.workers == 2 && !cfg.metrics_enabled && cfg.state_file[0] == '\0');
    CHECK(config_parse("port_range = 10-5\n", &cfg, err, sizeof err) < 0);
    CHECK(!strcmp(err, "line 1: port_range: LOW-HIGH, 1-65535"));
    CHECK(config_parse("\n\nbogus = 1\n", &cfg, err, sizeof err) < 0);
    CHECK(!strcmp(err, "line 3: bogus: unknown key"));
    CHECK(config_parse("key_file = relative/path\n", &cfg, err, sizeof err) < 0);
    CHECK(config_parse("default_buffer = 2K\n", &cfg, err, sizeof err) < 0);
    CHECK(cfg.busy_poll_us == 0); /* the default: workers sleep when idle */
    CHECK(config_parse("busy_poll_us = 10000\n", &cfg, err, sizeof err) == 0 &&
          cfg.busy_poll_us == 10000);
    CHECK(config_parse("busy_poll_us = 10001\n", &cfg, err, sizeof err) < 0);
    CHECK(!strcmp(err, "line 1: busy_poll_us: microseconds, 0-10000 (0: workers sleep when idle)"));
    CHECK(config_parse("busy_poll_us = 50us\n", &cfg, err, sizeof err) < 0);
    CHECK(config_parse("just words\n", &cfg, err, sizeof err) < 0);
    CHECK(!strcmp(err, "line 1: expected key = value"));
}

static void test_units(void)
{
    uint64_t v;

    CHECK(parse_bytes("4M", &v) == 0 && v == 4u << 20);
    CHECK(parse_bits("10G", &v) == 0 && v == 10000000000ULL);
    CHECK(parse_bits("10Gb", &v) < 0);
    CHECK(parse_bytes("99999999999999999999", &v) < 0);
    CHECK(parse_uint("7k", 100, &v) < 0);
}

int main(void)
{
    test_ring();
    test_request();
    test_control();
    test_config();
    test_units();
    printf("unit-tests: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
