/* A shard's attempts (altar/attempts.h) as JSON, the one form the CLI's
 * --json outputs, `ledger show` and the dashboard's /api give. Internal to
 * altar's own parts (it hands out jansson values). */
#ifndef ALTAR_RECONCILER_ATTEMPTS_JSON_H
#define ALTAR_RECONCILER_ATTEMPTS_JSON_H

#include "altar/attempts.h"

#include <jansson.h>

/* [{"attempt","backend","external_id","worker","restart_count","state",
 *   "reason","detail","deterministic","exit_code","started_at","ended_at"}]
 * in run order (times null when not known); NULL on ENOMEM. */
json_t *altar__attempts_json(const altar_attempts_t *a);

/* One line for a person: "failed timeout (exit 124, worker w, ran 3.0 s)". */
void altar__attempt_summary(const altar_attempt_t *a, char *out, size_t cap);

#endif
