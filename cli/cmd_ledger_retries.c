/* `altar ledger retries`: every retry's recorded due time, one JSON line
 * each, ordered by task key and attempt (reconciler/retry_backoff.h). A
 * rebuilt ledger prints the same lines. */
#include "cli.h"
#include "reconciler/retry_backoff.h"

#include <inttypes.h>
#include <stdio.h>

int altar__cmd_ledger_retries(struct altar_ledger *l) {
  altar_retry_due_t *v = NULL;
  size_t n = 0;
  altar_error_t err = {0};
  if (altar__retry_dues_list(l, &v, &n, &err)) {
    fprintf(stderr, "altar ledger retries: %s\n", err.msg);
    return 1;
  }
  for (size_t i = 0; i < n; i++)
    printf("{\"attempt\":%" PRId64 ",\"delay_s\":%.6f,\"due\":%.6f,\"failed_at\":%.6f,\"task_key\":\"%s\"}\n",
           v[i].attempt, v[i].delay_s, v[i].due_ts, v[i].failed_ts, v[i].task_key);
  altar__retry_dues_free(v, n);
  return 0;
}
