/* A shard's attempts as JSON and as one line of text (attempts_json.h). */
#include "reconciler/attempts_json.h"

#include <stdio.h>
#include <string.h>

static json_t *time_json(double t) { return t >= 0 ? json_real(t) : json_null(); }

json_t *altar__attempts_json(const altar_attempts_t *a) {
  json_t *arr = json_array();
  for (size_t i = 0; arr && i < a->n; i++) {
    const altar_attempt_t *t = &a->v[i];
    const altar_failure_t *f = t->failure;
    json_t *o = json_pack(
        "{sIsssssosIsssosososbsoso}", "attempt", (json_int_t)t->n, "backend", t->backend, "external_id", t->external_id,
        "worker", t->worker ? json_string(t->worker) : json_null(), "restart_count", (json_int_t)t->restart_count,
        "state", altar_state_name(t->state), "reason", f && f->reason ? json_string(f->reason) : json_null(), "detail",
        f && f->detail ? json_string(f->detail) : json_null(), "exit_code",
        f && f->exit_code.set ? json_integer(f->exit_code.v) : json_null(), "deterministic", f && f->deterministic,
        "started_at", time_json(t->started_at), "ended_at", time_json(t->ended_at));
    if (!o || json_array_append_new(arr, o)) {
      json_decref(arr);
      return NULL;
    }
  }
  return arr;
}

void altar__attempt_summary(const altar_attempt_t *a, char *out, size_t cap) {
  const altar_failure_t *f = a->failure;
  char ex[32] = "", ran[48] = "";
  if (f && f->exit_code.set) snprintf(ex, sizeof ex, "exit %lld, ", (long long)f->exit_code.v);
  if (a->started_at >= 0 && a->ended_at >= a->started_at)
    snprintf(ran, sizeof ran, ", ran %.1f s", a->ended_at - a->started_at);
  snprintf(out, cap, "%s%s%s (%sworker %s%s%s)", altar_state_name(a->state), f && f->reason ? " " : "",
           f && f->reason ? f->reason : "", ex, a->worker ? a->worker : "unknown", ran,
           f && f->deterministic ? ", deterministic" : "");
}
