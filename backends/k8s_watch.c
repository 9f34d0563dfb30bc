/* The Job watch: list once, then watch from the list's resourceVersion on a
 * thread of its own, so the API server never finds altar a slow reader and
 * poll answers from memory. A dropped connection resumes from the last
 * version seen (bookmarks keep it fresh while nothing changes); an expired
 * version (410 Gone) costs a new list, and so do repeated failures of any
 * other kind, since a server that keeps refusing may have lost what we
 * would resume from. A deleted Job stays in the map as a tombstone for
 * TOMBSTONE_TTL_S (poll reports it container_missing), then leaves it.
 * Every byte of the stream is untrusted: lines are bounded, events
 * validated, and a bad one skipped. */
#include "k8s_http_int.h"
#include "k8s_jobmap.h"
#include "k8s_json_trim.h"

#include "altar/clock.h"
#include "altar/grow.h"
#include "core/unconst.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One event is one Job (etcd keeps objects under 1.5 MiB by default). */
#define WATCH_LINE_MAX (4u << 20)
/* The server ends each watch after this long; we resume from where it was. */
#define WATCH_TIMEOUT_S 300
/* Backoff between failed lists or connections. */
#define WATCH_BACKOFF_FIRST_MS 200
#define WATCH_BACKOFF_MAX_MS 5000
#define RV_MAX 64
/* Failed watch requests in a row (refused, reset, 5xx: anything but a
 * clean end or 410) after which the watch lists again. */
#define WATCH_FAILS_BEFORE_RELIST 3
/* How long a deleted Job's entry stays: long past any poll of it; after
 * that a poll of the name costs one GET, which also says it is gone. */
#define TOMBSTONE_TTL_S 300.0

/* Active (pending or running) Jobs of one altar.dev/pool label. */
typedef struct pool_count {
  char label[ALTAR_K8S_LABEL_MAX];
  int64_t n;
} pool_count_t;

/* A deleted Job's name and when, oldest first. */
typedef struct tombstone {
  char *name;
  double at;
} tombstone_t;

struct altar__k8s_watch {
  altar__k8s_http_t *rt;
  char *ns, *selector;
  pthread_t thread;
  bool started;
  pthread_mutex_t mu; /* everything below but the stream state */
  pthread_cond_t cv;  /* map changes, stop */
  altar__k8s_jobmap_t map;
  uint32_t list_epoch;
  pool_count_t *pools; /* a handful: one per pool label seen */
  size_t npools, cap_pools;
  tombstone_t *tombs; /* a queue: [tomb_head, ntombs) */
  size_t tomb_head, ntombs, cap_tombs;
  double tombstone_ttl_s;
  bool synced;
  uint64_t gen;
  altar_k8s_watch_stats_t stats;
  char forced_rv[RV_MAX]; /* test hook: resume from this version */
  atomic_bool stop, drop;
  /* Stream state: the watch thread's alone. */
  CURL *cur; /* the watch request in progress (NULL when fed by a test) */
  char rv[RV_MAX];
  altar_buf_t line;
  bool expired, ended, bad_stream;
  bool got_line; /* the request delivered an event or a bookmark */
};

static bool rv_ok(const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n >= RV_MAX) return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_'))
      return false;
  }
  return true;
}

static bool name_ok(const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n > 253) return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  }
  return true;
}

static void changed_locked(altar_k8s_watch_t *w) {
  w->gen++;
  pthread_cond_broadcast(&w->cv);
}

static bool active(const altar__k8s_jobent_t *e) {
  return e->seen == ALTAR_K8S_SEEN_LIVE && (e->state == ALTAR_STATE_PENDING || e->state == ALTAR_STATE_RUNNING);
}

/* Adds delta to e's pool's active count when e is active: called with -1
 * before an entry changes and +1 after, so capacity reads a count rather
 * than scanning every Job. A new label that cannot be stored (out of
 * memory) is not counted. */
static void count(altar_k8s_watch_t *w, const altar__k8s_jobent_t *e, int delta) {
  if (!e || !active(e)) return;
  size_t i = 0;
  while (i < w->npools && strcmp(w->pools[i].label, e->pool)) i++;
  if (i == w->npools) {
    if (delta < 0 || ALTAR_GROW(w->pools, w->cap_pools, w->npools + 1)) return;
    memset(&w->pools[i], 0, sizeof w->pools[i]);
    memcpy(w->pools[i].label, e->pool, sizeof w->pools[i].label);
    w->npools++;
  }
  w->pools[i].n += delta;
}

