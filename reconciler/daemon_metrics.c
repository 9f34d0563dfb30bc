/* The reconciler's metrics, kept apart from the loop so it only calls update. */
#include "reconciler/daemon_metrics.h"

#include <stddef.h>
#include <string.h>

int altar__reconciler_metrics_init(altar__reconciler_metrics_t *rm, altar_metrics_t *reg, altar_error_t *err) {
  memset(rm, 0, sizeof *rm);
  if (!reg) return ALTAR_OK;
  static const struct {
    size_t off;
    const char *name, *help;
  } defs[] = {
#define C(f, n, h) {offsetof(altar__reconciler_metrics_t, f), n, h}
      C(events, "altar_reconciler_events_applied_total", "Status events applied to the ledger."),
      C(batches, "altar_reconciler_batches_total", "Atomic ledger writes (batches of status events)."),
      C(fired, "altar_reconciler_groups_fired_total", "Group events fired (groups that became ready)."),
      C(dead_lettered, "altar_reconciler_groups_dead_lettered_total", "Groups dead-lettered."),
      C(retried, "altar_reconciler_jobs_retried_total", "Jobs republished for another attempt."),
      C(poison, "altar_reconciler_poison_total", "Undecodable or unappliable status events sent to the DLQ."),
      C(published, "altar_reconciler_outbox_published_total", "Outbox entries acknowledged by the log."),
#undef C
  };
  for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
    altar_metric_t *m = altar_metrics_counter(reg, defs[i].name, defs[i].help, err);
    if (!m) {
      memset(rm, 0, sizeof *rm);
      return err ? err->code : ALTAR_EINVAL;
    }
    memcpy((char *)rm + defs[i].off, &m, sizeof m);
  }
  return ALTAR_OK;
}

static void bump(altar_metric_t *m, uint64_t now, uint64_t *plast) {
  if (now > *plast) altar_metric_add(m, now - *plast);
  *plast = now;
}

void altar__reconciler_metrics_update(altar__reconciler_metrics_t *rm, const altar_reconciler_stats_t *st) {
  if (!rm->events) return;
  bump(rm->events, st->events, &rm->last.events);
  bump(rm->batches, st->batches, &rm->last.batches);
  bump(rm->fired, st->fired, &rm->last.fired);
  bump(rm->dead_lettered, st->dead_lettered, &rm->last.dead_lettered);
  bump(rm->retried, st->retried, &rm->last.retried);
  bump(rm->poison, st->poison, &rm->last.poison);
  bump(rm->published, st->published, &rm->last.published);
}
