/* Partitions and commits: the commit point of each owned partition (with
 * the cancels it carries), assignment and revocation (handover, never a
 * drain), and the warning of a member that owns nothing. */
#include "worker/worker_int.h"

#include "altar/clock.h"

#include "worker/cancel_meta.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Commits the partition's commit point if it changed: COMMIT_WRITTEN,
 * COMMIT_UNCHANGED, or COMMIT_FAILED (then tried again on the next call). */
enum { COMMIT_FAILED = -1, COMMIT_UNCHANGED = 0, COMMIT_WRITTEN = 1 };
static int commit_changed(worker_t *w, const char *topic, int32_t partition) {
  int64_t off;
  char meta[ALTAR_OFFSET_META_MAX + ALTAR_CANCEL_META_MAX + 1];
  bool changed;
  if (altar__offset_tracker_commit_point(w->tracker, topic, partition, &off, meta, ALTAR_OFFSET_META_MAX + 1,
                                         &changed) ||
      !changed || off < 0)
    return COMMIT_UNCHANGED;
  /* A commit past a cancel carries it on (cancel_meta.h): the commit point
   * moves past a cancel only once it was obeyed, so the set holds it. */
  altar__cancel_meta_append(&w->cancels, meta, sizeof meta);
  altar_error_t e = {0};
  if (altar_transport_commit(w->o->transport, topic, partition, off, meta[0] ? meta : NULL, &e) != ALTAR_OK) {
    /* Else the tracker would report no change and the commit never be retried. */
    altar__offset_tracker_commit_failed(w->tracker, topic, partition);
    altar__worker_log(w, "commit %s/%" PRId32 " at %" PRId64 " failed (will retry): %s", topic, partition, off, e.msg);
    return COMMIT_FAILED;
  }
  return COMMIT_WRITTEN;
}

/* False when the partition's commit failed. */
static bool commit_partition(worker_t *w, const char *topic, int32_t partition) {
  return commit_changed(w, topic, partition) != COMMIT_FAILED;
}

/* Number of partitions whose commit failed. */
size_t altar__worker_commit_all(worker_t *w) {
  size_t failed = 0;
  for (size_t i = 0; i < w->n_parts; i++) failed += !commit_partition(w, w->parts[i].topic, w->parts[i].partition);
  return failed;
}

bool altar__worker_commit_some(worker_t *w, size_t *pat, size_t max_written) {
  size_t written = 0;
  while (*pat < w->n_parts && written < max_written) {
    int rc = commit_changed(w, w->parts[*pat].topic, w->parts[*pat].partition);
    written += rc != COMMIT_UNCHANGED;
    ++*pat;
  }
  return *pat >= w->n_parts;
}

/* "T:0,2,4 U:1" for a log line, cut (with "...") at its size. */
static const char *parts_text(const altar_tp_t *parts, size_t n, char *buf, size_t size) {
  size_t at = 0;
  buf[0] = 0;
  for (size_t i = 0; i < n && at < size; i++) {
    bool same = i && !strcmp(parts[i].topic, parts[i - 1].topic);
    int k = same ? snprintf(buf + at, size - at, ",%" PRId32, parts[i].partition)
                 : snprintf(buf + at, size - at, "%s%s:%" PRId32, i ? " " : "", parts[i].topic, parts[i].partition);
    if (k < 0 || (size_t)k >= size - at) {
      if (size >= 4) snprintf(buf + size - 4, 4, "...");
      break;
    }
    at += (size_t)k;
  }
  return buf;
}