/* Marks e deleted now and queues its tombstone. */
static void bury(altar_k8s_watch_t *w, altar__k8s_jobent_t *e) {
  e->seen = ALTAR_K8S_SEEN_DELETED;
  e->deleted_at = altar_mono_s();
  if (w->tomb_head > 0 && w->tomb_head + w->ntombs == w->cap_tombs) {
    memmove(w->tombs, w->tombs + w->tomb_head, w->ntombs * sizeof *w->tombs);
    w->tomb_head = 0;
  }
  char *name = strdup(e->name);
  if (!name || ALTAR_GROW(w->tombs, w->cap_tombs, w->tomb_head + w->ntombs + 1)) {
    free(name); /* out of memory: the entry stays, as it did before removal existed */
    return;
  }
  w->tombs[w->tomb_head + w->ntombs++] = (tombstone_t){name, e->deleted_at};
}

/* Drops the entries of Jobs deleted more than the TTL ago. A name made
 * live again since keeps its entry (its deleted_at no longer matches). */
static void prune_locked(altar_k8s_watch_t *w, double now) {
  while (w->ntombs && w->tombs[w->tomb_head].at <= now - w->tombstone_ttl_s) {
    tombstone_t *t = &w->tombs[w->tomb_head];
    altar__k8s_jobent_t *e = altar__k8s_jobmap_get(&w->map, t->name);
    if (e && e->seen == ALTAR_K8S_SEEN_DELETED && e->deleted_at == t->at) altar__k8s_jobmap_remove(&w->map, t->name);
    free(t->name);
    w->tomb_head++;
    w->ntombs--;
  }
  if (!w->ntombs) w->tomb_head = 0;
}

/* Applies one Job object (from a list page or an event). false when the
 * object is malformed. */
static bool apply(altar_k8s_watch_t *w, const json_t *job, bool deleted, bool listing) {
  const json_t *meta = json_object_get(job, "metadata");
  const char *name = json_string_value(json_object_get(meta, "name"));
  const char *uid = json_string_value(json_object_get(meta, "uid"));
  const char *pool = json_string_value(json_object_get(json_object_get(meta, "labels"), ALTAR_K8S_POOL_LABEL));
  if (!name_ok(name) || !uid || strlen(uid) >= ALTAR_K8S_UID_MAX) return false;
  if (pool && strlen(pool) >= ALTAR_K8S_LABEL_MAX) pool = NULL;
  altar_state_t state = altar__k8s_job_state_from_json(job);
  double deadline_at = altar__k8s_job_deadline_from_json(job);
  altar_k8s_seen_t seen = deleted ? ALTAR_K8S_SEEN_DELETED : ALTAR_K8S_SEEN_LIVE;
  pthread_mutex_lock(&w->mu);
  altar__k8s_jobent_t *e = altar__k8s_jobmap_get(&w->map, name);
  /* Our own create is newer than any event of another uid still on its way. */
  if (e && !e->confirmed && e->uid[0] && strcmp(e->uid, uid)) {
    pthread_mutex_unlock(&w->mu);
    return true;
  }
  if (!e) e = altar__k8s_jobmap_put(&w->map, name);
  if (e) {
    bool differs = e->seen != seen || e->state != state || strcmp(e->uid, uid);
    count(w, e, -1);
    memcpy(e->uid, uid, strlen(uid) + 1);
    snprintf(e->pool, sizeof e->pool, "%s", pool ? pool : "");
    e->state = state;
    e->deadline_at = deadline_at;
    if (deleted && e->seen != ALTAR_K8S_SEEN_DELETED) bury(w, e);
    e->seen = seen;
    e->confirmed = true;
    count(w, e, +1);
    if (listing) e->listed = w->list_epoch;
    if (!listing) {
      w->stats.events++;
      if (deleted) w->stats.deleted++;
    }
    if (differs) changed_locked(w);
  }
  prune_locked(w, altar_mono_s());
  pthread_mutex_unlock(&w->mu);
  return e != NULL;
}

/* ---- the list ---- */

typedef struct list_ctx {
  altar_k8s_watch_t *w;
  char rv[RV_MAX];
} list_ctx_t;

