#include "request.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "units.h"

static int fail(char *err, size_t errlen, const char *key, const char *what)
{
    snprintf(err, errlen, "%s: %s", key, what);
    return -1;
}

/* 1..max characters, each a letter, a digit or one of `extra`. */
static int name_ok(const char *name, size_t max, const char *extra)
{
    size_t n = strlen(name);

    if (n == 0 || n > max)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              (c && strchr(extra, c))))
            return 0;
    }
    return 1;
}

static int valid_id(const char *id)
{
    return name_ok(id, REQUEST_ID_MAX, "-_.");
}

static int valid_dns_name(const char *name)
{
    return name[0] != '-' && name[0] != '.' && name_ok(name, REQUEST_TLS_PEER_MAX, "-.");
}

static int parse_allow(struct request_spec *spec, const char *value, char *err, size_t errlen)
{
    char copy[1024], *save = NULL, *item;
    char why[160];

    if (strlen(value) >= sizeof copy)
        return fail(err, errlen, "allow", "too long");
    strcpy(copy, value);
    spec->n_allow = 0;
    for (item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        if (spec->n_allow == REQUEST_MAX_ALLOW)
            return fail(err, errlen, "allow", "more than 16 prefixes");
        if (cidr_parse(item, &spec->allow[spec->n_allow], why, sizeof why) < 0)
            return fail(err, errlen, "allow", why);
        spec->n_allow++;
    }
    if (spec->n_allow == 0)
        return fail(err, errlen, "allow", "at least one source prefix is required");
    return 0;
}

struct key_def {
    const char *name;
    unsigned update_bit; /* 0: create only */
};

static const struct key_def keys[] = {
    {"id", 0}, {"side", 0}, {"channels", 0}, {"listen", 0}, {"connect", 0},
    {"rate", SPEC_RATE}, {"buffer", SPEC_BUFFER}, {"policy", SPEC_POLICY},
    {"record", SPEC_RECORD}, {"allow", SPEC_ALLOW}, {"max-conns", SPEC_MAX_CONNS},
    {"tls", 0}, {"tls-peer", 0},
};
#define NKEYS (sizeof keys / sizeof keys[0])

static int parse_value(struct request_spec *spec, const char *key, const char *value,
                       char *err, size_t errlen)
{
    uint64_t n;
    char why[160];

    if (!strcmp(key, "id")) {
        if (!valid_id(value))
            return fail(err, errlen, key, "1-64 characters of A-Z a-z 0-9 . _ -");
        strcpy(spec->id, value);
    } else if (!strcmp(key, "side")) {
        if (!strcmp(value, "producer"))
            spec->side = SIDE_PRODUCER;
        else if (!strcmp(value, "consumer"))
            spec->side = SIDE_CONSUMER;
        else
            return fail(err, errlen, key, "must be producer or consumer");
    } else if (!strcmp(key, "channels")) {
        if (parse_uint(value, REQUEST_MAX_CHANNELS, &n) < 0 || n == 0)
            return fail(err, errlen, key, "must be 1-64");
        spec->channels = (unsigned)n;
    } else if (!strcmp(key, "listen") || !strcmp(key, "connect")) {
        struct sockaddr_storage *addr =
            key[0] == 'l' ? &spec->listen_base : &spec->connect_base;
        if (netaddr_parse(value, addr, why, sizeof why) < 0)
            return fail(err, errlen, key, why);
        if (netaddr_port(addr) == 0)
            return fail(err, errlen, key, "port 0 is not a port");
    } else if (!strcmp(key, "rate")) {
        if (parse_bits(value, &spec->rate_bps) < 0)
            return fail(err, errlen, key, "bits per second, e.g. 800M or 10G (0 = unlimited)");
    } else if (!strcmp(key, "buffer")) {
        if (parse_bytes(value, &n) < 0 || n < REQUEST_MIN_BUFFER || n > REQUEST_MAX_BUFFER)
            return fail(err, errlen, key, "bytes from 4K to 1G, e.g. 4M");
        spec->buffer_bytes = n;
    } else if (!strcmp(key, "policy")) {
        if (!strcmp(value, "block"))
            spec->policy = POLICY_BLOCK;
        else if (!strcmp(value, "drop-oldest"))
            spec->policy = POLICY_DROP_OLDEST;
        else
            return fail(err, errlen, key, "must be block or drop-oldest");
    } else if (!strcmp(key, "record")) {
        if (parse_bytes(value, &n) < 0 || n == 0 || n > REQUEST_MAX_BUFFER)
            return fail(err, errlen, key, "bytes from 1 to 1G");
        spec->record_bytes = n;
    } else if (!strcmp(key, "allow")) {
        return parse_allow(spec, value, err, errlen);
    } else if (!strcmp(key, "tls")) {
        if (!strcmp(value, "none"))
            spec->tls = TLS_LEG_NONE;
        else if (!strcmp(value, "connect"))
            spec->tls = TLS_LEG_CONNECT;
        else if (!strcmp(value, "listen"))
            spec->tls = TLS_LEG_LISTEN;
        else
            return fail(err, errlen, key, "must be none, connect or listen");
    } else if (!strcmp(key, "tls-peer")) {
        if (!valid_dns_name(value))
            return fail(err, errlen, key, "the peer gateway's certificate name (a DNS name)");
        strcpy(spec->tls_peer, value);
    } else if (!strcmp(key, "max-conns")) {
        if (parse_uint(value, 65536, &n) < 0 || n == 0)
            return fail(err, errlen, key, "must be 1-65536");
        spec->max_conns = (unsigned)n;
    }
    return 0;
}

