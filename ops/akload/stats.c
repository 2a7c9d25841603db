/*  ops/akload/stats.c: akload's statistics (akload.h): latencies by
    nearest-rank percentiles, counters, rates; printed and as JSON. */
#include "akload.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static int s_cmp_u32 (const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of n sorted latencies, in ms. */
static double s_pct (const uint32_t *lat_us, size_t n, double q)
{
    if (!n)
        return 0;
    size_t k = (size_t) (q * (double) n + 0.999999);
    if (k < 1)
        k = 1;
    if (k > n)
        k = n;
    return lat_us[k - 1] / 1000.0;
}

/* Sorts the latencies and summarizes them as JSON. */
static json_t *s_lat_json (uint32_t *lat_us, size_t n)
{
    double sum = 0;
    if (n)
        qsort (lat_us, n, sizeof *lat_us, s_cmp_u32);
    for (size_t i = 0; i < n; i++)
        sum += lat_us[i];
    json_t *lat = json_pack ("{s:I, s:f, s:f, s:f, s:f, s:f}", "n", (json_int_t) n,
                             "p50_ms", s_pct (lat_us, n, 0.50), "p99_ms", s_pct (lat_us, n, 0.99),
                             "p999_ms", s_pct (lat_us, n, 0.999), "max_ms", s_pct (lat_us, n, 1.0),
                             "mean_ms", n ? sum / (double) n / 1000.0 : 0.0);
    if (!lat)
        abort ();
    return lat;
}

/* The statistics as a JSON object (the caller's). */
json_t *akl_stats_json (akl_load_t *self)
{
    uint64_t wend = self->end_ns < self->window_end_ns ? self->end_ns : self->window_end_ns;
    double window_s = wend > self->window_ns ? (double) (wend - self->window_ns) / 1e9 : 0;
    double total_s = (double) (self->end_ns - self->start_ns) / 1e9;
    size_t unacked = 0, held = 0;
    uint32_t connected = 0;
    for (uint32_t i = 0; i < self->opts.workers; i++) {
        unacked += self->sims[i].npending;
        held += self->sims[i].ntasks;
        connected += self->sims[i].sock != NULL;
    }
    const akl_counters_t *c = &self->c;
    json_t *o = json_pack ("{s:s, s:s, s:I, s:s, s:I, s:I, s:I, s:f, s:f}",
                           "tool", "akload (load test: no kernel ran)", "coordinator", self->opts.endpoint,
                           "workers", (json_int_t) self->opts.workers, "device_class", self->opts.device_class,
                           "slots", (json_int_t) self->opts.slots, "prefetch", (json_int_t) self->opts.prefetch,
                           "task_ms", (json_int_t) self->opts.task_ms, "elapsed_s", total_s,
                           "window_s", window_s);
    json_t *counts = json_pack ("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
                                "assigns", (json_int_t) c->assigns, "started", (json_int_t) c->started,
                                "receipts_sent", (json_int_t) c->receipts, "receipts_resent", (json_int_t) c->resent,
                                "acks_received", (json_int_t) c->acks,
                                "duplicates_acked", (json_int_t) c->acks_duplicate,
                                "acks_unknown", (json_int_t) c->acks_unknown,
                                "acks_refused", (json_int_t) c->acks_refused, "hellos", (json_int_t) c->hellos,
                                "reconnects", (json_int_t) c->reconnects,
                                "disconnects_received", (json_int_t) c->disconnects,
                                "coordinator_silences", (json_int_t) c->silences,
                                "send_failures", (json_int_t) c->send_failures,
                                "rejected", (json_int_t) c->rejected,
                                "unacked_at_exit", (json_int_t) unacked, "held_at_exit", (json_int_t) held,
                                "receipts_abandoned", (json_int_t) c->abandoned,
                                "stale_assigns", (json_int_t) c->stale_assigns,
                                "blob_misses", (json_int_t) c->blob_misses,
                                "assign_bytes", (json_int_t) c->assign_bytes);
    if (!o || !counts)
        abort ();
    /* the link (common/linkwatch.h): handshakes done and failed, refusals */
    json_object_set_new (counts, "handshakes", json_integer ((json_int_t) c->handshakes));
    json_object_set_new (counts, "handshake_failures", json_integer ((json_int_t) c->handshake_failures));
    json_object_set_new (counts, "refusals", json_integer ((json_int_t) c->refusals));
    json_object_set_new (o, "counts", counts);
    /* where the window lay: its start in seconds from akload's (null: it
       never opened), what the warm-up counted from, the unsampled tail */
    json_object_set_new (o, "warmup_from", json_string (self->opts.warmup_from_registered ? "registered" : "start"));
    json_object_set_new (o, "window_start_s", self->window_ns != UINT64_MAX
                         ? json_real ((double) (self->window_ns - self->start_ns) / 1e9) : json_null ());
    json_object_set_new (o, "cooldown_s", json_integer (self->opts.cooldown_s));
    /* a cold start: when every simulated worker had been heard once (null: not all were) */
    json_object_set_new (o, "registered", json_integer ((json_int_t) self->nregistered));
    json_object_set_new (o, "all_registered_s", self->all_registered_ns
                         ? json_real ((double) (self->all_registered_ns - self->start_ns) / 1e9) : json_null ());
    /* ASSIGN received -> ACK received: what a task waits for beyond its run */
    json_object_set_new (o, "dispatch_to_ack_latency", s_lat_json (self->lat_us, self->nlat));
    /* RECEIPT sent -> ACK received: the coordinator's intake and group commit */
    json_object_set_new (o, "receipt_to_ack_latency", s_lat_json (self->commit_us, self->nlat));
    /* credit freed (HELLO or RECEIPT sent) -> the ASSIGN that uses it: how
       long a worker asking for work waits for it, the dispatch latency
       that queueing in front of saturated workers does not stretch */
    json_object_set_new (o, "credit_to_assign_latency", s_lat_json (self->credit_us, self->ncredit));
    json_object_set_new (o, "round_trips", json_integer ((json_int_t) c->window_acks));
    json_object_set_new (o, "round_trips_per_s",
                         json_real (window_s > 0 ? (double) c->window_acks / window_s : 0.0));
    /* the rate while acks were coming, for runs whose queue ran dry */
    double busy_s = (double) (self->last_ack_ns - self->first_ack_ns) / 1e9;
    json_object_set_new (o, "busy_round_trips_per_s",
                         json_real (busy_s > 0 ? (double) (c->window_acks - 1) / busy_s : 0.0));
    json_object_set_new (o, "connected_at_exit", json_integer (connected));
    return o;
}