static int on_page(void *ctx, const json_t *list, altar_error_t *err) {
  (void)err;
  list_ctx_t *lc = ctx;
  const char *rv = json_string_value(json_object_get(json_object_get(list, "metadata"), "resourceVersion"));
  if (rv_ok(rv)) snprintf(lc->rv, sizeof lc->rv, "%s", rv);
  size_t i;
  json_t *item;
  json_array_foreach(json_object_get(list, "items"), i, item) {
    if (!apply(lc->w, item, false, true)) {
      pthread_mutex_lock(&lc->w->mu);
      lc->w->stats.bad_events++;
      pthread_mutex_unlock(&lc->w->mu);
    }
  }
  return ALTAR_OK;
}

static int list_all(altar_k8s_watch_t *w, altar_error_t *err) {
  pthread_mutex_lock(&w->mu);
  if (++w->list_epoch == 0) w->list_epoch = 1; /* 0 is "never listed" */
  pthread_mutex_unlock(&w->mu);
  char coll[400], what[300];
  snprintf(coll, sizeof coll, "/apis/batch/v1/namespaces/%s/jobs", w->ns);
  snprintf(what, sizeof what, "list jobs in namespace %s (watch)", w->ns);
  list_ctx_t lc = {.w = w};
  int rc = altar__k8s_http_list_paged(w->rt, coll, w->selector, NULL, what, on_page, &lc, err);
  if (!rc && !lc.rv[0]) rc = altar_error_set(err, ALTAR_EDECODE, "%s: the list has no resourceVersion", what);
  if (rc) return rc;
  pthread_mutex_lock(&w->mu);
  /* A Job the consistent list lacks was deleted while nobody watched. */
  for (size_t i = 0; i < w->map.cap; i++) {
    altar__k8s_jobent_t *e = &w->map.slots[i];
    if (e->name && e->confirmed && e->listed != w->list_epoch && e->seen == ALTAR_K8S_SEEN_LIVE) {
      count(w, e, -1);
      bury(w, e);
    }
  }
  w->stats.lists++;
  w->synced = true;
  changed_locked(w);
  pthread_mutex_unlock(&w->mu);
  memcpy(w->rv, lc.rv, sizeof w->rv);
  return ALTAR_OK;
}

/* ---- the stream ---- */

/* One line of the stream: {"type": …, "object": …}. */
static void on_line(altar_k8s_watch_t *w, char *p, size_t n) {
  n = altar__k8s_json_drop_member(p, n, "managedFields"); /* never read; skipped as text */
  json_t *ev = json_loadb(p, n, 0, NULL);
  const char *type = json_string_value(json_object_get(ev, "type"));
  const json_t *obj = json_object_get(ev, "object");
  bool ok = type && json_is_object(obj);
  if (ok && !strcmp(type, "ERROR")) {
    /* The server ends the stream after an ERROR; 410 means our version is
     * older than what it keeps, and only a list can catch up. */
    json_int_t code = json_integer_value(json_object_get(obj, "code"));
    if (code == 410) w->expired = true;
    w->ended = true;
  } else if (ok) {
    const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    bool bookmark = !strcmp(type, "BOOKMARK");
    bool deleted = !strcmp(type, "DELETED");
    if (!bookmark && !deleted && strcmp(type, "ADDED") && strcmp(type, "MODIFIED")) ok = false;
    else if (!bookmark) ok = apply(w, obj, deleted, false);
    if (ok && rv_ok(rv)) memcpy(w->rv, rv, strlen(rv) + 1);
    if (ok) w->got_line = true; /* a working stream (an ERROR line is no sign of one) */
    if (ok && bookmark) {
      pthread_mutex_lock(&w->mu);
      w->stats.bookmarks++;
      pthread_mutex_unlock(&w->mu);
    }
  }
  if (!ok) {
    pthread_mutex_lock(&w->mu);
    w->stats.bad_events++;
    pthread_mutex_unlock(&w->mu);
  }
  json_decref(ev);
}

