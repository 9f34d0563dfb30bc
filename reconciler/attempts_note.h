/* Filing a shard's runs as attempts (altar/attempts.h): what the
 * status-event applier calls, inside its open ledger batch. Internal to
 * reconciler/. */
#ifndef ALTAR_RECONCILER_ATTEMPTS_NOTE_H
#define ALTAR_RECONCILER_ATTEMPTS_NOTE_H

#include "altar/attempts.h"

/* What is known of one run now; NULL / < 0 fields are "not known", and a
 * run filed before keeps what it had for them. */
typedef struct altar__run_note {
  const char *task_key;
  const altar_handle_t *handle;
  int64_t restart_count; /* with the handle, names the run */
  altar_state_t state;
  const altar_failure_t *failure;
  const char *worker;
  double started_at, ended_at;
  /* Set for a record that is PENDING now: skipped when it is only its own
   * previous (filed) run put back for a retry, whose end ends no run. */
  bool unless_restart_placeholder;
} altar__run_note_t;

/* Files (or updates, when it is the run filed last) the run as an attempt
 * of its task key, dropping the oldest beyond keep (0 = the default). A
 * record without task key, or a ledger without side keys: nothing. */
int altar__attempt_note(altar_ledger_t *l, int64_t keep, const altar__run_note_t *run, altar_error_t *err);

#endif
