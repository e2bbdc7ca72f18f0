/* The server's counters, described once and rendered two ways: Prometheus
 * text exposition (version 0.0.4) and the `stats` verb's key=value lines. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

struct channel_counter {
    const char *key;              /* in `stats` */
    const char *metric, *type, *help;
    size_t offset;                /* an atomic_uint_fast64_t in struct channel_stats */
};

#define CH(field) offsetof(struct channel_stats, field)
static const struct channel_counter channel_counters[] = {
    {"conns", "sdmz_proxy_connections", "gauge", "Relayed connections open now.", CH(conns_active)},
    {"conns_total", "sdmz_proxy_connections_total", "counter", "Relayed connections accepted.", CH(conns_total)},
    {"bytes_forward", "sdmz_proxy_bytes_forward_total", "counter", "Bytes relayed producer to consumer.", CH(bytes_forward)},
    {"bytes_reverse", "sdmz_proxy_bytes_reverse_total", "counter", "Bytes relayed consumer to producer.", CH(bytes_reverse)},
    {"buffered", "sdmz_proxy_buffered_bytes", "gauge", "Bytes held in the forward relay buffers.", CH(buffered)},
    {"buffer_capacity", "sdmz_proxy_buffer_capacity_bytes", "gauge", "Effective forward buffer capacity.", CH(buffer_capacity)},
    {"full_events", "sdmz_proxy_buffer_full_total", "counter", "Times a full buffer held the producer back (block policy).", CH(full_events)},
    {"overflow_events", "sdmz_proxy_overflow_total", "counter", "Times records were dropped to make room (drop-oldest policy).", CH(overflow_events)},
    {"dropped_bytes", "sdmz_proxy_dropped_bytes_total", "counter", "Bytes dropped by the drop-oldest policy.", CH(dropped_bytes)},
    {"connect_failures", "sdmz_proxy_connect_failures_total", "counter", "Failed connections to the channel's target.", CH(connect_failures)},
    {"tls_failures", "sdmz_proxy_tls_failures_total", "counter", "TLS handshakes refused or failed (peer certificate, protocol).", CH(tls_failures)},
};
#define N_CHANNEL_COUNTERS (sizeof channel_counters / sizeof channel_counters[0])

/* Consecutive entries with the same metric form one family (HELP, TYPE once). */
struct server_counter {
    const char *key;              /* in `stats` */
    const char *metric, *help, *label; /* label: NULL for a family of one */
    size_t offset;                /* a uint64_t in struct server_counters */
};

#define SC(field) offsetof(struct server_counters, field)
#define REJECTED "sdmz_proxy_rejected_total", "Connections closed without relaying, by reason."
#define CONTROL "sdmz_proxy_control_total", "Control messages, by outcome."
static const struct server_counter server_counters[] = {
    {"rejected_source", REJECTED, "reason=\"source\"", SC(rejected_source)},
    {"rejected_limit", REJECTED, "reason=\"limit\"", SC(rejected_limit)},
    {"connect_errors", REJECTED, "reason=\"connect\"", SC(connect_errors)},
    {"accept_errors", REJECTED, "reason=\"accept\"", SC(accept_errors)},
    {"tls_errors", REJECTED, "reason=\"tls\"", SC(tls_errors)},
    {"control_ok", CONTROL, "outcome=\"ok\"", SC(control_ok)},
    {"control_errors", CONTROL, "outcome=\"refused\"", SC(control_errors)},
    {"control_bad_hmac", CONTROL, "outcome=\"bad_hmac\"", SC(control_rejected[CONTROL_BAD_MAC])},
    {"control_replay", CONTROL, "outcome=\"replay\"", SC(control_rejected[CONTROL_REPLAY])},
    {"control_stale", CONTROL, "outcome=\"stale\"", SC(control_rejected[CONTROL_STALE])},
    {"control_malformed", CONTROL, "outcome=\"malformed\"", SC(control_rejected[CONTROL_MALFORMED])},
    {"reloads", "sdmz_proxy_reloads_total", "Successful SIGHUP reloads.", NULL, SC(reloads)},
};
#define N_SERVER_COUNTERS (sizeof server_counters / sizeof server_counters[0])

