/* Consuming from the local log: as a group member (local_group.c decides
 * the partitions) or by explicit assignment, reading the owned partitions
 * round robin; positions, pause/resume, seek, commits. */
#include "transports/local_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static lreader_t *find_reader(local_t *l, const char *topic, int32_t partition) {
  local_consumer_t *c = &l->cons;
  if (c->group) {
    for (size_t i = 0; i < c->group->n_owned; i++)
      if (c->group->owned[i].partition == partition && !strcmp(c->group->owned[i].topic, topic))
        return c->group->owned[i].reader;
  }
  for (size_t i = 0; i < c->n_assigned; i++)
    if (c->assigned[i]->partition == partition && !strcmp(c->assigned[i]->topic, topic)) return c->assigned[i];
  return NULL;
}

int altar__local_subscribe(altar_transport_t *t, const char *group, const char *const *topics, size_t n,
                           altar_rebalance_cb cb, void *ctx, altar_error_t *err) {
  local_t *l = altar_transport_impl(t);
  if (l->cons.group || l->cons.n_assigned || l->cons.left)
    return altar_error_set(err, ALTAR_ESTATE, "subscribe: this handle already consumes");
  l->cons.forced_check = false;
  return altar__local_group_join(t, &l->cfg, group, topics, n, cb, ctx, &l->cons.group, err);
}

int altar__local_assign(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err) {
  local_t *l = altar_transport_impl(t);
  local_consumer_t *c = &l->cons;
  if (c->group || c->n_assigned) return altar_error_set(err, ALTAR_ESTATE, "assign: this handle already consumes");
  if (n == 0) return 0;
  c->assigned = calloc(n, sizeof *c->assigned);
  if (!c->assigned) return altar_error_set(err, ALTAR_ENOMEM, "assign: out of memory");
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    int32_t np;
    rc = altar__local_topic_partitions(t, &l->cfg, parts[i].topic, &np, err);
    if (rc) break;
    if (parts[i].partition < 0 || parts[i].partition >= np) {
      rc = altar_error_set(err, ALTAR_ENOTFOUND, "assign: topic %s has no partition %d", parts[i].topic,
                           (int)parts[i].partition);
      break;
    }
    lreader_t *r = altar__local_reader_new(l->cfg.dir, parts[i].topic, parts[i].partition);
    if (!r) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "assign: out of memory");
      break;
    }
    c->assigned[c->n_assigned++] = r;
    int64_t off = parts[i].offset == ALTAR_OFFSET_INVALID ? ALTAR_OFFSET_BEGINNING : parts[i].offset;
    rc = altar__local_reader_seek(t, &l->cfg, r, off, err);
  }
  if (rc) {
    for (size_t i = 0; i < c->n_assigned; i++) altar__local_reader_free(c->assigned[i]);
    free(c->assigned);
    c->assigned = NULL;
    c->n_assigned = 0;
  }
  return rc;
}