static int check_ports(const struct request_spec *spec, char *err, size_t errlen)
{
    if ((unsigned)netaddr_port(&spec->listen_base) + spec->channels - 1 > 65535)
        return fail(err, errlen, "listen", "port + channels - 1 exceeds 65535");
    if ((unsigned)netaddr_port(&spec->connect_base) + spec->channels - 1 > 65535)
        return fail(err, errlen, "connect", "port + channels - 1 exceeds 65535");
    if (spec->record_bytes > spec->buffer_bytes)
        return fail(err, errlen, "record", "larger than the buffer");
    if (spec->tls != TLS_LEG_NONE && !spec->tls_peer[0])
        return fail(err, errlen, "tls-peer", "required with tls: the peer gateway's "
                                             "certificate name");
    if (spec->tls == TLS_LEG_NONE && spec->tls_peer[0])
        return fail(err, errlen, "tls-peer", "given without tls=connect or tls=listen");
    return 0;
}

int request_spec_parse(struct request_spec *spec, int ntok, char **tok,
                       const struct request_spec *defaults, unsigned *mask,
                       char *err, size_t errlen)
{
    unsigned seen = 0;

    if (defaults)
        *spec = *defaults;
    if (mask)
        *mask = 0;
    for (int i = 0; i < ntok; i++) {
        char *eq = strchr(tok[i], '=');
        size_t k;
        char key[32];

        if (!eq || eq == tok[i] || (size_t)(eq - tok[i]) >= sizeof key)
            return fail(err, errlen, tok[i], "expected key=value");
        memcpy(key, tok[i], (size_t)(eq - tok[i]));
        key[eq - tok[i]] = '\0';
        for (k = 0; k < NKEYS; k++)
            if (!strcmp(keys[k].name, key))
                break;
        if (k == NKEYS)
            return fail(err, errlen, key, "unknown key");
        if (seen & (1u << k))
            return fail(err, errlen, key, "given twice");
        seen |= 1u << k;
        if (mask) {
            if (!keys[k].update_bit)
                return fail(err, errlen, key, "cannot be changed on a live request "
                                              "(release and create it)");
            *mask |= keys[k].update_bit;
        }
        if (parse_value(spec, key, eq + 1, err, errlen) < 0)
            return -1;
    }
    if (defaults) {
        static const char *const required[] = {"id", "side", "channels", "listen", "connect",
                                               "allow"};
        for (size_t r = 0; r < sizeof required / sizeof required[0]; r++)
            for (size_t k = 0; k < NKEYS; k++)
                if (!strcmp(keys[k].name, required[r]) && !(seen & (1u << k)))
                    return fail(err, errlen, required[r], "required");
    }
    return check_ports(spec, err, errlen);
}

int request_spec_format(const struct request_spec *spec, char *buf, size_t len)
{
    char listen[64], connect[64], prefix[64];
    size_t used;
    int n;

    netaddr_format(&spec->listen_base, listen, sizeof listen);
    netaddr_format(&spec->connect_base, connect, sizeof connect);
    n = snprintf(buf, len,
                 "id=%s side=%s channels=%u listen=%s connect=%s rate=%llu buffer=%llu "
                 "policy=%s record=%llu max-conns=%u ",
                 spec->id, spec->side == SIDE_PRODUCER ? "producer" : "consumer",
                 spec->channels, listen, connect, (unsigned long long)spec->rate_bps,
                 (unsigned long long)spec->buffer_bytes,
                 spec->policy == POLICY_BLOCK ? "block" : "drop-oldest",
                 (unsigned long long)spec->record_bytes, spec->max_conns);
    if (n < 0 || (size_t)n >= len)
        return -1;
    used = (size_t)n;
    if (spec->tls != TLS_LEG_NONE) {
        n = snprintf(buf + used, len - used, "tls=%s tls-peer=%s ",
                     spec->tls == TLS_LEG_CONNECT ? "connect" : "listen", spec->tls_peer);
        if (n < 0 || (size_t)n >= len - used)
            return -1;
        used += (size_t)n;
    }
    n = snprintf(buf + used, len - used, "allow=");
    if (n < 0 || (size_t)n >= len - used)
        return -1;
    used += (size_t)n;
    for (unsigned i = 0; i < spec->n_allow; i++) {
        cidr_format(&spec->allow[i], prefix, sizeof prefix);
        n = snprintf(buf + used, len - used, "%s%s", i ? "," : "", prefix);
        if (n < 0 || (size_t)n >= len - used)
            return -1;
        used += (size_t)n;
    }
    return (int)used;
}

uint16_t request_port(const struct sockaddr_storage *base, unsigned channel)
{
    return (uint16_t)(netaddr_port(base) + channel);
}

int request_source_allowed(const struct request_spec *spec, const struct sockaddr_storage *peer)
{
    for (unsigned i = 0; i < spec->n_allow; i++)
        if (cidr_match(&spec->allow[i], peer))
            return 1;
    return 0;
}

struct request *request_new(const struct request_spec *spec)
{
    struct request *req = calloc(1, sizeof *req);

    if (!req)
        return NULL;
    req->spec = *spec;
    atomic_init(&req->refs, 1);
    for (unsigned i = 0; i < REQUEST_MAX_CHANNELS; i++)
        req->listen_fds[i] = -1;
    return req;
}

void request_ref(struct request *req)
{
    atomic_fetch_add_explicit(&req->refs, 1, memory_order_relaxed);
}

void request_unref(struct request *req)
{
    if (atomic_fetch_sub_explicit(&req->refs, 1, memory_order_acq_rel) == 1)
        free(req);
}
