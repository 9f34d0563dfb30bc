/* Group events out already: ids read off the publish topics, matched with
 * the outbox's entries (reconciler/published_seen.h). */
#include "reconciler/published_seen.h"
#include "reconciler/outbox.h"

#include "altar/clock.h"
#include "altar/codec.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct altar__pub_id {
  altar__pub_id_t *next; /* arrival order (seen set only) */
  uint64_t seq;
  size_t len;
  char id[]; /* the map's key */
};

static altar__pub_id_t *id_new(const char *id, uint64_t seq) {
  size_t len = strlen(id);
  altar__pub_id_t *p = malloc(sizeof *p + len + 1);
  if (!p) return NULL;
  p->next = NULL;
  p->seq = seq;
  p->len = len;
  memcpy(p->id, id, len + 1);
  return p;
}

/* Seen ids leave the map when taken but stay in the arrival list until the
 * list's head reaches them: the list owns them (seq UINT64_MAX: taken). */
#define TAKEN UINT64_MAX

static void forget_oldest(altar__published_seen_t *s) {
  while (s->oldest) {
    altar__pub_id_t *p = s->oldest;
    s->oldest = p->next;
    if (!s->oldest) s->newest = NULL;
    bool live = p->seq != TAKEN;
    if (live) {
      altar__hmap_del(&s->seen, p->id, p->len);
      s->forgotten++;
    }
    free(p);
    if (live) return;
  }
}

static void drop_taken_head(altar__published_seen_t *s) {
  while (s->oldest && s->oldest->seq == TAKEN) {
    altar__pub_id_t *p = s->oldest;
    s->oldest = p->next;
    if (!s->oldest) s->newest = NULL;
    free(p);
  }
}

int altar__published_seen_note(altar__published_seen_t *s, const char *id, altar_error_t *err) {
  size_t len = strlen(id);
  altar__pub_id_t *p = altar__hmap_del(&s->pending, id, len);
  if (p) {                 /* staged and held: out already, so never published by us */
    uint64_t ref = p->seq; /* the entry's reference: partition and number */
    free(p);
    int rc = altar__outbox_del_ref(s->ledger, ref, err);
    if (!rc) s->dropped++;
    return rc;
  }
  if (altar__hmap_get(&s->seen, id, len)) return ALTAR_OK; /* published twice: one entry at most */
  if (s->seen.n >= ALTAR_PUBLISHED_SEEN_MAX) forget_oldest(s);
  p = id_new(id, 0);
  if (!p || altar__hmap_put(&s->seen, p->id, p->len, p)) {
    free(p);
    return altar_error_set(err, ALTAR_ENOMEM, "published ids: out of memory");
  }
  if (s->newest) s->newest->next = p;
  else s->oldest = p;
  s->newest = p;
  return ALTAR_OK;
}

bool altar__published_seen_take(altar__published_seen_t *s, const char *id) {
  altar__pub_id_t *p = s->seen.n ? altar__hmap_del(&s->seen, id, strlen(id)) : NULL;
  if (!p) return false;
  p->seq = TAKEN;
  drop_taken_head(s);
  return true;
}

int altar__published_seen_hold(altar__published_seen_t *s, const char *id, uint64_t seq, altar_error_t *err) {
  altar__pub_id_t *p = id_new(id, seq), *old = NULL;
  if (!p || altar__hmap_put_h(&s->pending, p->id, p->len, altar__hash(p->id, p->len), p, (void **)&old)) {
    free(p);
    return altar_error_set(err, ALTAR_ENOMEM, "published ids: out of memory");
  }
  free(old);
  return ALTAR_OK;
}

size_t altar__published_seen_count(const altar__published_seen_t *s) { return s->seen.n; }
size_t altar__published_seen_pending(const altar__published_seen_t *s) { return s->pending.n; }

void altar__published_seen_free(altar__published_seen_t *s) {
  while (s->oldest) {
    altar__pub_id_t *p = s->oldest;
    s->oldest = p->next;
    free(p);
  }
  s->newest = NULL;
  for (size_t i = 0; i < s->pending.cap; i++)
    if (s->pending.ctrl[i]) free(s->pending.slots[i].val);
  altar__hmap_free(&s->seen);
  altar__hmap_free(&s->pending);
}

