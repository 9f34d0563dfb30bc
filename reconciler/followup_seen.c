/* Reading the keys of whole topics, once, for the follow-up check. */
#include "reconciler/followup_seen.h"
#include "altar/transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long one quiet poll waits before the positions are compared with
 * the ends (a skipped damaged record or a cut tail leaves nothing to read). */
#define SEEN_POLL_MS 500

static int add_key(altar__keys_seen_t *s, const void *key, size_t len) {
  /* A key with a NUL byte is no follow-up's (task keys are hex), and a
   * copy of it would be shorter than len. */
  if (!key || !len || memchr(key, 0, len) || altar__hmap_get(&s->keys, key, len)) return ALTAR_OK;
  char *k = malloc(len + 1);
  if (k) {
    memcpy(k, key, len);
    k[len] = 0;
  }
  if (!k || altar__hmap_put(&s->keys, k, len, k)) {
    free(k);
    return ALTAR_ENOMEM;
  }
  return ALTAR_OK;
}

/* Marks done the partitions whose position reached their end. */
static size_t reached(altar_transport_t *t, const altar_topic_info_t *ti, bool *done) {
  altar_tp_t *pos = NULL;
  size_t npos = 0, left = 0;
  altar_error_t e = {0};
  if (altar_transport_assignment(t, &pos, &npos, &e)) pos = NULL, npos = 0;
  for (size_t i = 0; i < ti->n_partitions; i++) {
    for (size_t k = 0; !done[i] && k < npos; k++)
      if (pos[k].partition == ti->partitions[i].partition && pos[k].offset >= ti->partitions[i].end) done[i] = true;
    left += !done[i];
  }
  free(pos);
  return left;
}

static int read_one(altar__keys_seen_t *s, const char *tname, const altar_strmap_t *props, const char *topic,
                    altar_error_t *err) {
  altar_transport_t *t = altar_transport_open(tname, props, NULL, err);
  if (!t) return err && err->code ? err->code : ALTAR_ETRANSPORT;
  altar_topic_list_t *tl = NULL;
  int rc = altar_transport_list_topics(t, topic, 10000, &tl, err);
  if (rc == ALTAR_ENOTFOUND || (!rc && !tl->n_topics)) {
    altar_topic_list_free(tl);
    altar_transport_close(t);
    if (err) memset(err, 0, sizeof *err);
    return ALTAR_OK;
  }
  const altar_topic_info_t *ti = rc ? NULL : &tl->topics[0];
  size_t np = ti ? ti->n_partitions : 0, left = 0;
  altar_tp_t *tps = calloc(np ? np : 1, sizeof *tps);
  bool *done = calloc(np ? np : 1, sizeof *done);
  if (!rc && (!tps || !done)) rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  for (size_t i = 0; !rc && i < np; i++) {
    tps[i] = (altar_tp_t){topic, ti->partitions[i].partition, ALTAR_OFFSET_BEGINNING};
    done[i] = ti->partitions[i].end <= ti->partitions[i].beginning;
    left += !done[i];
  }
  if (!rc && left) rc = altar_transport_assign(t, tps, np, err);
  while (!rc && left) {
    altar_msg_t *m = NULL;
    altar_error_t ce = {0};
    int crc = altar_transport_consume(t, SEEN_POLL_MS, &m, &ce);
    if (crc == ALTAR_EINTEGRITY) continue; /* skipped by the reader, as every reader does */
    if (crc) {
      rc = crc;
      if (err) *err = ce;
      break;
    }
    if (!m) {
      left = reached(t, ti, done);
      continue;
    }
    for (size_t i = 0; i < np; i++) {
      if (ti->partitions[i].partition != m->partition) continue;
      if (m->offset < ti->partitions[i].end && add_key(s, m->key, m->key_len))
        rc = altar_error_set(err, ALTAR_ENOMEM, "out of memory");
      if (!done[i] && m->offset + 1 >= ti->partitions[i].end) {
        done[i] = true;
        left--;
      }
      break;
    }
    altar_msg_free(m);
  }
  free(tps);
  free(done);
  altar_topic_list_free(tl);
  altar_transport_close(t);
  return rc;
}

int altar__keys_seen_read(altar__keys_seen_t *s, const char *tname, const altar_strmap_t *props,
                          const char *const *topics, size_t n, altar_error_t *err) {
  int rc = ALTAR_OK;
  for (size_t i = 0; !rc && i < n; i++) rc = read_one(s, tname, props, topics[i], err);
  return rc;
}

bool altar__keys_seen_has(const altar__keys_seen_t *s, const char *key) {
  return s->keys.n && altar__hmap_get(&s->keys, key, strlen(key)) != NULL;
}

void altar__keys_seen_free(altar__keys_seen_t *s) {
  for (size_t i = 0; i < s->keys.cap; i++)
    if (s->keys.ctrl[i]) free(s->keys.slots[i].val);
  altar__hmap_free(&s->keys);
}
