/* Pacing creates by the cluster's progress (#30). A window of requests in
 * flight bounds nothing once the API server answers fast: altar then
 * creates Jobs several times faster than the cluster starts them, the
 * backlog reaches the scheduler and the kubelets as bursts of pod events,
 * and the API server drops the watchers that fall behind ("watcher close
 * due to unresponsiveness"). So a create also waits while submit_backlog
 * Jobs this backend created have not started as its own watch sees them
 * (a ready pod, or ended). Two limits keep a slow cluster from stalling the
 * worker: one create waits at most PACE_WAIT_MAX_S (the worker's poll
 * interval, so its loop keeps polling), and a Job counts for at most
 * PACE_EXPIRY_S (pods that wait for an image or a node are the kubelet's
 * business, not a sign the control plane is behind). */
#include "k8s_int.h"

#include "altar/grow.h"

#include <stdlib.h>
#include <string.h>

#define PACE_EXPIRY_S 30.0
#define PACE_WAIT_MAX_S 0.2

struct altar__k8s_pace_ent {
  char *name;
  double at; /* monotonic s of the create */
};

void altar__k8s_pace_clear(altar_k8s_t *k) {
  for (size_t i = 0; i < k->n_pace; i++) free(k->pace[i].name);
  free(k->pace);
  k->pace = NULL;
  k->n_pace = k->cap_pace = 0;
}

void altar__k8s_pace_add(altar_k8s_t *k, const char *name) {
  if (k->submit_backlog <= 0 || !name) return;
  char *copy = strdup(name);
  /* Out of memory: this Job is not paced, nothing worse. */
  if (!copy || ALTAR_GROW(k->pace, k->cap_pace, k->n_pace + 1)) {
    free(copy);
    return;
  }
  k->pace[k->n_pace++] = (struct altar__k8s_pace_ent){copy, altar__k8s_now(k)};
}

size_t altar__k8s_pace_backlog(altar_k8s_t *k) {
  altar_k8s_watch_t *w = k->watch;
  /* No watch (or not listed yet): nothing to pace by. */
  if (!w || !altar__k8s_watch_synced(w)) return 0;
  double now = altar__k8s_now(k);
  for (size_t i = 0; i < k->n_pace;) {
    struct altar__k8s_pace_ent *p = &k->pace[i];
    altar_k8s_watch_view_t v = {0};
    const char *name = p->name;
    altar__k8s_watch_lookup(w, &name, 1, &v);
    const char *was = altar_strmap_get(&k->outcome, name);
    bool refused = was && *was; /* the server will never start it */
    bool started = v.seen == ALTAR_K8S_SEEN_LIVE && v.state != ALTAR_STATE_PENDING;
    if (started || v.seen == ALTAR_K8S_SEEN_DELETED || refused || now - p->at >= PACE_EXPIRY_S) {
      free(p->name);
      *p = k->pace[--k->n_pace];
      continue;
    }
    i++;
  }
  return k->n_pace;
}

void altar__k8s_pace_wait(altar_k8s_t *k) {
  if (k->submit_backlog <= 0) return;
  altar_k8s_watch_t *w = k->watch;
  uint64_t gen = w ? altar__k8s_watch_generation(w) : 0;
  double until = altar__k8s_now(k) + PACE_WAIT_MAX_S;
  bool waited = false;
  while (altar__k8s_pace_backlog(k) >= (size_t)k->submit_backlog && altar__k8s_now(k) < until) {
    waited = true;
    /* Answers to creates in flight and watch events both end a turn. */
    if (k->n_inflight) altar__k8s_submit_drive(k, 10);
    if (k->sleep) altar__k8s_sleep(k, 0.02); /* a test's clock */
    else altar__k8s_watch_wait(w, &gen, 20);
  }
  if (waited) k->pace_waits++;
}
