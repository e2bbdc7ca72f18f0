/* Prometheus text exposition (version 0.0.4) of the server's counters. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "server.h"

struct channel_metric {
    const char *name, *type, *help;
    size_t offset;
};

#define CH(field) offsetof(struct channel_stats, field)
static const struct channel_metric channel_metrics[] = {
    {"sdmz_proxy_bytes_forward_total", "counter", "Bytes relayed producer to consumer.", CH(bytes_forward)},
    {"sdmz_proxy_bytes_reverse_total", "counter", "Bytes relayed consumer to producer.", CH(bytes_reverse)},
    {"sdmz_proxy_connections", "gauge", "Relayed connections open now.", CH(conns_active)},
    {"sdmz_proxy_connections_total", "counter", "Relayed connections accepted.", CH(conns_total)},
    {"sdmz_proxy_buffered_bytes", "gauge", "Bytes held in the forward relay buffers.", CH(buffered)},
    {"sdmz_proxy_buffer_capacity_bytes", "gauge", "Effective forward buffer capacity.", CH(buffer_capacity)},
    {"sdmz_proxy_buffer_full_total", "counter", "Times a full buffer held the producer back (block policy).", CH(full_events)},
    {"sdmz_proxy_overflow_total", "counter", "Times records were dropped to make room (drop-oldest policy).", CH(overflow_events)},
    {"sdmz_proxy_dropped_bytes_total", "counter", "Bytes dropped by the drop-oldest policy.", CH(dropped_bytes)},
    {"sdmz_proxy_connect_failures_total", "counter", "Failed connections to the channel's target.", CH(connect_failures)},
    {"sdmz_proxy_tls_failures_total", "counter", "TLS handshakes refused or failed (peer certificate, protocol).", CH(tls_failures)},
};

static void render_channels(const struct server *s, FILE *out)
{
    for (size_t m = 0; m < sizeof channel_metrics / sizeof channel_metrics[0]; m++) {
        const struct channel_metric *cm = &channel_metrics[m];
        fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", cm->name, cm->help, cm->name, cm->type);
        for (const struct request *r = s->requests; r; r = r->next) {
            for (unsigned i = 0; i < r->spec.channels; i++) {
                const atomic_uint_fast64_t *value =
                    (const atomic_uint_fast64_t *)((const char *)&r->stats[i] + cm->offset);
                fprintf(out, "%s{request=\"%s\",channel=\"%u\"} %llu\n", cm->name, r->spec.id, i,
                        (unsigned long long)atomic_load(value));
            }
        }
    }
    fprintf(out, "# HELP sdmz_proxy_rate_bits_per_second Forward rate over the last second.\n"
                 "# TYPE sdmz_proxy_rate_bits_per_second gauge\n");
    for (const struct request *r = s->requests; r; r = r->next)
        for (unsigned i = 0; i < r->spec.channels; i++)
            fprintf(out, "sdmz_proxy_rate_bits_per_second{request=\"%s\",channel=\"%u\"} %.0f\n",
                    r->spec.id, i, r->stats[i].rate_bps);
}

char *metrics_render(const struct server *s, size_t *len)
{
    const struct server_counters *c = &s->counters;
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
            "# TYPE sdmz_proxy_open_connections gauge\nsdmz_proxy_open_connections %u\n"
            "# HELP sdmz_proxy_rejected_total Connections closed without relaying, by reason.\n"
            "# TYPE sdmz_proxy_rejected_total counter\n"
            "sdmz_proxy_rejected_total{reason=\"source\"} %llu\n"
            "sdmz_proxy_rejected_total{reason=\"limit\"} %llu\n"
            "sdmz_proxy_rejected_total{reason=\"connect\"} %llu\n"
            "sdmz_proxy_rejected_total{reason=\"accept\"} %llu\n"
            "sdmz_proxy_rejected_total{reason=\"tls\"} %llu\n"
            "# HELP sdmz_proxy_control_total Control messages, by outcome.\n"
            "# TYPE sdmz_proxy_control_total counter\n"
            "sdmz_proxy_control_total{outcome=\"ok\"} %llu\n"
            "sdmz_proxy_control_total{outcome=\"refused\"} %llu\n"
            "sdmz_proxy_control_total{outcome=\"bad_hmac\"} %llu\n"
            "sdmz_proxy_control_total{outcome=\"replay\"} %llu\n"
            "sdmz_proxy_control_total{outcome=\"stale\"} %llu\n"
            "sdmz_proxy_control_total{outcome=\"malformed\"} %llu\n"
            "# HELP sdmz_proxy_reloads_total Successful SIGHUP reloads.\n"
            "# TYPE sdmz_proxy_reloads_total counter\nsdmz_proxy_reloads_total %llu\n",
            requests, atomic_load(&s->total_conns), (unsigned long long)c->rejected_source,
            (unsigned long long)c->rejected_limit, (unsigned long long)c->connect_errors,
            (unsigned long long)c->accept_errors, (unsigned long long)c->tls_errors,
            (unsigned long long)c->control_ok,
            (unsigned long long)c->control_errors,
            (unsigned long long)c->control_rejected[CONTROL_BAD_MAC],
            (unsigned long long)c->control_rejected[CONTROL_REPLAY],
            (unsigned long long)c->control_rejected[CONTROL_STALE],
            (unsigned long long)c->control_rejected[CONTROL_MALFORMED],
            (unsigned long long)c->reloads);
    if (fclose(out) != 0) {
        free(text);
        return NULL;
    }
    return text;
}