int altar__published_seen_skip(void *ctx, const char *topic, const char *key, const void *value, size_t vlen,
                               const altar_header_t *h, size_t nh, bool *pskip, altar_error_t *err) {
  (void)topic, (void)key, (void)h, (void)nh, (void)err;
  altar__published_seen_t *s = ctx;
  *pskip = false;
  char *id = NULL;
  if (!s->seen.n || altar_peek_group_event_id(value, vlen, &id) != ALTAR_OK) return ALTAR_OK; /* not a group event */
  *pskip = altar__published_seen_take(s, id);
  if (*pskip) s->dropped++;
  free(id);
  return ALTAR_OK;
}

int altar__published_seen_on_hold(void *ctx, uint64_t seq, const char *topic, const void *value, size_t vlen,
                                  altar_error_t *err) {
  (void)topic;
  altar__published_seen_t *s = ctx;
  char *id = NULL;
  if (altar_peek_group_event_id(value, vlen, &id) != ALTAR_OK) /* jobs, DLQ copies */
    return s->on_other ? s->on_other(s->other_ctx, seq, err) : ALTAR_OK;
  int rc = altar__published_seen_hold(s, id, seq, err);
  free(id);
  return rc;
}

static size_t add_topic(char (*out)[256], size_t n, size_t max, const char *t) {
  if (!t || !*t) return n;
  for (size_t j = 0; j < n; j++)
    if (!strcmp(out[j], t)) return n;
  if (n < max && strlen(t) < 256) snprintf(out[n++], 256, "%s", t);
  return n;
}

size_t altar__publish_topics(const altar_group_specs_t *groups, const altar_topics_t *topics, char (*out)[256],
                             size_t max) {
  size_t n = add_topic(out, 0, max, topics->ready);
  n = add_topic(out, n, max, topics->dead);
  for (size_t i = 0; groups && i < groups->n; i++) {
    n = add_topic(out, n, max, groups->v[i].ready_topic);
    n = add_topic(out, n, max, groups->v[i].dead_topic);
  }
  return n;
}

#define MAX_PUB_TOPICS 64

int altar__publish_ends(altar_transport_t *t, const altar_group_specs_t *groups, const altar_topics_t *topics,
                        altar__pub_pos_t **pv, size_t *pn, altar_error_t *err) {
  char names[MAX_PUB_TOPICS][256];
  size_t nt = altar__publish_topics(groups, topics, names, MAX_PUB_TOPICS);
  altar__pub_pos_t *v = NULL;
  size_t n = 0;
  int rc = ALTAR_OK;
  *pv = NULL;
  *pn = 0;
  for (size_t i = 0; i < nt && !rc; i++) {
    altar_topic_list_t *tl = NULL;
    rc = altar_transport_list_topics(t, names[i], 10000, &tl, err);
    if (rc == ALTAR_ENOTFOUND || (!rc && !tl->n_topics)) {
      rc = ALTAR_OK; /* not created yet: read from its beginning */
      if (err) memset(err, 0, sizeof *err);
    } else if (!rc) {
      const altar_topic_info_t *ti = &tl->topics[0];
      altar__pub_pos_t *nv = realloc(v, (n + ti->n_partitions + 1) * sizeof *nv);
      if (!nv) rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
      else v = nv;
      for (size_t p = 0; !rc && p < ti->n_partitions; p++) {
        snprintf(v[n].topic, sizeof v[n].topic, "%s", names[i]);
        v[n].partition = ti->partitions[p].partition;
        v[n++].next = ti->partitions[p].end;
      }
    }
    altar_topic_list_free(tl);
  }
  if (rc) {
    free(v);
    return rc;
  }
  *pv = v;
  *pn = n;
  return ALTAR_OK;
}

static altar__pub_pos_t *find_pos(altar__pub_pos_t *v, size_t n, const char *topic, int32_t p) {
  for (size_t i = 0; i < n; i++)
    if (v[i].partition == p && !strcmp(v[i].topic, topic)) return &v[i];
  return NULL;
}

void altar__published_reader_close(altar__published_reader_t *r) {
  altar_transport_close(r->t);
  r->t = NULL;
  free(r->assigned);
  r->assigned = NULL;
  r->n_assigned = 0;
}

/* Whether r's handle is assigned exactly the partitions in ends. */
static bool same_parts(const altar__published_reader_t *r, const altar__pub_pos_t *ends, size_t n) {
  if (!r->t || r->n_assigned != n) return false;
  for (size_t i = 0; i < n; i++)
    if (r->assigned[i].partition != ends[i].partition || strcmp(r->assigned[i].topic, ends[i].topic)) return false;
  return true;
}