static size_t on_stream(char *p, size_t size, size_t nmemb, void *ud) {
  altar_k8s_watch_t *w = ud;
  size_t len = size * nmemb;
  long code = 200;
  if (w->cur) curl_easy_getinfo(w->cur, CURLINFO_RESPONSE_CODE, &code);
  if (code != 200) return len; /* an error's Status body is no event stream */
  if (w->line.len + len > WATCH_LINE_MAX) {
    w->bad_stream = true;
    return 0;
  }
  if (altar_buf_append(&w->line, p, len)) return 0;
  size_t start = 0;
  char *buf = (char *)w->line.data;
  for (size_t i = w->line.len - len; i < w->line.len; i++) {
    if (buf[i] != '\n') continue;
    if (i > start) on_line(w, buf + start, i - start);
    start = i + 1;
    if (w->ended) break;
  }
  if (w->ended) return 0;
  memmove(buf, buf + start, w->line.len - start);
  w->line.len -= start;
  return len;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d) {
  (void)a, (void)b, (void)c, (void)d;
  altar_k8s_watch_t *w = ud;
  return atomic_load(&w->stop) || atomic_load(&w->drop);
}

/* One watch request from w->rv until the server or we end it. */
static int watch_once(altar_k8s_watch_t *w, altar_error_t *err) {
  bool failed = false;
  struct curl_slist *hdrs = altar__k8s_http_headers(w->rt, false, &failed, err);
  if (failed) return err->code ? err->code : ALTAR_ECONFIG;
  CURL *c = curl_easy_init();
  char *esel = c && w->selector ? curl_easy_escape(c, w->selector, 0) : NULL;
  size_t ulen = strlen(w->rt->cfg.server) + strlen(w->ns) + (esel ? strlen(esel) : 0) + RV_MAX + 200;
  char *url = malloc(ulen);
  if (!c || !url || (w->selector && !esel)) {
    curl_free(esel);
    free(url);
    if (c) curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    return altar_error_set(err, ALTAR_ENOMEM, "watch jobs: out of memory");
  }
  snprintf(url, ulen,
           "%s/apis/batch/v1/namespaces/%s/jobs?watch=1&allowWatchBookmarks=true&resourceVersion=%s"
           "&timeoutSeconds=%d%s%s",
           w->rt->cfg.server, w->ns, w->rv, WATCH_TIMEOUT_S, esel ? "&labelSelector=" : "", esel ? esel : "");
  curl_free(esel);
  altar_buf_reset(&w->line);
  w->expired = w->ended = w->bad_stream = w->got_line = false;
  altar__k8s_resp_t r = {.retry_after_s = -1, .max = 64u << 10};
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_stream);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, w);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, altar__k8s_http_on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, w);
  /* A dead peer is noticed by keepalive, not by a transfer timeout. */
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 20L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 5L);
  altar__k8s_http_tls(w->rt, c, 0);
  w->cur = c;
  CURLcode cc = curl_easy_perform(c);
  w->cur = NULL;
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  int rc = ALTAR_OK;
  if (status == 410) {
    w->expired = true;
  } else if (status && status != 200) {
    altar_buf_reset(&r.body);
    rc = altar_error_set(err, ALTAR_EBACKEND, "watch jobs in namespace %s: HTTP %ld", w->ns, status);
  } else if (w->bad_stream) {
    /* The same event would come again from the same version: list instead. */
    w->expired = true;
    rc = altar_error_set(err, ALTAR_ETOOBIG, "watch jobs: an event larger than %u bytes", WATCH_LINE_MAX);
  } else if (w->ended && !w->expired) {
    rc = altar_error_set(err, ALTAR_EBACKEND, "watch jobs in namespace %s: the server ended the stream with an error",
                         w->ns);
  } else if (cc != CURLE_OK && !w->ended && !atomic_load(&w->stop) && !atomic_load(&w->drop)) {
    rc = altar_error_set(err, ALTAR_EBACKEND, "watch jobs in namespace %s: %s", w->ns, curl_easy_strerror(cc));
  }
  altar_buf_free(&r.body);
  curl_easy_cleanup(c);
  curl_slist_free_all(hdrs);
  free(url);
  return rc;
}

/* Sleeps up to ms, waking early on close. */
static void pause_ms(altar_k8s_watch_t *w, long ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&w->mu);
  while (!atomic_load(&w->stop))
    if (pthread_cond_timedwait(&w->cv, &w->mu, &ts) == ETIMEDOUT) break;
  pthread_mutex_unlock(&w->mu);
}