int altar__local_consume(altar_transport_t *t, int timeout_ms, altar_msg_t **pmsg, altar_error_t *err) {
  local_t *l = altar_transport_impl(t);
  local_consumer_t *c = &l->cons;
  *pmsg = NULL;
  if (c->left) {
    /* Left the group: nothing to read, but callers' loops keep their pace. */
    if (timeout_ms > 0) sleep_ms(timeout_ms);
    return 0;
  }
  if (!c->group && !c->n_assigned)
    return altar_error_set(err, ALTAR_ESTATE, "consume: neither subscribed nor assigned");
  int64_t deadline = altar_mono_ms() + (timeout_ms < 0 ? INT64_MAX / 4 : timeout_ms);
  int64_t nap = 1;
  for (;;) {
    if (c->group) {
      int rc = altar__local_group_check(t, &l->cfg, c->group, !c->forced_check, err);
      c->forced_check = true;
      if (rc) return rc;
    }
    size_t n = c->group ? c->group->n_owned : c->n_assigned;
    lreader_t *stack[64];
    lreader_t **rs = n <= 64 ? stack : malloc(n * sizeof *rs);
    if (!rs) return altar_error_set(err, ALTAR_ENOMEM, "consume: out of memory");
    for (size_t k = 0; k < n; k++) rs[k] = c->group ? c->group->owned[k].reader : c->assigned[k];
    /* News is collected after a pass that found nothing, and otherwise at
     * most once a millisecond: once per record cost a bulk reader (the
     * rebuild) a quarter of its rate, and the bound keeps a busy partition
     * from hiding the others' news. */
    int64_t now_ms = altar_mono_ms();
    if (c->pass_empty || now_ms != c->collected_ms) {
      altar__local_watch_collect(c, rs, n);
      c->collected_ms = now_ms;
    }
    /* Round robin over the partitions written to since their last empty
     * read; one that yields a record stays marked, there may be more. */
    int rc = 0;
    for (size_t k = 0; k < n && !rc; k++) {
      size_t idx = (c->rr + k) % n;
      lreader_t *r = rs[idx];
      if (!r || r->paused || !r->changed) continue;
      r->changed = false;
      rc = altar__local_reader_next(t, &l->cfg, r, pmsg, err);
      if (rc != 0) {
        r->changed = true;
        c->rr = idx + 1;
      }
    }
    if (rs != stack) free(rs);
    c->pass_empty = rc == 0;
    if (rc != 0) return rc < 0 ? rc : 0;
    int64_t now = altar_mono_ms();
    if (now >= deadline) return 0;
    int64_t left = deadline - now;
    if (altar__local_watch_active(c)) {
      altar__local_watch_wait(c, left);
    } else {
      sleep_ms(left < nap ? left : nap);
      if (nap < 20) nap *= 2;
    }
  }
}

/* The inotify descriptor the consumer sleeps on, once a consume made it:
 * after an empty consume every change since is pending on it. */
int altar__local_wait_fd(altar_transport_t *t) {
  local_t *l = altar_transport_impl(t);
  local_consumer_t *c = &l->cons;
  if (c->left || !altar__local_watch_active(c)) return -1;
  return c->watch_fd;
}

static int set_paused(altar_transport_t *t, const altar_tp_t *parts, size_t n, bool paused, altar_error_t *err) {
  local_t *l = altar_transport_impl(t);
  for (size_t i = 0; i < n; i++) {
    lreader_t *r = find_reader(l, parts[i].topic, parts[i].partition);
    if (!r)
      return altar_error_set(err, ALTAR_ESTATE, "%s: %s/%d is not assigned to this consumer",
                             paused ? "pause" : "resume", parts[i].topic, (int)parts[i].partition);
  }
  for (size_t i = 0; i < n; i++) {
    lreader_t *r = find_reader(l, parts[i].topic, parts[i].partition);
    r->paused = paused;
    r->changed = true; /* resumed: read it on the next pass */
  }
  return 0;
}

int altar__local_pause(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err) {
  return set_paused(t, parts, n, true, err);
}

int altar__local_resume(altar_transport_t *t, const altar_tp_t *parts, size_t n, altar_error_t *err) {
  return set_paused(t, parts, n, false, err);
}

int altar__local_seek(altar_transport_t *t, const char *topic, int32_t partition, int64_t offset, altar_error_t *err) {
  local_t *l = altar_transport_impl(t);
  lreader_t *r = topic ? find_reader(l, topic, partition) : NULL;
  if (!r)
    return altar_error_set(err, ALTAR_ESTATE, "seek: %s/%d is not assigned to this consumer", topic ? topic : "(null)",
                           (int)partition);
  return altar__local_reader_seek(t, &l->cfg, r, offset, err);
}