void akl_print_stats (akl_load_t *self, json_t *o)
{
    json_t *counts = json_object_get (o, "counts");
    json_t *lat = json_object_get (o, "dispatch_to_ack_latency");
    printf ("akload (load test, no kernel ran): %u workers on %s for %.1f s (window %.1f s after %u s warm-up)\n",
            self->opts.workers, self->opts.endpoint, json_real_value (json_object_get (o, "elapsed_s")),
            json_real_value (json_object_get (o, "window_s")), self->opts.warmup_s);
    printf ("  receipts sent %" JSON_INTEGER_FORMAT " (re-sent %" JSON_INTEGER_FORMAT "), acks received %"
            JSON_INTEGER_FORMAT ", duplicates acked %" JSON_INTEGER_FORMAT ", unacked at exit %" JSON_INTEGER_FORMAT "\n",
            json_integer_value (json_object_get (counts, "receipts_sent")),
            json_integer_value (json_object_get (counts, "receipts_resent")),
            json_integer_value (json_object_get (counts, "acks_received")),
            json_integer_value (json_object_get (counts, "duplicates_acked")),
            json_integer_value (json_object_get (counts, "unacked_at_exit")));
    json_t *commit = json_object_get (o, "receipt_to_ack_latency");
    printf ("  round trips %" JSON_INTEGER_FORMAT " = %.0f/s; dispatch->ack latency p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
            json_integer_value (json_object_get (o, "round_trips")),
            json_real_value (json_object_get (o, "round_trips_per_s")),
            json_real_value (json_object_get (lat, "p50_ms")), json_real_value (json_object_get (lat, "p99_ms")),
            json_real_value (json_object_get (lat, "max_ms")));
    printf ("  receipt->ack (intake + group commit) p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
            json_real_value (json_object_get (commit, "p50_ms")), json_real_value (json_object_get (commit, "p99_ms")),
            json_real_value (json_object_get (commit, "max_ms")));
    json_t *credit = json_object_get (o, "credit_to_assign_latency");
    printf ("  credit->assign (worker asks for work -> ASSIGN received) p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
            json_real_value (json_object_get (credit, "p50_ms")), json_real_value (json_object_get (credit, "p99_ms")),
            json_real_value (json_object_get (credit, "max_ms")));
    printf ("  hellos %" JSON_INTEGER_FORMAT ", reconnects %" JSON_INTEGER_FORMAT ", disconnects received %"
            JSON_INTEGER_FORMAT ", send failures %" JSON_INTEGER_FORMAT "\n",
            json_integer_value (json_object_get (counts, "hellos")),
            json_integer_value (json_object_get (counts, "reconnects")),
            json_integer_value (json_object_get (counts, "disconnects_received")),
            json_integer_value (json_object_get (counts, "send_failures")));
    json_t *all = json_object_get (o, "all_registered_s");
    printf ("  handshakes %" JSON_INTEGER_FORMAT " (failed %" JSON_INTEGER_FORMAT "), coordinator silences %"
            JSON_INTEGER_FORMAT ", refusals %" JSON_INTEGER_FORMAT "; registered %" JSON_INTEGER_FORMAT " of %u",
            json_integer_value (json_object_get (counts, "handshakes")),
            json_integer_value (json_object_get (counts, "handshake_failures")),
            json_integer_value (json_object_get (counts, "coordinator_silences")),
            json_integer_value (json_object_get (counts, "refusals")),
            json_integer_value (json_object_get (o, "registered")), self->opts.workers);
    if (json_is_real (all))
        printf (", all within %.2f s of the start\n", json_real_value (all));
    else
        printf ("\n");
    fflush (stdout);
}