static void *run(void *ud) {
  altar_k8s_watch_t *w = ud;
  bool need_list = true;
  long backoff = WATCH_BACKOFF_FIRST_MS;
  int fails = 0; /* failed watch requests in a row */
  while (!atomic_load(&w->stop)) {
    altar_error_t err = {0};
    if (need_list) {
      if (list_all(w, &err)) {
        pause_ms(w, backoff);
        backoff = backoff * 2 < WATCH_BACKOFF_MAX_MS ? backoff * 2 : WATCH_BACKOFF_MAX_MS;
        continue;
      }
      need_list = false;
      fails = 0;
    } else {
      pthread_mutex_lock(&w->mu);
      w->stats.reconnects++;
      pthread_mutex_unlock(&w->mu);
    }
    int rc = watch_once(w, &err);
    atomic_store(&w->drop, false);
    pthread_mutex_lock(&w->mu);
    if (w->forced_rv[0]) {
      memcpy(w->rv, w->forced_rv, sizeof w->rv);
      w->forced_rv[0] = '\0';
    }
    if (w->expired) w->stats.expired++;
    pthread_mutex_unlock(&w->mu);
    /* A request that delivered events was a working watch, whatever ended it. */
    fails = rc && !w->got_line ? fails + 1 : 0;
    if (w->expired) {
      need_list = true;
      backoff = WATCH_BACKOFF_FIRST_MS;
    } else if (rc) {
      pause_ms(w, backoff);
      backoff = backoff * 2 < WATCH_BACKOFF_MAX_MS ? backoff * 2 : WATCH_BACKOFF_MAX_MS;
      if (fails >= WATCH_FAILS_BEFORE_RELIST) {
        need_list = true;
        pthread_mutex_lock(&w->mu);
        w->stats.failure_lists++;
        pthread_mutex_unlock(&w->mu);
      }
    } else {
      backoff = WATCH_BACKOFF_FIRST_MS;
    }
  }
  return NULL;
}

int altar__k8s_watch_open(altar__k8s_http_t *rt, const char *ns, const char *selector, altar_k8s_watch_t **pw,
                          altar_error_t *err) {
  *pw = NULL;
  altar_k8s_watch_t *w = calloc(1, sizeof *w);
  if (!w || !(w->ns = strdup(ns)) || (selector && !(w->selector = strdup(selector)))) {
    if (w) free(w->ns);
    free(w);
    return altar_error_set(err, ALTAR_ENOMEM, "watch jobs: out of memory");
  }
  w->rt = rt;
  w->tombstone_ttl_s = TOMBSTONE_TTL_S;
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  atomic_init(&w->stop, false);
  atomic_init(&w->drop, false);
  if (pthread_create(&w->thread, NULL, run, w)) {
    altar__k8s_watch_close(w);
    return altar_error_set(err, ALTAR_EBACKEND, "watch jobs: cannot start a thread");
  }
  w->started = true;
  *pw = w;
  return ALTAR_OK;
}

void altar__k8s_watch_close(altar_k8s_watch_t *w) {
  if (!w) return;
  atomic_store(&w->stop, true);
  pthread_mutex_lock(&w->mu);
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  if (w->started) pthread_join(w->thread, NULL);
  altar__k8s_jobmap_clear(&w->map);
  for (size_t i = 0; i < w->ntombs; i++) free(w->tombs[w->tomb_head + i].name);
  free(w->tombs);
  free(w->pools);
  altar_buf_free(&w->line);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  free(w->ns);
  free(w->selector);
  free(w);
}

bool altar__k8s_watch_synced(altar_k8s_watch_t *w) {
  pthread_mutex_lock(&w->mu);
  bool s = w->synced;
  pthread_mutex_unlock(&w->mu);
  return s;
}

static void lookup_locked(altar_k8s_watch_t *w, const char *const *names, size_t n, altar_k8s_watch_view_t *views) {
  for (size_t i = 0; i < n; i++) {
    const altar__k8s_jobent_t *e = altar__k8s_jobmap_get(&w->map, names[i]);
    views[i].seen = e ? e->seen : ALTAR_K8S_SEEN_UNKNOWN;
    views[i].state = e ? e->state : ALTAR_STATE_PENDING;
    views[i].deadline_at = e ? e->deadline_at : 0;
  }
}

void altar__k8s_watch_lookup(altar_k8s_watch_t *w, const char *const *names, size_t n, altar_k8s_watch_view_t *views) {
  pthread_mutex_lock(&w->mu);
  lookup_locked(w, names, n, views);
  pthread_mutex_unlock(&w->mu);
}