int altar__local_commit(altar_transport_t *t, const char *topic, int32_t partition, int64_t offset,
                        const char *metadata, altar_error_t *err) {
  local_t *l = altar_transport_impl(t);
  if (!l->cons.group) return altar_error_set(err, ALTAR_ESTATE, "commit: not a group member");
  bool owned = false;
  for (size_t i = 0; topic && i < l->cons.group->n_owned && !owned; i++)
    owned = l->cons.group->owned[i].partition == partition && !strcmp(l->cons.group->owned[i].topic, topic);
  if (!owned)
    return altar_error_set(err, ALTAR_ESTATE, "commit: %s/%d is not owned by this member of group %s",
                           topic ? topic : "(null)", (int)partition, l->cons.group->group);
  lgroup_t *g = l->cons.group;
  if (!g->commits) {
    int rc = altar__local_committer_new(&l->cfg, g->group, &g->commits, err);
    if (rc) return rc;
  }
  return altar__local_committer_put(g->commits, topic, partition, offset, metadata, err);
}

int altar__local_committed(altar_transport_t *t, const char *group, const char *topic, int32_t partition,
                           int timeout_ms, int64_t *poffset, char **pmetadata, altar_error_t *err) {
  (void)timeout_ms;
  local_t *l = altar_transport_impl(t);
  int rc = altar_transport_check_name("group", group, err);
  if (!rc) rc = altar_transport_check_name("topic", topic, err);
  if (rc) return rc;
  if (partition < 0) return altar_error_set(err, ALTAR_EINVAL, "partition: %d is negative", (int)partition);
  /* This member's own commits are read as written. */
  if (l->cons.group) altar__local_committer_drain(l->cons.group->commits);
  return altar__local_offset_read(&l->cfg, group, topic, partition, poffset, pmetadata, err);
}

int altar__local_assignment(altar_transport_t *t, altar_tp_t **pparts, size_t *pn, altar_error_t *err) {
  local_t *l = altar_transport_impl(t);
  local_consumer_t *c = &l->cons;
  size_t n = c->group ? c->group->n_owned : c->n_assigned;
  *pparts = NULL;
  *pn = 0;
  if (!n) return 0;
  altar_tp_t *tps = calloc(n, sizeof *tps);
  if (!tps) return altar_error_set(err, ALTAR_ENOMEM, "assignment: out of memory");
  for (size_t i = 0; i < n; i++) {
    lreader_t *r = c->group ? c->group->owned[i].reader : c->assigned[i];
    tps[i] = (altar_tp_t){r->topic, r->partition, r->next_offset};
  }
  *pparts = tps;
  *pn = n;
  return 0;
}

int altar__local_caught_up(altar_transport_t *t, bool *pdone, altar_error_t *err) {
  local_t *l = altar_transport_impl(t);
  local_consumer_t *c = &l->cons;
  *pdone = false;
  size_t n = c->group ? c->group->n_owned : c->n_assigned;
  if (!n) return 0;
  for (size_t i = 0; i < n; i++) {
    lreader_t *r = c->group ? c->group->owned[i].reader : c->assigned[i];
    int64_t b, e;
    int rc = ALTAR_EAGAIN;
    for (int tries = 0; tries < 5 && rc == ALTAR_EAGAIN; tries++)
      rc = altar__local_part_offsets(t, &l->cfg, r->dir, &b, &e, err);
    if (rc) return rc;
    if (r->next_offset < e) return 0;
  }
  *pdone = true;
  return 0;
}

int altar__local_leave(altar_transport_t *t, altar_error_t *err) {
  (void)err;
  local_t *l = altar_transport_impl(t);
  local_consumer_t *c = &l->cons;
  if (!c->group) return 0; /* never subscribed, or left already */
  /* Revokes through the callback, then drops the member file: the others
   * see the change on their next membership check. */
  altar__local_group_leave(t, c->group);
  c->group = NULL;
  c->left = true;
  return 0;
}

void altar__local_consumer_close(altar_transport_t *t) {
  local_t *l = altar_transport_impl(t);
  local_consumer_t *c = &l->cons;
  altar__local_group_leave(t, c->group);
  c->group = NULL;
  altar__local_watch_close(c);
  for (size_t i = 0; i < c->n_assigned; i++) altar__local_reader_free(c->assigned[i]);
  free(c->assigned);
  c->assigned = NULL;
  c->n_assigned = 0;
}