int altar__published_read(altar__published_seen_t *s, altar__published_reader_t *r, altar_transport_t *lister,
                          const altar_group_specs_t *groups, const altar_topics_t *topics, altar__pub_pos_t **ppos,
                          size_t *pnpos, int timeout_ms, altar_error_t *err) {
  altar__pub_pos_t *ends = NULL;
  size_t nends = 0;
  int rc = altar__publish_ends(lister, groups, topics, &ends, &nends, err);
  int64_t *from = rc ? NULL : calloc(nends ? nends : 1, sizeof *from);
  size_t left = 0;
  if (!rc && !from) rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  for (size_t i = 0; !rc && i < nends; i++) {
    altar__pub_pos_t *p = find_pos(*ppos, *pnpos, ends[i].topic, ends[i].partition);
    from[i] = p ? p->next : 0;
    left += from[i] < ends[i].next;
  }
  /* A handle is assigned once and reads on; a partition or topic that came
   * since takes a new one, assigned from where reading stopped (a handle
   * is assigned only once). */
  if (!rc && left && !same_parts(r, ends, nends)) {
    altar__published_reader_close(r);
    altar_tp_t *tps = calloc(nends, sizeof *tps);
    r->assigned = calloc(nends, sizeof *r->assigned);
    if (!tps || !r->assigned) rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < nends; i++) {
      altar__pub_pos_t *p = find_pos(*ppos, *pnpos, ends[i].topic, ends[i].partition);
      tps[i] = (altar_tp_t){ends[i].topic, ends[i].partition, p ? p->next : ALTAR_OFFSET_BEGINNING};
      r->assigned[i] = ends[i];
    }
    r->n_assigned = nends;
    if (!rc && !(r->t = altar_transport_open(r->tname, r->props, NULL, err)))
      rc = err && err->code ? err->code : ALTAR_ETRANSPORT;
    if (!rc) rc = altar_transport_assign(r->t, tps, nends, err);
    free(tps);
    if (rc) altar__published_reader_close(r);
  }
  double give_up = altar_mono_s() + timeout_ms / 1000.0;
  while (!rc && left) {
    altar_msg_t *m = NULL;
    altar_error_t ce = {0};
    int crc = altar_transport_consume(r->t, 200, &m, &ce);
    if (crc == ALTAR_EINTEGRITY) continue; /* skipped, as every reader does */
    if (crc) {
      rc = crc;
      if (err) *err = ce;
      break;
    }
    if (!m) {
      /* A record deleted or skipped leaves nothing to read: compare the
       * positions with the ends. */
      altar_tp_t *pos = NULL;
      size_t np = 0;
      altar_error_t pe = {0};
      if (!altar_transport_assignment(r->t, &pos, &np, &pe))
        for (size_t k = 0; k < np; k++)
          for (size_t i = 0; i < nends; i++)
            if (pos[k].partition == ends[i].partition && !strcmp(pos[k].topic, ends[i].topic) &&
                from[i] < ends[i].next && pos[k].offset >= ends[i].next) {
              from[i] = ends[i].next;
              left--;
            }
      free(pos);
      if (left && altar_mono_s() > give_up)
        rc = altar_error_set(err, ALTAR_ETIMEOUT,
                             "reading the ready and dead topics: %zu partition(s) short of their end after %d ms", left,
                             timeout_ms);
      continue;
    }
    for (size_t i = 0; i < nends; i++) {
      if (ends[i].partition != m->partition || strcmp(ends[i].topic, m->topic)) continue;
      if (m->offset >= from[i]) {
        char *id = NULL;
        if (m->value && altar_peek_group_event_id(m->value, m->value_len, &id) == ALTAR_OK)
          rc = altar__published_seen_note(s, id, err);
        free(id);
      }
      bool was_left = from[i] < ends[i].next;
      if (m->offset + 1 > from[i]) from[i] = m->offset + 1;
      if (was_left && from[i] >= ends[i].next) left--;
      break;
    }
    altar_msg_free(m);
  }
  /* Where reading stopped becomes the new position. */
  if (!rc) {
    for (size_t i = 0; i < nends; i++) ends[i].next = from[i];
    free(*ppos);
    *ppos = ends;
    *pnpos = nends;
    ends = NULL;
  }
  free(ends);
  free(from);
  return rc;
}
