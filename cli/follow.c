/* Following a job: read ready/dead topics, match the job's groups, show progress. */
#include "follow.h"

#include "altar/codec.h"
#include "fleet_common.h"
#include "producer/job_queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The groups a job will produce: distinct (kind, group key). */

static int cmp_key(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int altar_cli_expect_build(expect_t *x, const altar_group_specs_t *groups, const altar_spec_t *specs, size_t n) {
  memset(x, 0, sizeof *x);
  x->keys = calloc(n, sizeof *x->keys);
  x->done = calloc(n, sizeof *x->done);
  if (!x->keys || !x->done) return -1;
  x->shards_total = n;
  for (size_t i = 0; i < n; i++) {
    const altar_group_spec_t *g = altar_group_specs_find(groups, specs[i].kind);
    if (!g) {
      fprintf(stderr, "altar submit --wait: kind '%s' has no group spec in the configuration, so it never fires\n",
              specs[i].kind);
      return -1;
    }
    altar_handle_t h = {0};
    altar_strmap_copy(&h.labels, &specs[i].labels);
    char *gk = altar_group_by_key(&g->group_by, &h);
    altar_handle_clear(&h);
    if (!gk) return -1;
    size_t kl = strlen(specs[i].kind) + strlen(gk) + 2;
    char *k = malloc(kl);
    if (!k) {
      free(gk);
      return -1;
    }
    snprintf(k, kl, "%s\x1f%s", specs[i].kind, gk);
    free(gk);
    x->keys[x->n++] = k;
  }
  /* Sorted and unique, so each arriving group event is one binary search. */
  qsort(x->keys, x->n, sizeof *x->keys, cmp_key);
  size_t u = 0;
  for (size_t i = 0; i < x->n; i++) {
    if (u && !strcmp(x->keys[u - 1], x->keys[i])) free(x->keys[i]);
    else x->keys[u++] = x->keys[i];
  }
  x->n = u;
  return 0;
}

void altar_cli_expect_clear(expect_t *x) {
  for (size_t i = 0; i < x->n; i++) free(x->keys[i]);
  free(x->keys);
  free(x->done);
}

static void progress(const expect_t *x, double t0, bool tty, bool final) {
  double el = (double)time(NULL) - t0;
  if (tty) {
    char bar[31];
    size_t fill = x->shards_total ? (x->shards_done + x->shards_failed) * 30 / x->shards_total : 30;
    for (size_t i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    fprintf(stderr, "\r[%s] %zu/%zu shards, %zu failed, groups %zu/%zu, %02d:%02d%s", bar, x->shards_done,
            x->shards_total, x->shards_failed, x->fired + x->dead, x->n, (int)el / 60, (int)el % 60, final ? "\n" : "");
  }
}

int altar_cli_follow(altar_config_t *cfg, const char *run_id, expect_t *x, long timeout_s, altar_cli_group_cb cb,
                     void *cb_ctx) {
  altar_transport_t *t = altar_cli_open_transport(cfg, NULL);
  if (!t) return 2;
  const char *topics[] = {cfg->topics.ready, cfg->topics.dead};
  altar_tp_t tps[256];
  size_t ntp = 0;
  for (size_t k = 0; k < 2; k++) {
    altar_topic_list_t *tl = NULL;
    altar_error_t err = {0};
    if (altar_transport_list_topics(t, topics[k], 10000, &tl, &err) == ALTAR_OK && tl->n_topics)
      for (size_t p = 0; p < tl->topics[0].n_partitions && ntp < 256; p++)
        tps[ntp++] = (altar_tp_t){topics[k], tl->topics[0].partitions[p].partition, ALTAR_OFFSET_BEGINNING};
    altar_topic_list_free(tl);
  }
  altar_error_t err = {0};
  if (!ntp || altar_transport_assign(t, tps, ntp, &err)) {
    fprintf(stderr, "altar submit --wait: cannot read the ready/dead topics: %s\n", ntp ? err.msg : "no partitions");
    altar_transport_close(t);
    return 2;
  }
  bool tty = isatty(2);
  double t0 = (double)time(NULL);
  size_t settled = 0;
  int rc = 0;
  while (settled < x->n) {
    if (timeout_s > 0 && (double)time(NULL) - t0 > (double)timeout_s) {
      progress(x, t0, tty, true);
      fprintf(stderr, "altar submit --wait: timed out with %zu of %zu group(s) settled\n", settled, x->n);
      rc = 3;
      break;
    }
    altar_msg_t *m = NULL;
    if (altar_transport_consume(t, 500, &m, &err) || !m) {
      progress(x, t0, tty, false);
      continue;
    }
    altar_group_event_t g = {0};
    altar_error_t de = {0};
    if (m->value && altar_decode_group(m->value, m->value_len, &g, &de) == ALTAR_OK && g.n_shards) {
      const char *jid = altar_strmap_get(&g.shards[0].labels, ALTAR_JOB_ID_LABEL);
      size_t kl = strlen(g.kind) + strlen(g.group_key) + 2;
      char *k = malloc(kl);
      if (k && jid && !strcmp(jid, run_id)) {
        snprintf(k, kl, "%s\x1f%s", g.kind, g.group_key);
        char **hit = x->n ? bsearch(&k, x->keys, x->n, sizeof *x->keys, cmp_key) : NULL;
        size_t i = hit ? (size_t)(hit - x->keys) : 0;
        if (hit && !x->done[i]) {
          x->done[i] = true;
          settled++;
          if (g.event == ALTAR_GROUP_FIRED) {
            x->fired++;
            x->shards_done += g.n_shards;
          } else {
            x->dead++;
            x->shards_failed += g.n_shards;
            rc = 1;
          }
          if (cb) cb(cb_ctx, g.event == ALTAR_GROUP_FIRED ? "fired" : "dead_lettered", g.kind, g.group_key, g.n_shards, g.event_id);
          else if (!tty)
            fprintf(stderr, "group %s %s:%s (%zu shards) [%zu/%zu groups]\n",
                    g.event == ALTAR_GROUP_FIRED ? "fired" : "dead-lettered", g.kind, g.group_key, g.n_shards, settled,
                    x->n);
        }
      }
      free(k);
    }
    altar_group_event_clear(&g);
    altar_msg_free(m);
    progress(x, t0, tty, settled == x->n);
  }
  altar_transport_close(t);
  return rc;
}