int altar__k8s_watch_note(altar_k8s_watch_t *w, const char *name, const char *uid, const char *pool,
                          altar_state_t state) {
  if (!name_ok(name) || !uid || !*uid || strlen(uid) >= ALTAR_K8S_UID_MAX) return ALTAR_EINVAL;
  if (pool && strlen(pool) >= ALTAR_K8S_LABEL_MAX) pool = NULL;
  pthread_mutex_lock(&w->mu);
  altar__k8s_jobent_t *e = altar__k8s_jobmap_get(&w->map, name);
  int rc = ALTAR_OK;
  if (!e || strcmp(e->uid, uid)) {
    if (!e) e = altar__k8s_jobmap_put(&w->map, name);
    if (!e) rc = ALTAR_ENOMEM;
    else {
      count(w, e, -1);
      memcpy(e->uid, uid, strlen(uid) + 1);
      e->state = state;
      e->deadline_at = 0; /* until its first event */
      e->seen = ALTAR_K8S_SEEN_LIVE;
      e->confirmed = false;
      snprintf(e->pool, sizeof e->pool, "%s", pool ? pool : "");
      count(w, e, +1);
      changed_locked(w);
    }
  }
  pthread_mutex_unlock(&w->mu);
  return rc;
}

uint64_t altar__k8s_watch_generation(altar_k8s_watch_t *w) {
  pthread_mutex_lock(&w->mu);
  uint64_t g = w->gen;
  pthread_mutex_unlock(&w->mu);
  return g;
}

int altar__k8s_watch_wait(altar_k8s_watch_t *w, uint64_t *pgen, int timeout_ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  long ms = timeout_ms > 0 ? timeout_ms : 0;
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&w->mu);
  while (w->gen == *pgen && !atomic_load(&w->stop))
    if (pthread_cond_timedwait(&w->cv, &w->mu, &ts) == ETIMEDOUT) break;
  int changed = w->gen != *pgen;
  *pgen = w->gen;
  pthread_mutex_unlock(&w->mu);
  return changed;
}

int64_t altar__k8s_watch_active_lookup(altar_k8s_watch_t *w, const char *pool_label, const char *const *names, size_t n,
                                       altar_k8s_watch_view_t *views) {
  int64_t active = 0;
  pthread_mutex_lock(&w->mu);
  for (size_t i = 0; i < w->npools; i++)
    if (!strcmp(w->pools[i].label, pool_label)) active = w->pools[i].n;
  lookup_locked(w, names, n, views);
  pthread_mutex_unlock(&w->mu);
  return active;
}

int64_t altar__k8s_watch_active(altar_k8s_watch_t *w, const char *pool_label) {
  return altar__k8s_watch_active_lookup(w, pool_label, NULL, 0, NULL);
}

size_t altar__k8s_watch_size(altar_k8s_watch_t *w) {
  pthread_mutex_lock(&w->mu);
  size_t n = w->map.n;
  pthread_mutex_unlock(&w->mu);
  return n;
}

void altar__k8s_watch_stats(altar_k8s_watch_t *w, altar_k8s_watch_stats_t *pstats) {
  pthread_mutex_lock(&w->mu);
  *pstats = w->stats;
  pthread_mutex_unlock(&w->mu);
}

altar_k8s_watch_t *altar__k8s_watch_test_new(void) {
  altar_k8s_watch_t *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  atomic_init(&w->stop, false);
  atomic_init(&w->drop, false);
  w->synced = true;
  w->tombstone_ttl_s = TOMBSTONE_TTL_S;
  return w;
}

void altar__k8s_watch_test_tombstone_ttl(altar_k8s_watch_t *w, double seconds) {
  pthread_mutex_lock(&w->mu);
  w->tombstone_ttl_s = seconds;
  prune_locked(w, altar_mono_s());
  pthread_mutex_unlock(&w->mu);
}

int altar__k8s_watch_test_feed(altar_k8s_watch_t *w, const char *p, size_t n, bool *pexpired) {
  size_t took = on_stream(ALTAR__UNCONST(p), 1, n, w);
  *pexpired = w->expired;
  return took == n ? 0 : -1;
}

void altar__k8s_watch_test_resume_from(altar_k8s_watch_t *w, const char *rv) {
  pthread_mutex_lock(&w->mu);
  if (rv_ok(rv)) snprintf(w->forced_rv, sizeof w->forced_rv, "%s", rv);
  pthread_mutex_unlock(&w->mu);
  atomic_store(&w->drop, true);
}