void altar__worker_on_rebalance(altar_transport_t *tr, altar_rebalance_kind_t kind, const altar_tp_t *parts, size_t n,
                                void *ctx) {
  worker_t *w = ctx; /* run detaches before its frame goes */
  if (kind == ALTAR_REBALANCE_ASSIGN) {
    for (size_t i = 0; i < n; i++) {
      int64_t off = ALTAR_OFFSET_INVALID;
      char *meta = NULL;
      altar_error_t e = {0};
      if (altar_transport_committed(tr, w->group, parts[i].topic, parts[i].partition, 10000, &off, &meta, &e))
        altar__worker_log(w, "reading the committed offset of %s/%" PRId32 " failed: %s", parts[i].topic,
                          parts[i].partition, e.msg);
      altar_error_t me = {0};
      char *cancels = altar__cancel_meta_split(meta);
      altar__offset_tracker_assign(w->tracker, parts[i].topic, parts[i].partition, off >= 0 ? off : -1, meta, &me);
      if (me.msg[0]) altar__worker_log(w, "%s", me.msg);
      if (cancels) altar__worker_restore_cancels(w, parts[i].topic, parts[i].partition, cancels);
      free(meta);
      if (w->n_parts == w->cap_parts) {
        size_t cap = w->cap_parts ? w->cap_parts * 2 : 8;
        assigned_t *np = realloc(w->parts, cap * sizeof *np);
        if (!np) {
          altar__worker_set_fatal(w, ALTAR_ENOMEM, "rebalance", NULL);
          return;
        }
        w->parts = np;
        w->cap_parts = cap;
      }
      w->parts[w->n_parts].topic = strdup(parts[i].topic);
      w->parts[w->n_parts].partition = parts[i].partition;
      w->n_parts++;
    }
    altar__worker_gate_assigned(w, parts, n);
    w->parts_changed = true;
    char list[1024];
    altar__worker_log(w, "assigned %zu partition(s): %s", n, parts_text(parts, n, list, sizeof list));
    return;
  }
  /* Handover, not drain: nothing waits and nothing is cancelled. The
   * commit carries the held bound, so the next owner waits for what still
   * runs here; those tasks run on (held) and announce their end. */
  size_t held = 0;
  for (size_t i = 0; i < n; i++) {
    /* The last chance to commit it: a few quick tries (no later loop would retry). */
    for (int tries = 0; !commit_partition(w, parts[i].topic, parts[i].partition) && tries < 3; tries++)
      altar_transport_poll(tr, 50);
    for (size_t k = 0; k < w->n_tasks; k++) {
      wtask_t *t = w->tasks[k];
      if (t->acked || t->held || t->partition != parts[i].partition || strcmp(t->topic, parts[i].topic)) continue;
      t->held = true;
      held++;
    }
    altar__worker_waits_drop(w, parts[i].topic, parts[i].partition);
    altar__lookahead_drop(&w->ahead, parts[i].topic, parts[i].partition);
    altar__offset_tracker_revoke(w->tracker, parts[i].topic, parts[i].partition);

    for (size_t j = 0; j < w->n_parts; j++) {
      if (w->parts[j].partition == parts[i].partition && !strcmp(w->parts[j].topic, parts[i].topic)) {
        free(w->parts[j].topic);
        w->parts[j] = w->parts[--w->n_parts];
        break;
      }
    }
  }
  w->stats.held += held;
  w->parts_changed = true;
  if (held) w->next_lease = altar_mono_ms(); /* the first lease goes out now */
  char list[1024];
  altar__worker_log(w, "revoked %zu partition(s); %zu running task(s) handed over, still running here: %s", n, held,
                    parts_text(parts, n, list, sizeof list));
}

/* A member with no partition runs nothing: say why, once per idle spell. */
void altar__worker_warn_no_partition(worker_t *w) {
  for (size_t i = 0; i < w->n_pools; i++) {
    const char *topic = w->pools[i].topic;
    altar_topic_list_t *tl = NULL;
    altar_error_t e = {0};
    size_t parts = 0, members = 0;
    if (altar_transport_list_topics(w->o->transport, topic, 5000, &tl, &e) == ALTAR_OK && tl->n_topics)
      parts = tl->topics[0].n_partitions;
    altar_topic_list_free(tl);
    bool known = altar_transport_topic_members(w->o->transport, w->group, topic, 5000, &members, &e) == ALTAR_OK;
    if (known)
      altar__worker_log(w,
                        "owns no partition of %s: it has %zu partition(s) and group %s has %zu member(s) on it, "
                        "so there are more workers than partitions; this one stays idle until a partition frees up "
                        "(more partitions: topics.partitions / --partitions when the topic is created)",
                        topic, parts, w->group, members);
    else
      altar__worker_log(w,
                        "owns no partition of %s (%zu partition(s)): more workers than partitions, or a rebalance in "
                        "progress; it stays idle until a partition is assigned",
                        topic, parts);
  }
}
