/* Pacing creates by the cluster's progress (#30). A window of requests in
 * flight bounds nothing once the API server answers fast: altar then
 * creates Jobs several times faster than the cluster starts them, the
 * backlog reaches the scheduler and the kubelets as bursts of pod events,
 * and the API server drops the watchers that fall behind ("watcher close
 * due to unresponsiveness"). So the backend's capacity counts the Jobs it
 * created that have not started as its own watch sees them (a ready pod,
 * or ended): with submit_backlog of them, every pool reports no free slot,
 * the worker takes no record for it, and the watch's report of a start
 * wakes the worker (wait_change) to poll and read capacity again. Nothing
 * waits inside a submit, so the worker's loop keeps polling and a
 * completion reaches its group as soon as the watch sees it.
 * Two limits keep a slow cluster from stalling the worker: once the last
 * create is PACE_FLOOR_S old a full backlog still leaves one slot (at
 * least one create per poll interval), and a Job counts for at most
 * PACE_EXPIRY_S (pods that wait for an image or a node are the kubelet's
 * business, not a sign the control plane is behind).
 * The bound: it begins at pace_start and moves by one per start the watch
 * reports, between pace_start and submit_backlog. A fresh API server gives
 * its watchers 10-event buffers; a whole backlog of creates in its first
 * second closed the scheduler's pod watch at 10^4 Jobs (#30), so it starts
 * small; one more per start doubles it every time to start. It grows only
 * while the cluster keeps up: a Job's time from create to start has a
 * floor (the least seen: pod made, bound, started, the Job's status
 * updated), and the bound over the floor is the rate the cluster would
 * start Jobs at without a queue; the Jobs waiting beyond that,
 *   queued = bound * (1 - floor / average time to start),
 * are the cluster's queue (the estimate TCP Vegas makes of a path's). Fewer
 * than PACE_QUEUE_LOW: one more; more than PACE_QUEUE_HIGH: one less. The
 * cluster then runs at its own rate with a short queue, where a fixed
 * bound kept a queue of its whole size (128 Jobs waiting 3 s on the test
 * cluster, whose API server then starved its watchers; 32 left it idle).
 * After PACE_IDLE_S without a create the API server's caches have shrunk
 * again, so the bound and the floor start over. */
#include "k8s_int.h"

#include "altar/grow.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PACE_EXPIRY_S 30.0
#define PACE_FLOOR_S 0.2
#define PACE_IDLE_S 30.0
#define PACE_QUEUE_LOW 4.0
#define PACE_QUEUE_HIGH 12.0
#define PACE_WAIT_GAIN (1.0 / 16) /* the average follows about 16 starts */

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
  double now = altar__k8s_now(k);
  k->pace_last = now;
  char *copy = strdup(name);
  /* Out of memory: this Job is not paced, nothing worse. */
  if (!copy || ALTAR_GROW(k->pace, k->cap_pace, k->n_pace + 1)) {
    free(copy);
    return;
  }
  k->pace[k->n_pace++] = (struct altar__k8s_pace_ent){copy, now};
}

void altar__k8s_pace_forget(altar_k8s_t *k, const char *name) {
  for (size_t i = 0; i < k->n_pace; i++)
    if (!strcmp(k->pace[i].name, name)) {
      free(k->pace[i].name);
      k->pace[i] = k->pace[--k->n_pace];
      return;
    }
}

/* One Job started after wait s: the floor, the average, the bound. */
static void pace_started(altar_k8s_t *k, double wait) {
  if (k->pace_floor <= 0 || wait < k->pace_floor) k->pace_floor = wait;
  k->pace_wait = k->pace_wait > 0 ? k->pace_wait + (wait - k->pace_wait) * PACE_WAIT_GAIN : wait;
  double queued = k->pace_wait > 0 ? k->pace_limit * (1 - k->pace_floor / k->pace_wait) : 0;
  if (queued < PACE_QUEUE_LOW && k->pace_limit < k->submit_backlog) k->pace_limit++;
  else if (queued > PACE_QUEUE_HIGH && k->pace_limit > k->pace_start) k->pace_limit--;
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
    if (was && !*was && now - p->at < PACE_EXPIRY_S) {
      /* Its create is unanswered: the Job the watch reports may be one that
       * was there already (adopted on the answer, and forgotten), whose
       * start says nothing of this cluster's time to start. */
      i++;
      continue;
    }
    bool refused = was && *was; /* the server will never start it */
    bool started = v.seen == ALTAR_K8S_SEEN_LIVE && v.state != ALTAR_STATE_PENDING;
    if (started) pace_started(k, now - p->at);
    if (started || v.seen == ALTAR_K8S_SEEN_DELETED || refused || now - p->at >= PACE_EXPIRY_S) {
      free(p->name);
      *p = k->pace[--k->n_pace];
      continue;
    }
    i++;
  }
  return k->n_pace;
}

void altar__k8s_pace_set_start(altar_k8s_t *k, int start) {
  k->pace_start = start < 1 ? 1 : start;
  k->pace_limit = k->pace_start < k->submit_backlog ? k->pace_start : k->submit_backlog;
  k->pace_floor = k->pace_wait = 0;
}

int altar__k8s_pace_limit(const altar_k8s_t *k) { return k->pace_limit; }

int64_t altar__k8s_pace_room(altar_k8s_t *k) {
  if (k->submit_backlog <= 0) return INT64_MAX;
  altar_k8s_watch_t *w = altar__k8s_watch_get(k);
  if (!w || !altar__k8s_watch_synced(w)) return INT64_MAX;
  double now = altar__k8s_now(k);
  /* Idle long enough for the server's caches to shrink: start over. */
  if (k->pace_limit > k->pace_start && now - k->pace_last >= PACE_IDLE_S) altar__k8s_pace_set_start(k, k->pace_start);
  size_t backlog = altar__k8s_pace_backlog(k);
  if (backlog < (size_t)k->pace_limit) return (int64_t)((size_t)k->pace_limit - backlog);
  if (now - k->pace_last >= PACE_FLOOR_S) return 1;
  k->pace_holds++;
  return 0;
}
