/* The worker's notes on what its backend declares it cannot do. */
#include "worker/backend_caps.h"

#include <stdio.h>

/* Why the fleet misses each capability it leans on. */
static const struct {
  unsigned cap;
  const char *so;
} leaned_on[] = {
    {ALTAR_BACKEND_CAP_ADOPT, "a task whose worker dies or drains is run again beside its old run"},
    {ALTAR_BACKEND_CAP_CANCEL, "altar cancel and the drain deadline report its tasks ended while they run on"},
};

void altar__worker_caps_note(const altar_backend_t *be, char *out, size_t size) {
  if (!size) return;
  out[0] = '\0';
  size_t at = 0;
  for (size_t i = 0; i < sizeof leaned_on / sizeof leaned_on[0] && at < size; i++) {
    if (altar_backend_caps(be) & leaned_on[i].cap) continue;
    int n = snprintf(out + at, size - at, "%sthe %s backend cannot %s: %s", at ? "; " : "", altar_backend_name(be),
                     altar_backend_cap_name(leaned_on[i].cap), leaned_on[i].so);
    if (n > 0) at += (size_t)n;
  }
}

bool altar__worker_can_stop(const altar_backend_t *be, const char *job_id, char *out, size_t size) {
  if (altar_backend_caps(be) & ALTAR_BACKEND_CAP_CANCEL) return true;
  if (size)
    snprintf(out, size,
             "cancel of job %s: the %s backend cannot %s; its running tasks are reported cancelled and run on",
             job_id ? job_id : "?", altar_backend_name(be), altar_backend_cap_name(ALTAR_BACKEND_CAP_CANCEL));
  return false;
}
