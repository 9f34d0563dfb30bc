/* The daemon's checkpoints (checkpoint_runner.h). */
#include "reconciler/checkpoint_runner.h"

#include "altar/clock.h"

#include <stdlib.h>
#include <string.h>

void altar__cp_runner_init(altar__cp_runner_t *r, const char *uri, double interval_s, double now) {
  memset(r, 0, sizeof *r);
  r->uri = uri && *uri ? uri : NULL;
  r->interval_s = interval_s > 0 ? interval_s : 60;
  r->next_due = now + r->interval_s;
  atomic_init(&r->done, false);
}

static void *ship_main(void *arg) {
  altar__cp_runner_t *r = arg;
  r->rc = altar__checkpoint_ship(&r->cp, r->uri, r->shipped, &r->err);
  /* Collected only once the new manifest is written: it is among the kept. */
  r->gc_ran = r->rc == ALTAR_OK && r->keep > 0 && (r->gc || (r->gc = altar__cp_gc_new()));
  memset(&r->gc_err, 0, sizeof r->gc_err);
  if (r->gc_ran)
    r->gc_rc = altar__checkpoint_gc(r->uri, r->keep, altar__cp_gc_grace_s(r->interval_s), altar_wall_s(), r->gc,
                                    &r->gc_res, &r->gc_err);
  atomic_store(&r->done, true);
  return NULL;
}

static void outcome(altar__cp_runner_t *r, int *pdone, altar_error_t *perr) {
  if (r->rc == ALTAR_OK) {
    r->ok++;
    r->last_ok_at = r->cp.taken_at;
    *pdone = 1;
  } else {
    r->failed++;
    *perr = r->err;
    *pdone = -1;
  }
}

static void collect(altar__cp_runner_t *r, int *pdone, altar_error_t *perr) {
  pthread_join(r->thread, NULL);
  r->running = false;
  outcome(r, pdone, perr);
}

void altar__cp_runner_tick(altar__cp_runner_t *r, altar_ledger_t *l, const char *topic, uint64_t batches, double now,
                           int *pdone, altar_error_t *perr) {
  *pdone = 0;
  if (!r->uri) return;
  if (r->running) {
    if (!atomic_load(&r->done)) return;
    collect(r, pdone, perr);
    return; /* the next one starts on a later turn */
  }
  if (now < r->next_due || batches == r->taken_at_batches) return;
  r->next_due = now + r->interval_s;
  if (!r->shipped && !(r->shipped = altar__cp_shipped_new())) {
    altar_error_set(perr, ALTAR_ENOMEM, "checkpoint: out of memory");
    r->failed++;
    *pdone = -1;
    return;
  }
  altar__checkpoint_clear(&r->cp);
  memset(&r->err, 0, sizeof r->err);
  if (altar__checkpoint_take(l, topic, &r->cp, perr) != ALTAR_OK) {
    r->failed++;
    *pdone = -1;
    return;
  }
  r->taken_at_batches = batches;
  r->cp.published = r->pub;
  r->cp.n_published = r->n_pub;
  r->pub = NULL;
  r->n_pub = 0;
  atomic_store(&r->done, false);
  if (pthread_create(&r->thread, NULL, ship_main, r) != 0) { /* ship here instead */
    ship_main(r);
    outcome(r, pdone, perr);
    return;
  }
  r->running = true;
}

bool altar__cp_runner_due(const altar__cp_runner_t *r, uint64_t batches, double now) {
  return r->uri && !r->running && now >= r->next_due && batches != r->taken_at_batches;
}

void altar__cp_runner_finish(altar__cp_runner_t *r, int *pdone, altar_error_t *perr) {
  *pdone = 0;
  if (r->running) collect(r, pdone, perr);
}

void altar__cp_runner_free(altar__cp_runner_t *r) {
  altar__checkpoint_clear(&r->cp);
  free(r->pub);
  r->pub = NULL;
  altar__cp_shipped_free(r->shipped);
  r->shipped = NULL;
  altar__cp_gc_free(r->gc);
  r->gc = NULL;
}