static unsigned long long channel_value(const struct channel_stats *st, size_t offset)
{
    return (unsigned long long)atomic_load((const atomic_uint_fast64_t *)((const char *)st + offset));
}

static unsigned long long server_value(const struct server_counters *c, size_t offset)
{
    return (unsigned long long)*(const uint64_t *)((const char *)c + offset);
}

static void render_channels(const struct server *s, FILE *out)
{
    for (size_t m = 0; m < N_CHANNEL_COUNTERS; m++) {
        const struct channel_counter *cm = &channel_counters[m];
        fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", cm->metric, cm->help, cm->metric, cm->type);
        for (const struct request *r = s->requests; r; r = r->next)
            for (unsigned i = 0; i < r->spec.channels; i++)
                fprintf(out, "%s{request=\"%s\",channel=\"%u\"} %llu\n", cm->metric, r->spec.id,
                        i, channel_value(&r->stats[i], cm->offset));
    }
    fprintf(out, "# HELP sdmz_proxy_rate_bits_per_second Forward rate over the last second.\n"
                 "# TYPE sdmz_proxy_rate_bits_per_second gauge\n");
    for (const struct request *r = s->requests; r; r = r->next)
        for (unsigned i = 0; i < r->spec.channels; i++)
            fprintf(out, "sdmz_proxy_rate_bits_per_second{request=\"%s\",channel=\"%u\"} %.0f\n",
                    r->spec.id, i, r->stats[i].rate_bps);
}

static void render_server(const struct server *s, FILE *out)
{
    for (size_t k = 0; k < N_SERVER_COUNTERS; k++) {
        const struct server_counter *sc = &server_counters[k];
        if (k == 0 || strcmp(sc->metric, server_counters[k - 1].metric))
            fprintf(out, "# HELP %s %s\n# TYPE %s counter\n", sc->metric, sc->help, sc->metric);
        fprintf(out, "%s%s%s%s %llu\n", sc->metric, sc->label ? "{" : "", sc->label ? sc->label : "",
                sc->label ? "}" : "", server_value(&s->counters, sc->offset));
    }
}

char *metrics_render(const struct server *s, size_t *len)
{
    char *text = NULL;
    unsigned requests = 0;
    FILE *out = open_memstream(&text, len);

    if (!out)
        return NULL;
    for (const struct request *r = s->requests; r; r = r->next)
        requests++;
    render_channels(s, out);
    fprintf(out,
            "# HELP sdmz_proxy_requests Stream requests held.\n"
            "# TYPE sdmz_proxy_requests gauge\nsdmz_proxy_requests %u\n"
            "# HELP sdmz_proxy_open_connections Relayed connections open now, all requests.\n"
            "# TYPE sdmz_proxy_open_connections gauge\nsdmz_proxy_open_connections %u\n",
            requests, atomic_load(&s->total_conns));
    render_server(s, out);
    if (fclose(out) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

void stats_render(const struct server *s, const char *id, FILE *out)
{
    for (const struct request *r = s->requests; r; r = r->next) {
        if (id && strcmp(id, r->spec.id))
            continue;
        for (unsigned i = 0; i < r->spec.channels; i++) {
            struct sockaddr_storage l = r->spec.listen_base, c = r->spec.connect_base;
            char listen[64], connect[64];

            netaddr_set_port(&l, request_port(&r->spec.listen_base, i));
            netaddr_set_port(&c, request_port(&r->spec.connect_base, i));
            netaddr_format(&l, listen, sizeof listen);
            netaddr_format(&c, connect, sizeof connect);
            fprintf(out, "channel id=%s channel=%u listen=%s connect=%s rate_bps=%.0f", r->spec.id,
                    i, listen, connect, r->stats[i].rate_bps);
            for (size_t m = 0; m < N_CHANNEL_COUNTERS; m++)
                fprintf(out, " %s=%llu", channel_counters[m].key,
                        channel_value(&r->stats[i], channel_counters[m].offset));
            fputc('\n', out);
        }
    }
    fprintf(out, "server connections=%u", atomic_load(&s->total_conns));
    for (size_t k = 0; k < N_SERVER_COUNTERS; k++)
        fprintf(out, " %s=%llu", server_counters[k].key,
                server_value(&s->counters, server_counters[k].offset));
    fputc('\n', out);
}
