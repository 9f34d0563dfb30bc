/* run_reconcile_loop: the reference driver around reconcile_once. */
#include "altar/reconcile.h"
#include "altar/grow.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

altar_reconcile_loop_opts_t altar_reconcile_loop_defaults(void) {
  return (altar_reconcile_loop_opts_t){.interval_s = 5.0, .max_ticks = 0, .stop_when_idle = true};
}

static void sleep_s(double s) {
  if (s <= 0) return;
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

int altar_run_reconcile_loop(const altar_poller_t *poller, altar_ledger_t *ledger, const altar_group_specs_t *specs,
                             const altar_reconcile_loop_opts_t *opts, altar_reconcile_result_t **presults, size_t *pn,
                             altar_strlist_t *pstalled, altar_error_t *err) {
  altar_reconcile_loop_opts_t o = opts ? *opts : altar_reconcile_loop_defaults();
  altar_reconcile_opts_t once = {.max_concurrent_callbacks = o.max_concurrent_callbacks};
  altar_reconcile_result_t *rs = NULL;
  size_t n = 0, cap = 0;
  int rc = ALTAR_OK;
  *presults = NULL;
  *pn = 0;
  for (uint64_t tick = 0; !o.max_ticks || tick < o.max_ticks; tick++) {
    if (tick) sleep_s(o.interval_s);
    if (ALTAR_GROW(rs, cap, n + 1)) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "reconcile loop: out of memory");
      break;
    }
    altar_reconcile_result_t *r = &rs[n++];
    memset(r, 0, sizeof *r);
    if ((rc = altar_reconcile_once(poller, ledger, specs, &once, r, err))) break;
    if (r->stalled_groups.n) {
      /* A blocked group without on_failed can never drain: escalate
       * instead of looping forever or exiting as if idle. */
      char list[256] = "";
      size_t off = 0;
      for (size_t i = 0; i < r->stalled_groups.n && off < sizeof list - 1; i++) {
        int w = snprintf(list + off, sizeof list - off, "%s%s", i ? ", " : "", r->stalled_groups.v[i]);
        if (w < 0) break;
        off += (size_t)w;
      }
      for (size_t i = 0; pstalled && i < r->stalled_groups.n; i++)
        if (altar_strlist_push(pstalled, r->stalled_groups.v[i])) break;
      rc = altar_error_set(err, ALTAR_ESTALLED,
                           "reconcile: %zu group(s) blocked by a failed shard with no on_failed: %s",
                           r->stalled_groups.n, list);
      break;
    }
    if (o.stop_when_idle && r->polled == 0 && r->fired_groups.n == 0) break;
  }
  *presults = rs;
  *pn = n;
  return rc;
}
