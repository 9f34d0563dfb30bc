/* msgpack forms of the messages: job (jobs topic), status event (status
 * topic), group event (ready/dead topics) and the ledger record; plus spec
 * on its own. Each decoder pre-checks the bytes (codec_msgpack_read.c),
 * unpacks them into a zone, then walks the tree by field. */
#include "core/codec_int.h"
#include "core/unconst.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W_VOID(call) ((call), 0)

static const char *const msg_type_names[] = {"spec", "job", "status", "group", "record", "control", "group_page"};

int altar_msg_type_parse(const char *name, altar_msg_type_t *ptype) {
  for (int i = 0; name && i < 7; i++) {
    if (!strcmp(name, msg_type_names[i])) {
      *ptype = (altar_msg_type_t)i;
      return ALTAR_OK;
    }
  }
  return ALTAR_EINVAL;
}

const char *altar_msg_type_name(altar_msg_type_t t) { return (unsigned)t < 7 ? msg_type_names[t] : "unknown"; }

/* ---- shared decode/encode frame ---- */

typedef int (*rd_top_fn)(altar__rd_t *r, const msgpack_object *o, void *target);

static int decode_top(const void *data, size_t len, const char *root, rd_top_fn fn, void *target, altar_error_t *err) {
  altar__mp_doc_t u;
  int rc = altar__mp_parse(data, len, root, &u, err);
  if (!rc) {
    altar__rd_t r = {.err = err, .doc = &u};
    altar__path_init(&r.path, root);
    rc = fn(&r, &u.root, target);
  }
  altar__mp_doc_free(&u);
  return rc;
}

typedef int (*wr_top_fn)(altar__wr_t *w, const void *msg);

/* Encodes one message; on failure leaves out as it was. */
static int encode_top(wr_top_fn fn, const void *msg, const char *root, altar_buf_t *out, altar_error_t *err) {
  if (!msg || !out) return altar_error_set(err, ALTAR_EINVAL, "%s: NULL argument", root);
  altar__wr_t w;
  size_t start = out->len;
  altar__wr_init(&w, out, root, err);
  int rc = altar__wr_finish(&w, start, fn(&w, msg));
  if (rc) out->len = start;
  return rc;
}

/* The value under string key `key` of map o, or NULL. */
static const msgpack_object *map_get(const msgpack_object *o, const char *key) {
  size_t n = strlen(key);
  for (size_t i = 0; i < o->via.map.size; i++) {
    const msgpack_object_kv *kv = &o->via.map.ptr[i];
    if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == n && !memcmp(kv->key.via.str.ptr, key, n))
      return &kv->val;
  }
  return NULL;
}

/* Checks "type" when present: a status event fed to the job decoder is an
 * error, not a job with defaults. */
static int rd_type(altar__rd_t *r, const msgpack_object *v, const char *want) {
  if (v->type != MSGPACK_OBJECT_STR) return altar__rd_fail(r, ALTAR_EDECODE, "expected string");
  size_t n = strlen(want);
  if (v->via.str.size != n || memcmp(v->via.str.ptr, want, n)) {
    char what[64];
    snprintf(what, sizeof what, "expected \"%s\"", want);
    return altar__rd_fail(r, ALTAR_EDECODE, what);
  }
  return ALTAR_OK;
}

/* Checks "type" before any other field, so a message of another type is
 * named as such rather than failing on whichever field differs first. */
static int rd_type_first(altar__rd_t *r, const msgpack_object *o, const char *want) {
  if (o->type != MSGPACK_OBJECT_MAP) return ALTAR_OK; /* rd_struct reports it */
  const msgpack_object *v = map_get(o, "type");
  if (!v) return ALTAR_OK;
  size_t old = altar__path_key(&r->path, "type", 4);
  int rc = rd_type(r, v, want);
  altar__path_pop(&r->path, old);
  return rc;
}

/* Schema version: an integer >= 1. Newer versions are read as far as we
 * understand them (unknown keys ignored). */
static int rd_version(altar__rd_t *r, const msgpack_object *v, int64_t *pv) {
  int rc = altar__rd_i64(r, v, pv);
  if (rc) return rc;
  if (*pv < 1) return altar__rd_fail(r, ALTAR_EDECODE, "schema version must be >= 1");
  return ALTAR_OK;
}

static int64_t version_or_default(int64_t v) { return v ? v : ALTAR_SCHEMA_VERSION; }

/* 0 (a zeroed struct) means the current version. */
static int wr_version(altar__wr_t *w, int64_t v) {
  if (v < 0) return altar__wr_fail(w, ALTAR_EINVAL, "schema version must be >= 1");
  altar__wr_i64(w, version_or_default(v));
  return ALTAR_OK;
}

/* ---- spec ---- */

static int wr_spec_top(altar__wr_t *w, const void *msg) { return altar__wr_spec(w, msg); }

int altar_encode_spec(const altar_spec_t *spec, altar_buf_t *out, altar_error_t *err) {
  return encode_top(wr_spec_top, spec, "spec", out, err);
}

static int rd_spec_top(altar__rd_t *r, const msgpack_object *o, void *target) { return altar__rd_spec(r, o, target); }

int altar_decode_spec(const void *data, size_t len, altar_spec_t *pout, altar_error_t *err) {
  memset(pout, 0, sizeof *pout);
  return decode_top(data, len, "spec", rd_spec_top, pout, err);
}

/* ---- job ---- */

void altar_job_msg_clear(altar_job_msg_t *m) {
  if (!m) return;
  free(m->job_id);
  altar_spec_clear(&m->spec);
  memset(m, 0, sizeof *m);
}

static int wr_job(altar__wr_t *w, const void *msg) {
  const altar_job_msg_t *m = msg;
  altar__wr_map(w, 7);
  ALTAR__WR_FIELD(w, "attempt", W_VOID(altar__wr_i64(w, m->attempt)));
  ALTAR__WR_FIELD(w, "avoid_hosts", altar__wr_strv(w, m->spec.avoid_hosts, m->spec.n_avoid_hosts));
  ALTAR__WR_FIELD(w, "job_id", altar__wr_str(w, m->job_id));
  ALTAR__WR_FIELD(w, "spec", altar__wr_spec(w, &m->spec));
  ALTAR__WR_FIELD(w, "submitted_at", altar__wr_f64(w, m->submitted_at));
  ALTAR__WR_FIELD(w, "type", altar__wr_str(w, "job"));
  ALTAR__WR_FIELD(w, "v", wr_version(w, m->v));
  return ALTAR_OK;
}

int altar_encode_job(const altar_job_msg_t *m, altar_buf_t *out, altar_error_t *err) {
  return encode_top(wr_job, m, "job", out, err);
}

enum { J_ATTEMPT, J_AVOID_HOSTS, J_JOB_ID, J_SPEC, J_SUBMITTED_AT, J_TYPE, J_V };
static const char *const job_keys[] = {"attempt", "avoid_hosts", "job_id", "spec", "submitted_at", "type", "v", NULL};

static int rd_job_field(altar__rd_t *r, void *ctx, int idx, const msgpack_object *v) {
  altar_job_msg_t *m = ctx;
  switch (idx) {
  case J_ATTEMPT: return altar__rd_i64(r, v, &m->attempt);
  case J_AVOID_HOSTS:
    /* kept on the spec (placement), outside its identity-bearing encoding */
    return altar__rd_strv(r, v, &m->spec.avoid_hosts, &m->spec.n_avoid_hosts);
  case J_JOB_ID:
    free(m->job_id);
    m->job_id = NULL;
    return altar__rd_str(r, v, &m->job_id);
  case J_SPEC: {
    char **hosts = m->spec.avoid_hosts;
    size_t n = m->spec.n_avoid_hosts;
    int rc = altar__rd_spec(r, v, &m->spec);
    m->spec.avoid_hosts = hosts;
    m->spec.n_avoid_hosts = n;
    return rc;
  }
  case J_SUBMITTED_AT: return altar__rd_f64(r, v, &m->submitted_at);
  case J_TYPE: return rd_type(r, v, "job");
  case J_V: return rd_version(r, v, &m->v);
  }
  return ALTAR_OK;
}

static int rd_job_top(altar__rd_t *r, const msgpack_object *o, void *target) {
  altar_job_msg_t *m = target;
  int rc = rd_type_first(r, o, "job");
  if (!rc) rc = altar__rd_struct(r, o, job_keys, 1u << J_SPEC, rd_job_field, m);
  if (!rc && !m->job_id && !(m->job_id = strdup(""))) rc = altar__rd_fail(r, ALTAR_ENOMEM, "out of memory");
  return rc;
}

int altar_decode_job(const void *data, size_t len, altar_job_msg_t *pout, altar_error_t *err) {
  memset(pout, 0, sizeof *pout);
  pout->v = ALTAR_SCHEMA_VERSION;
  pout->spec.resources.count = 1;
  return decode_top(data, len, "job", rd_job_top, pout, err);
}

/* ---- status event ---- */

const char *const altar__status_event_names[3] = {"submitted", "state", "released"};

void altar_status_event_clear(altar_status_event_t *e) {
  if (!e) return;
  free(e->task_key);
  free(e->kind);
  altar_handle_clear(&e->handle);
  altar_failure_free(e->failure);
  altar_spec_free(e->spec);
  free(e->worker);
  free(e->source.topic);
  altar_spec_enc_clear(&e->spec_enc);
  altar_record_fixed_clear(&e->record_fixed);
  if (e->cancel) {
    altar_control_msg_clear(e->cancel);
    free(e->cancel);
  }
  memset(e, 0, sizeof *e);
}

static int wr_source(altar__wr_t *w, const altar_source_t *src) {
  if (!src->set) {
    altar__wr_nil(w);
    return ALTAR_OK;
  }
  altar__wr_map(w, 3);
  ALTAR__WR_FIELD(w, "offset", W_VOID(altar__wr_i64(w, src->offset)));
  ALTAR__WR_FIELD(w, "partition", W_VOID(altar__wr_i64(w, src->partition)));
  ALTAR__WR_FIELD(w, "topic", altar__wr_str(w, src->topic));
  return ALTAR_OK;
}

static int wr_opt_spec(altar__wr_t *w, const altar_spec_t *spec) {
  if (!spec) {
    altar__wr_nil(w);
    return ALTAR_OK;
  }
  return altar__wr_spec(w, spec);
}

static int wr_status(altar__wr_t *w, const void *msg) {
  const altar_status_event_t *e = msg;
  if ((unsigned)e->event > ALTAR_EV_RELEASED) return altar__wr_fail(w, ALTAR_EINVAL, "event: unknown kind");
  if ((unsigned)e->state > ALTAR_STATE_FAILED) return altar__wr_fail(w, ALTAR_EINVAL, "state: unknown state");
  altar__wr_map(w, 12);
  ALTAR__WR_FIELD(w, "event", altar__wr_str(w, altar__status_event_names[e->event]));
  ALTAR__WR_FIELD(w, "failure", altar__wr_failure(w, e->failure));
  ALTAR__WR_FIELD(w, "handle", altar__wr_handle(w, &e->handle));
  ALTAR__WR_FIELD(w, "kind", altar__wr_str(w, e->kind));
  ALTAR__WR_FIELD(w, "source", wr_source(w, &e->source));
  ALTAR__WR_FIELD(w, "spec", wr_opt_spec(w, e->spec));
  ALTAR__WR_FIELD(w, "state", altar__wr_str(w, altar_state_name(e->state)));
  ALTAR__WR_FIELD(w, "task_key", altar__wr_str(w, e->task_key));
  ALTAR__WR_FIELD(w, "ts", altar__wr_f64(w, e->ts));
  ALTAR__WR_FIELD(w, "type", altar__wr_str(w, "status"));
  ALTAR__WR_FIELD(w, "v", wr_version(w, e->v));
  ALTAR__WR_FIELD(w, "worker", altar__wr_opt_str(w, e->worker));
  return ALTAR_OK;
}

int altar_encode_status(const altar_status_event_t *e, altar_buf_t *out, altar_error_t *err) {
  return encode_top(wr_status, e, "status", out, err);
}

/* Reads a string that must be one of names[0..n); *pidx gets its index. */
static int rd_enum(altar__rd_t *r, const msgpack_object *v, const char *const *names, int n, int *pidx,
                   const char *expected) {
  if (v->type == MSGPACK_OBJECT_STR) {
    for (int i = 0; i < n; i++) {
      size_t len = strlen(names[i]);
      if (v->via.str.size == len && !memcmp(v->via.str.ptr, names[i], len)) {
        *pidx = i;
        return ALTAR_OK;
      }
    }
  }
  return altar__rd_fail(r, ALTAR_EDECODE, expected);
}

enum { SRC_OFFSET, SRC_PARTITION, SRC_TOPIC };
static const char *const source_keys[] = {"offset", "partition", "topic", NULL};

static int rd_source_field(altar__rd_t *r, void *ctx, int idx, const msgpack_object *v) {
  altar_source_t *src = ctx;
  int64_t p;
  int rc;
  switch (idx) {
  case SRC_OFFSET: return altar__rd_i64(r, v, &src->offset);
  case SRC_PARTITION:
    if ((rc = altar__rd_i64(r, v, &p))) return rc;
    if (p < INT32_MIN || p > INT32_MAX) return altar__rd_fail(r, ALTAR_EDECODE, "partition out of range");
    src->partition = (int32_t)p;
    return ALTAR_OK;
  case SRC_TOPIC: return altar__rd_str(r, v, &src->topic);
  }
  return ALTAR_OK;
}

static int rd_source(altar__rd_t *r, const msgpack_object *v, altar_source_t *src) {
  memset(src, 0, sizeof *src);
  if (v->type == MSGPACK_OBJECT_NIL) return ALTAR_OK;
  if (v->type != MSGPACK_OBJECT_MAP) return altar__rd_fail(r, ALTAR_EDECODE, "expected map or nil");
  src->set = true;
  return altar__rd_struct(r, v, source_keys, 1u << SRC_TOPIC, rd_source_field, src);
}

static int rd_opt_spec(altar__rd_t *r, const msgpack_object *v, altar_spec_t **pspec) {
  *pspec = NULL;
  if (v->type == MSGPACK_OBJECT_NIL) return ALTAR_OK;
  if (v->type != MSGPACK_OBJECT_MAP) return altar__rd_fail(r, ALTAR_EDECODE, "expected map or nil");
  if (!(*pspec = calloc(1, sizeof **pspec))) return altar__rd_fail(r, ALTAR_ENOMEM, "out of memory");
  return altar__rd_spec(r, v, *pspec);
}

enum { S_EVENT, S_FAILURE, S_HANDLE, S_KIND, S_SOURCE, S_SPEC, S_STATE, S_TASK_KEY, S_TS, S_TYPE, S_V, S_WORKER };
static const char *const status_keys[] = {"event",    "failure", "handle", "kind", "source", "spec", "state",
                                          "task_key", "ts",      "type",   "v",    "worker", NULL};

static int rd_status_field(altar__rd_t *r, void *ctx, int idx, const msgpack_object *v) {
  altar_status_event_t *e = ctx;
  int i = 0, rc;
  switch (idx) {
  case S_EVENT:
    rc = rd_enum(r, v, altar__status_event_names, 3, &i, "expected one of submitted, state, released");
    e->event = (altar_status_event_kind_t)i;
    return rc;
  case S_FAILURE: return altar__rd_failure(r, v, &e->failure);
  case S_HANDLE: altar_handle_clear(&e->handle); return altar__rd_handle(r, v, &e->handle);
  case S_KIND:
    free(e->kind);
    e->kind = NULL;
    return altar__rd_str(r, v, &e->kind);
  case S_SOURCE: return rd_source(r, v, &e->source);
  case S_SPEC: return rd_opt_spec(r, v, &e->spec);
  case S_STATE: return altar__rd_state(r, v, &e->state);
  case S_TASK_KEY:
    free(e->task_key);
    e->task_key = NULL;
    return altar__rd_str(r, v, &e->task_key);
  case S_TS: return altar__rd_f64(r, v, &e->ts);
  case S_TYPE: return rd_type(r, v, "status");
  case S_V: return rd_version(r, v, &e->v);
  case S_WORKER: return altar__rd_opt_str(r, v, &e->worker);
  }
  return ALTAR_OK;
}

/* Strings the model promises default to "" so consumers never meet NULL. */
static int default_str(altar__rd_t *r, char **ps) {
  if (!*ps && !(*ps = strdup(""))) return altar__rd_fail(r, ALTAR_ENOMEM, "out of memory");
  return ALTAR_OK;
}

static int default_handle(altar__rd_t *r, altar_handle_t *h) {
  int rc = default_str(r, &h->backend);
  if (!rc) rc = default_str(r, &h->external_id);
  return rc;
}

/* When the whole message is in canonical form (wire and typed checks), the
 * spec's bytes in it are exactly altar_encode_spec(spec): kept, so the
 * ledger stores them without encoding the spec again. The fuzz target for
 * status events checks that equality on every input it keeps bytes for. */
static int keep_spec_bytes(altar__rd_t *r, const msgpack_object *o, altar_status_event_t *e) {
  if (r->noncanon || !r->doc || !r->doc->canonical || o != &r->doc->root) return ALTAR_OK;
  for (size_t i = 0; i < o->via.map.size && i < ALTAR__MP_TOP_SPANS; i++) {
    const msgpack_object *k = &o->via.map.ptr[i].key;
    if (k->via.str.size != 4 || memcmp(k->via.str.ptr, "spec", 4)) continue;
    const uint8_t *a = r->doc->top_start[i], *b = r->doc->top_end[i];
    if (altar_buf_append(&e->spec_enc.codec_bytes_, a, (size_t)(b - a)))
      return altar__rd_fail(r, ALTAR_ENOMEM, "out of memory");
    break;
  }
  return ALTAR_OK;
}

static int rd_status_top(altar__rd_t *r, const msgpack_object *o, void *target) {
  altar_status_event_t *e = target;
  int rc = rd_type_first(r, o, "status");
  if (!rc) rc = altar__rd_struct(r, o, status_keys, 1u << S_EVENT, rd_status_field, e);
  if (!rc) rc = default_str(r, &e->task_key);
  if (!rc) rc = default_str(r, &e->kind);
  if (!rc) rc = default_handle(r, &e->handle);
  if (!rc && e->spec) rc = keep_spec_bytes(r, o, e);
  return rc;
}

int altar_decode_status(const void *data, size_t len, altar_status_event_t *pout, altar_error_t *err) {
  memset(pout, 0, sizeof *pout);
  pout->v = ALTAR_SCHEMA_VERSION;
  return decode_top(data, len, "status", rd_status_top, pout, err);
}

/* ---- group event ---- */

static const char *const group_event_names[] = {"fired", "dead_lettered", "cancelled"};

void altar_group_event_clear(altar_group_event_t *e) {
  if (!e) return;
  free(e->event_id);
  free(e->kind);
  free(e->group_key);
  altar_handles_free(e->shards, e->n_shards);
  for (size_t i = 0; e->failures && i < e->n_failures; i++) {
    free(e->failures[i].external_id);
    altar_failure_free(e->failures[i].failure);
  }
  free(e->failures);
  for (size_t i = 0; e->outputs && i < e->n_outputs; i++) altar_transfer_clear(&e->outputs[i]);
  free(e->outputs);
  memset(e, 0, sizeof *e);
}

static int wr_group_failure(altar__wr_t *w, const altar_group_failure_t *f) {
  altar__wr_map(w, 2);
  ALTAR__WR_FIELD(w, "external_id", altar__wr_str(w, f->external_id));
  ALTAR__WR_FIELD(w, "failure", altar__wr_failure(w, f->failure));
  return ALTAR_OK;
}

static int wr_group_failures(altar__wr_t *w, const altar_group_failure_t *fs, size_t n) {
  int rc = altar__wr_array(w, n);
  for (size_t i = 0; !rc && i < n; i++) rc = altar__wr_at_index(w, i, wr_group_failure(w, &fs[i]));
  return rc;
}

static int wr_shards(altar__wr_t *w, const altar_handle_t *hs, size_t n) {
  int rc = altar__wr_array(w, n);
  for (size_t i = 0; !rc && i < n; i++) rc = altar__wr_at_index(w, i, altar__wr_handle(w, &hs[i]));
  return rc;
}

static int wr_count(altar__wr_t *w, size_t n) {
  if (n > (size_t)INT64_MAX) return altar__wr_fail(w, ALTAR_EINVAL, "count out of range");
  altar__wr_i64(w, (int64_t)n);
  return ALTAR_OK;
}

static int wr_group(altar__wr_t *w, const void *msg) {
  const altar_group_event_t *e = msg;
  if ((unsigned)e->event > ALTAR_GROUP_CANCELLED) return altar__wr_fail(w, ALTAR_EINVAL, "event: unknown kind");
  bool head = e->pages > 0; /* a wide group's head: members_total and pages too */
  altar__wr_map(w, 8 + (e->n_failures ? 1 : 0) + (e->n_outputs ? 1 : 0) + (head ? 2 : 0));
  ALTAR__WR_FIELD(w, "event", altar__wr_str(w, group_event_names[e->event]));
  ALTAR__WR_FIELD(w, "event_id", altar__wr_str(w, e->event_id));
  if (e->n_failures) ALTAR__WR_FIELD(w, "failures", wr_group_failures(w, e->failures, e->n_failures));
  ALTAR__WR_FIELD(w, "group_key", altar__wr_str(w, e->group_key));
  ALTAR__WR_FIELD(w, "kind", altar__wr_str(w, e->kind));
  if (head) ALTAR__WR_FIELD(w, "members_total", wr_count(w, ALTAR_GROUP_MEMBERS(e)));
  if (e->n_outputs) ALTAR__WR_FIELD(w, "outputs", altar__wr_transfers(w, e->outputs, e->n_outputs));
  if (head) ALTAR__WR_FIELD(w, "pages", wr_count(w, e->pages));
  ALTAR__WR_FIELD(w, "shards", wr_shards(w, e->shards, e->n_shards));
  ALTAR__WR_FIELD(w, "ts", altar__wr_f64(w, e->ts));
  ALTAR__WR_FIELD(w, "type", altar__wr_str(w, "group"));
  ALTAR__WR_FIELD(w, "v", wr_version(w, e->v));
  return ALTAR_OK;
}

int altar_encode_group(const altar_group_event_t *e, altar_buf_t *out, altar_error_t *err) {
  return encode_top(wr_group, e, "group", out, err);
}

static int rd_shards(altar__rd_t *r, const msgpack_object *o, altar_handle_t **pv, size_t *pn) {
  if (o->type != MSGPACK_OBJECT_ARRAY) return altar__rd_fail(r, ALTAR_EDECODE, "expected array of handles");
  size_t n = o->via.array.size;
  if (n > ALTAR_MAX_ARRAY) return altar__rd_fail_size(r, "array", n, ALTAR_MAX_ARRAY);
  if (!n) return ALTAR_OK;
  altar_handle_t *hs = calloc(n, sizeof *hs);
  if (!hs) return altar__rd_fail(r, ALTAR_ENOMEM, "out of memory");
  *pv = hs;
  *pn = n; /* zeroed handles clear safely if an element fails */
  for (size_t i = 0; i < n; i++) {
    size_t old = altar__path_index(&r->path, i);
    int rc = altar__rd_handle(r, &o->via.array.ptr[i], &hs[i]);
    altar__path_pop(&r->path, old);
    if (rc) return rc;
  }
  return ALTAR_OK;
}

enum { GF_EXTERNAL_ID, GF_FAILURE };
static const char *const group_failure_keys[] = {"external_id", "failure", NULL};

static int rd_group_failure_field(altar__rd_t *r, void *ctx, int idx, const msgpack_object *v) {
  altar_group_failure_t *f = ctx;
  switch (idx) {
  case GF_EXTERNAL_ID: return altar__rd_str(r, v, &f->external_id);
  case GF_FAILURE: return altar__rd_failure(r, v, &f->failure);
  }
  return ALTAR_OK;
}

static int rd_group_failures(altar__rd_t *r, const msgpack_object *o, altar_group_failure_t **pv, size_t *pn) {
  if (o->type != MSGPACK_OBJECT_ARRAY) return altar__rd_fail(r, ALTAR_EDECODE, "expected array of failures");
  size_t n = o->via.array.size;
  if (n > ALTAR_MAX_ARRAY) return altar__rd_fail_size(r, "array", n, ALTAR_MAX_ARRAY);
  if (!n) return ALTAR_OK;
  altar_group_failure_t *fs = calloc(n, sizeof *fs);
  if (!fs) return altar__rd_fail(r, ALTAR_ENOMEM, "out of memory");
  *pv = fs;
  *pn = n; /* zeroed entries clear safely if an element fails */
  for (size_t i = 0; i < n; i++) {
    size_t old = altar__path_index(&r->path, i);
    int rc = altar__rd_struct(r, &o->via.array.ptr[i], group_failure_keys, 1u << GF_EXTERNAL_ID, rd_group_failure_field,
                              &fs[i]);
    altar__path_pop(&r->path, old);
    if (rc) return rc;
  }
  return ALTAR_OK;
}

enum {
  G_EVENT,
  G_EVENT_ID,
  G_FAILURES,
  G_GROUP_KEY,
  G_KIND,
  G_MEMBERS_TOTAL,
  G_OUTPUTS,
  G_PAGE,
  G_PAGES,
  G_SHARDS,
  G_TS,
  G_TYPE,
  G_V
};
static const char *const group_keys[] = {"event",   "event_id", "failures", "group_key", "kind", "members_total",
                                         "outputs", "page",     "pages",    "shards",    "ts",   "type",
                                         "v",       NULL};

/* A count: an integer 0..INT64_MAX. */
static int rd_count(altar__rd_t *r, const msgpack_object *v, size_t *pn) {
  int64_t x = 0;
  int rc = altar__rd_i64(r, v, &x);
  if (rc) return rc;
  if (x < 0 || (uint64_t)x > SIZE_MAX) return altar__rd_fail(r, ALTAR_EDECODE, "expected a count >= 0");
  *pn = (size_t)x;
  return ALTAR_OK;
}

static int rd_group_field(altar__rd_t *r, void *ctx, int idx, const msgpack_object *v) {
  altar_group_event_t *e = ctx;
  int i = 0, rc;
  switch (idx) {
  case G_EVENT:
    rc = rd_enum(r, v, group_event_names, 3, &i, "expected one of fired, dead_lettered, cancelled");
    e->event = (altar_group_event_kind_t)i;
    return rc;
  case G_EVENT_ID: return altar__rd_str(r, v, &e->event_id);
  case G_FAILURES: return rd_group_failures(r, v, &e->failures, &e->n_failures);
  case G_GROUP_KEY: return altar__rd_str(r, v, &e->group_key);
  case G_KIND: return altar__rd_str(r, v, &e->kind);
  case G_MEMBERS_TOTAL: return rd_count(r, v, &e->members_total);
  case G_OUTPUTS: return altar__rd_transfers(r, v, &e->outputs, &e->n_outputs);
  case G_PAGE: return ALTAR_OK; /* a page's (rd_group_page_field) */
  case G_PAGES: return rd_count(r, v, &e->pages);
  case G_SHARDS: return rd_shards(r, v, &e->shards, &e->n_shards);
  case G_TS: return altar__rd_f64(r, v, &e->ts);
  case G_TYPE: return rd_type(r, v, "group");
  case G_V: return rd_version(r, v, &e->v);
  }
  return ALTAR_OK;
}

static int rd_group_top(altar__rd_t *r, const msgpack_object *o, void *target) {
  altar_group_event_t *e = target;
  int rc = rd_type_first(r, o, "group");
  if (!rc) rc = altar__rd_struct(r, o, group_keys, 1u << G_EVENT, rd_group_field, e);
  if (!rc) rc = default_str(r, &e->event_id);
  if (!rc) rc = default_str(r, &e->kind);
  if (!rc) rc = default_str(r, &e->group_key);
  if (!rc && e->pages && e->members_total < e->n_shards)
    rc = altar__rd_fail(r, ALTAR_EDECODE, "members_total: fewer than the shards listed");
  if (!rc && !e->pages) e->members_total = e->n_shards; /* an event that fits lists every member */
  return rc;
}

int altar_decode_group(const void *data, size_t len, altar_group_event_t *pout, altar_error_t *err) {
  memset(pout, 0, sizeof *pout);
  pout->v = ALTAR_SCHEMA_VERSION;
  return decode_top(data, len, "group", rd_group_top, pout, err);
}

static int rd_group_page_field(altar__rd_t *r, void *ctx, int idx, const msgpack_object *v) {
  altar_group_event_t *e = ctx;
  switch (idx) {
  case G_PAGE: return rd_count(r, v, &e->page);
  case G_TYPE: return rd_type(r, v, "group_page");
  case G_FAILURES: /* a head's */
  case G_MEMBERS_TOTAL: return ALTAR_OK;
  }
  return rd_group_field(r, ctx, idx, v);
}

static int rd_group_page_top(altar__rd_t *r, const msgpack_object *o, void *target) {
  altar_group_event_t *e = target;
  int rc = rd_type_first(r, o, "group_page");
  if (!rc)
    rc = altar__rd_struct(r, o, group_keys, 1u << G_EVENT | 1u << G_EVENT_ID | 1u << G_PAGE | 1u << G_PAGES,
                          rd_group_page_field, e);
  if (!rc && (e->page < 1 || e->page > e->pages)) rc = altar__rd_fail(r, ALTAR_EDECODE, "page: expected 1..pages");
  if (!rc) rc = default_str(r, &e->kind);
  if (!rc) rc = default_str(r, &e->group_key);
  return rc;
}

int altar_decode_group_page(const void *data, size_t len, altar_group_event_t *pout, altar_error_t *err) {
  memset(pout, 0, sizeof *pout);
  pout->v = ALTAR_SCHEMA_VERSION;
  return decode_top(data, len, "group_page", rd_group_page_top, pout, err);
}

static int wr_group_page(altar__wr_t *w, const void *msg) {
  const altar_group_event_t *e = msg;
  if ((unsigned)e->event > ALTAR_GROUP_CANCELLED) return altar__wr_fail(w, ALTAR_EINVAL, "event: unknown kind");
  if (e->page < 1 || e->page > e->pages) return altar__wr_fail(w, ALTAR_EINVAL, "page: expected 1..pages");
  altar__wr_map(w, 10 + (e->n_outputs ? 1 : 0));
  ALTAR__WR_FIELD(w, "event", altar__wr_str(w, group_event_names[e->event]));
  ALTAR__WR_FIELD(w, "event_id", altar__wr_str(w, e->event_id));
  ALTAR__WR_FIELD(w, "group_key", altar__wr_str(w, e->group_key));
  ALTAR__WR_FIELD(w, "kind", altar__wr_str(w, e->kind));
  if (e->n_outputs) ALTAR__WR_FIELD(w, "outputs", altar__wr_transfers(w, e->outputs, e->n_outputs));
  ALTAR__WR_FIELD(w, "page", wr_count(w, e->page));
  ALTAR__WR_FIELD(w, "pages", wr_count(w, e->pages));
  ALTAR__WR_FIELD(w, "shards", wr_shards(w, e->shards, e->n_shards));
  ALTAR__WR_FIELD(w, "ts", altar__wr_f64(w, e->ts));
  ALTAR__WR_FIELD(w, "type", altar__wr_str(w, "group_page"));
  ALTAR__WR_FIELD(w, "v", wr_version(w, e->v));
  return ALTAR_OK;
}

int altar_encode_group_page(const altar_group_event_t *e, altar_buf_t *out, altar_error_t *err) {
  return encode_top(wr_group_page, e, "group_page", out, err);
}

/* ---- a group event of any width ---- */

static size_t slen(const char *s) { return s ? strlen(s) : 0; }

static size_t strmap_est(const altar_strmap_t *m) {
  size_t n = 0;
  for (size_t i = 0; m && i < m->n; i++) n += strlen(m->keys[i]) + strlen(m->vals[i]) + 10;
  return n;
}

/* Upper bounds of one shard's and one output's encoding (headers at their
 * widest), and of everything of an event but its shards, outputs and
 * failures; the failures' room is kept whatever the outcome. These are the
 * bounds the reconciler refused a group event by before wide groups. */
static size_t shard_est(const altar_handle_t *h) {
  return 64 + slen(h->backend) + slen(h->external_id) + strmap_est(&h->labels) + strmap_est(h->plugin_identity);
}
static size_t output_est(const altar_transfer_t *o) {
  return slen(o->uri) + slen(o->logical_path) + slen(o->digest) + slen(o->locality_key) + 64;
}
#define GROUP_FAILURES_ROOM (ALTAR_GROUP_MAX_FAILURES * (ALTAR_GROUP_FAILURE_DETAIL + 128 + 512 + 64))
static size_t fixed_est(const altar_group_event_t *e) {
  return 256 + slen(e->kind) + slen(e->group_key) + ALTAR_TASK_KEY_LEN + GROUP_FAILURES_ROOM;
}
/* What one message of a wide group's event may take by those bounds. */
#define GROUP_PAGE_BUDGET (ALTAR_MAX_MESSAGE / 2)
#define GROUP_OUTPUTS_MAX_BYTES (ALTAR_MAX_MESSAGE / 4)

bool altar_group_event_fits(const altar_group_event_t *e) {
  if (e->n_shards > ALTAR_MAX_ARRAY || e->n_outputs > ALTAR_MAX_ARRAY) return false;
  size_t bytes = fixed_est(e);
  for (size_t i = 0; i < e->n_shards; i++) bytes += shard_est(&e->shards[i]);
  if (bytes > ALTAR_MAX_MESSAGE) return false;
  size_t room = ALTAR_MAX_MESSAGE - bytes, out = 0;
  if (room > GROUP_OUTPUTS_MAX_BYTES) room = GROUP_OUTPUTS_MAX_BYTES;
  for (size_t i = 0; i < e->n_outputs; i++) out += output_est(&e->outputs[i]);
  return out <= room;
}

typedef struct slice {
  size_t s0, s1, o0, o1;
} slice_t;

/* The messages of a wide event: each takes the next members, then (once
 * the members are all placed) the next outputs, while it holds at most
 * ALTAR_MAX_ARRAY of each and its bounds stay within GROUP_PAGE_BUDGET;
 * every message takes at least one item. The head keeps the failures'
 * room. */
static int split(const altar_group_event_t *e, slice_t **pv, size_t *pn) {
  slice_t *v = NULL;
  size_t n = 0, cap = 0, s = 0, o = 0;
  size_t base = 256 + slen(e->kind) + slen(e->group_key) + ALTAR_TASK_KEY_LEN;
  do {
    if (n == cap) {
      size_t nc = cap ? cap * 2 : 16;
      slice_t *nv = realloc(v, nc * sizeof *nv);
      if (!nv) {
        free(v);
        return ALTAR_ENOMEM;
      }
      v = nv;
      cap = nc;
    }
    slice_t *sl = &v[n];
    size_t bytes = base + (n ? 0 : GROUP_FAILURES_ROOM), items = 0;
    sl->s0 = s;
    while (s < e->n_shards && s - sl->s0 < ALTAR_MAX_ARRAY) {
      size_t b = shard_est(&e->shards[s]);
      if (items && bytes + b > GROUP_PAGE_BUDGET) break;
      bytes += b;
      items++;
      s++;
    }
    sl->s1 = s;
    sl->o0 = o;
    while (s == e->n_shards && o < e->n_outputs && o - sl->o0 < ALTAR_MAX_ARRAY) {
      size_t b = output_est(&e->outputs[o]);
      if (items && bytes + b > GROUP_PAGE_BUDGET) break;
      bytes += b;
      items++;
      o++;
    }
    sl->o1 = o;
    n++;
  } while (s < e->n_shards || o < e->n_outputs);
  *pv = v;
  *pn = n;
  return ALTAR_OK;
}

int altar_encode_group_messages(const altar_group_event_t *e, altar_buf_t **pv, size_t *pn, altar_error_t *err) {
  *pv = NULL;
  *pn = 0;
  if (!e) return altar_error_set(err, ALTAR_EINVAL, "group: NULL argument");
  slice_t one = {0, e->n_shards, 0, e->n_outputs}, *sl = &one;
  size_t n = 1;
  bool wide = !altar_group_event_fits(e);
  if (wide && split(e, &sl, &n)) return altar_error_set(err, ALTAR_ENOMEM, "group: out of memory");
  altar_buf_t *bufs = calloc(n, sizeof *bufs);
  int rc = bufs ? ALTAR_OK : altar_error_set(err, ALTAR_ENOMEM, "group: out of memory");
  for (size_t i = 0; !rc && i < n; i++) {
    altar_group_event_t m = *e;
    m.shards = e->shards + sl[i].s0;
    m.n_shards = sl[i].s1 - sl[i].s0;
    m.outputs = e->outputs + sl[i].o0;
    m.n_outputs = sl[i].o1 - sl[i].o0;
    m.members_total = e->n_shards;
    m.pages = wide ? n - 1 : 0;
    m.page = i;
    if (i) {
      m.failures = NULL;
      m.n_failures = 0;
    }
    rc = i ? altar_encode_group_page(&m, &bufs[i], err) : altar_encode_group(&m, &bufs[i], err);
    if (!rc && bufs[i].len > ALTAR_MAX_MESSAGE)
      rc = altar_error_set(err, ALTAR_ETOOBIG, "group %s:%s: message %zu of its event takes %zu bytes, more than %u",
                           e->kind, e->group_key, i, bufs[i].len, ALTAR_MAX_MESSAGE);
  }
  if (sl != &one) free(sl);
  if (rc) {
    for (size_t i = 0; bufs && i < n; i++) altar_buf_free(&bufs[i]);
    free(bufs);
    return rc;
  }
  *pv = bufs;
  *pn = n;
  return ALTAR_OK;
}

int altar_group_event_take_page(altar_group_event_t *g, altar_group_event_t *p) {
  if (!g || !p || p->page != g->page + 1 || p->page > g->pages) return 0;
  if (p->n_shards) {
    altar_handle_t *hs = realloc(g->shards, (g->n_shards + p->n_shards) * sizeof *hs);
    if (!hs) return ALTAR_ENOMEM;
    memcpy(hs + g->n_shards, p->shards, p->n_shards * sizeof *hs);
    g->shards = hs;
    g->n_shards += p->n_shards;
    free(p->shards);
    p->shards = NULL;
    p->n_shards = 0;
  }
  if (p->n_outputs) {
    altar_transfer_t *os = realloc(g->outputs, (g->n_outputs + p->n_outputs) * sizeof *os);
    if (!os) return ALTAR_ENOMEM;
    memcpy(os + g->n_outputs, p->outputs, p->n_outputs * sizeof *os);
    g->outputs = os;
    g->n_outputs += p->n_outputs;
    free(p->outputs);
    p->outputs = NULL;
    p->n_outputs = 0;
  }
  g->page++;
  return 1;
}

/* ---- ledger record ---- */

/* The "handle" and "kind" entries: the part of a record that never changes. */
static int wr_record_fixed(altar__wr_t *w, const void *msg) {
  const altar_record_t *rec = msg;
  ALTAR__WR_FIELD(w, "handle", altar__wr_handle(w, &rec->handle));
  ALTAR__WR_FIELD(w, "kind", altar__wr_str(w, rec->kind));
  return ALTAR_OK;
}

int altar__encode_record_fixed(const altar_record_t *rec, altar_buf_t *out, altar_error_t *err) {
  return encode_top(wr_record_fixed, rec, "record", out, err);
}

int altar_record_fixed_make(const altar_handle_t *h, const char *kind, altar_record_fixed_t *pout, altar_error_t *err) {
  altar_buf_reset(&pout->codec_bytes_); /* its memory is reused */
  altar_record_t rec = {.handle = *h, .kind = ALTAR__UNCONST(kind)};
  int rc = altar__encode_record_fixed(&rec, &pout->codec_bytes_, err);
  if (rc) altar_record_fixed_clear(pout);
  return rc;
}

void altar_record_fixed_clear(altar_record_fixed_t *f) { altar_buf_free(&f->codec_bytes_); }

int altar_spec_enc_make(const altar_spec_t *spec, altar_spec_enc_t *pout, altar_error_t *err) {
  altar_buf_reset(&pout->codec_bytes_); /* its memory is reused */
  int rc = altar_encode_spec(spec, &pout->codec_bytes_, err);
  if (rc) altar_spec_enc_clear(pout);
  return rc;
}

void altar_spec_enc_clear(altar_spec_enc_t *e) { altar_buf_free(&e->codec_bytes_); }

/* A record map around its fixed part, in the bytes wr_record writes for a
 * record without failure or spec: "consumed" and "failure" (nil) before
 * the fixed entries, "restart_count", "spec" (nil) and "state" after. The
 * ledger writes a record this way at each change, so this avoids the
 * walker: literal bytes, one integer and one string. */
int altar_encode_record_around(const altar_record_t *rec, const void *fixed_data, size_t fixed_len, altar_buf_t *out) {
  if (rec->failure || (unsigned)rec->state > ALTAR_STATE_FAILED) return ALTAR_EINVAL;
  static const char head_false[] = "\x87\xa8"
                                   "consumed"
                                   "\xc2\xa7"
                                   "failure"
                                   "\xc0";
  static const char head_true[] = "\x87\xa8"
                                  "consumed"
                                  "\xc3\xa7"
                                  "failure"
                                  "\xc0";
  static const char rc_key[] = "\xad"
                               "restart_count";
  static const char spec_state[] = "\xa4"
                                   "spec"
                                   "\xc0\xa5"
                                   "state";
  const char *head = rec->consumed ? head_true : head_false;
  if (altar_buf_append(out, head, sizeof head_false - 1) || altar_buf_append(out, fixed_data, fixed_len) ||
      altar_buf_append(out, rc_key, sizeof rc_key - 1))
    return ALTAR_ENOMEM;
  altar__wr_t w;
  altar__wr_init(&w, out, "record", NULL);
  altar__wr_i64(&w, rec->restart_count);
  if (w.oom || altar_buf_append(out, spec_state, sizeof spec_state - 1)) return ALTAR_ENOMEM;
  const char *name = altar_state_name(rec->state);
  size_t n = strlen(name);
  msgpack_pack_str_with_body(&w.pk, name, n);
  return w.oom ? ALTAR_ENOMEM : ALTAR_OK;
}

static int wr_record(altar__wr_t *w, const void *msg) {
  const altar_record_t *rec = msg;
  if ((unsigned)rec->state > ALTAR_STATE_FAILED) return altar__wr_fail(w, ALTAR_EINVAL, "state: unknown state");
  altar__wr_map(w, 7);
  ALTAR__WR_FIELD(w, "consumed", W_VOID(altar__wr_bool(w, rec->consumed)));
  ALTAR__WR_FIELD(w, "failure", altar__wr_failure(w, rec->failure));
  int rc = wr_record_fixed(w, rec);
  if (rc) return rc;
  ALTAR__WR_FIELD(w, "restart_count", W_VOID(altar__wr_i64(w, rec->restart_count)));
  ALTAR__WR_FIELD(w, "spec", wr_opt_spec(w, rec->spec));
  ALTAR__WR_FIELD(w, "state", altar__wr_str(w, altar_state_name(rec->state)));
  return ALTAR_OK;
}

int altar_encode_record(const altar_record_t *rec, altar_buf_t *out, altar_error_t *err) {
  return encode_top(wr_record, rec, "record", out, err);
}

enum { R_CONSUMED, R_FAILURE, R_HANDLE, R_KIND, R_RESTART_COUNT, R_SPEC, R_STATE };
static const char *const record_keys[] = {"consumed",      "failure", "handle", "kind",
                                          "restart_count", "spec",    "state",  NULL};

static int rd_record_field(altar__rd_t *r, void *ctx, int idx, const msgpack_object *v) {
  altar_record_t *rec = ctx;
  switch (idx) {
  case R_CONSUMED: return altar__rd_bool(r, v, &rec->consumed);
  case R_FAILURE: return altar__rd_failure(r, v, &rec->failure);
  case R_HANDLE: altar_handle_clear(&rec->handle); return altar__rd_handle(r, v, &rec->handle);
  case R_KIND: return altar__rd_str(r, v, &rec->kind);
  case R_RESTART_COUNT: return altar__rd_i64(r, v, &rec->restart_count);
  case R_SPEC: return rd_opt_spec(r, v, &rec->spec);
  case R_STATE: return altar__rd_state(r, v, &rec->state);
  }
  return ALTAR_OK;
}

static int rd_record_top(altar__rd_t *r, const msgpack_object *o, void *target) {
  altar_record_t *rec = target;
  int rc = altar__rd_struct(r, o, record_keys, 0, rd_record_field, rec);
  if (!rc) rc = default_str(r, &rec->kind);
  if (!rc) rc = default_handle(r, &rec->handle);
  return rc;
}

int altar_decode_record(const void *data, size_t len, altar_record_t *pout, altar_error_t *err) {
  memset(pout, 0, sizeof *pout);
  return decode_top(data, len, "record", rd_record_top, pout, err);
}

/* ---- equality ---- */

static bool str_eq(const char *a, const char *b) {
  if (!a || !b) return a == b;
  return strcmp(a, b) == 0;
}

static bool f64_eq(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

bool altar_status_event_equal(const altar_status_event_t *a, const altar_status_event_t *b) {
  if (!a || !b) return a == b;
  bool src_eq = a->source.set == b->source.set && (!a->source.set || (str_eq(a->source.topic, b->source.topic) &&
                                                                      a->source.partition == b->source.partition &&
                                                                      a->source.offset == b->source.offset));
  return version_or_default(a->v) == version_or_default(b->v) && a->event == b->event &&
         str_eq(a->task_key, b->task_key) && str_eq(a->kind, b->kind) && altar_handle_equal(&a->handle, &b->handle) &&
         a->state == b->state && altar_failure_equal(a->failure, b->failure) &&
         altar_spec_same_identity(a->spec, b->spec) && str_eq(a->worker, b->worker) && src_eq && f64_eq(a->ts, b->ts);
}

bool altar_group_event_equal(const altar_group_event_t *a, const altar_group_event_t *b) {
  if (!a || !b) return a == b;
  if (version_or_default(a->v) != version_or_default(b->v) || a->event != b->event ||
      !str_eq(a->event_id, b->event_id) || !str_eq(a->kind, b->kind) || !str_eq(a->group_key, b->group_key) ||
      a->n_shards != b->n_shards || !f64_eq(a->ts, b->ts) || ALTAR_GROUP_MEMBERS(a) != ALTAR_GROUP_MEMBERS(b) ||
      a->pages != b->pages || a->page != b->page)
    return false;
  for (size_t i = 0; i < a->n_shards; i++)
    if (!altar_handle_equal(&a->shards[i], &b->shards[i])) return false;
  if (a->n_failures != b->n_failures) return false;
  for (size_t i = 0; i < a->n_failures; i++)
    if (!str_eq(a->failures[i].external_id, b->failures[i].external_id) ||
        !altar_failure_equal(a->failures[i].failure, b->failures[i].failure))
      return false;
  if (a->n_outputs != b->n_outputs) return false;
  for (size_t i = 0; i < a->n_outputs; i++)
    if (!altar_transfer_equal(&a->outputs[i], &b->outputs[i])) return false;
  return true;
}

/* ---- control (jobs topic) ---- */

static const char *const control_event_names[] = {"done", "lease", "release"};

void altar_control_msg_clear(altar_control_msg_t *m) {
  if (!m) return;
  free(m->event_name);
  free(m->offsets);
  free(m->worker);
  free(m->job_id);
  free(m->group_key);
  memset(m, 0, sizeof *m);
}

static int wr_control(altar__wr_t *w, const void *msg) {
  const altar_control_msg_t *m = msg;
  /* An unknown event is written back under the name it was read with. */
  const char *ev = (unsigned)m->event < ALTAR_CTL_UNKNOWN ? control_event_names[m->event]
                   : m->event == ALTAR_CTL_UNKNOWN        ? m->event_name
                   : m->event == ALTAR_CTL_CANCEL         ? "cancel"
                                                          : NULL;
  if (!ev) return altar__wr_fail(w, ALTAR_EINVAL, "event: unknown event");
  bool cancel = m->event == ALTAR_CTL_CANCEL;
  if (cancel && (!m->job_id || !*m->job_id)) return altar__wr_fail(w, ALTAR_EINVAL, "job_id: required on cancel");
  if (m->partition < 0) return altar__wr_fail(w, ALTAR_EINVAL, "partition: must be >= 0");
  if (m->n_offsets > ALTAR_CONTROL_MAX_OFFSETS) return altar__wr_fail(w, ALTAR_ETOOBIG, "offsets: too many");
  for (size_t i = 0; i < m->n_offsets; i++)
    if (m->offsets[i] < 0) return altar__wr_fail(w, ALTAR_EINVAL, "offsets: must be >= 0");
  /* job_id and group_key belong to cancel alone, so the other events keep
   * their bytes (their golden vectors are frozen). */
  altar__wr_map(w, cancel ? 10 : 8);
  ALTAR__WR_FIELD(w, "event", altar__wr_str(w, ev));
  if (cancel) {
    ALTAR__WR_FIELD(w, "group_key", altar__wr_opt_str(w, m->group_key));
    ALTAR__WR_FIELD(w, "job_id", altar__wr_str(w, m->job_id));
  }
  ALTAR__WR_FIELD(w, "lease_s", altar__wr_f64(w, m->lease_s));
  msgpack_pack_str_with_body(&w->pk, "offsets", 7);
  altar__wr_array(w, m->n_offsets);
  for (size_t i = 0; i < m->n_offsets; i++) altar__wr_i64(w, m->offsets[i]);
  ALTAR__WR_FIELD(w, "partition", W_VOID(altar__wr_i64(w, m->partition)));
  ALTAR__WR_FIELD(w, "ts", altar__wr_f64(w, m->ts));
  ALTAR__WR_FIELD(w, "type", altar__wr_str(w, "control"));
  ALTAR__WR_FIELD(w, "v", wr_version(w, m->v));
  ALTAR__WR_FIELD(w, "worker", altar__wr_opt_str(w, m->worker));
  return ALTAR_OK;
}

int altar_encode_control(const altar_control_msg_t *m, altar_buf_t *out, altar_error_t *err) {
  return encode_top(wr_control, m, "control", out, err);
}

enum { C_EVENT, C_GROUP_KEY, C_JOB_ID, C_LEASE_S, C_OFFSETS, C_PARTITION, C_TS, C_TYPE, C_V, C_WORKER };
static const char *const control_keys[] = {"event", "group_key", "job_id", "lease_s", "offsets", "partition",
                                           "ts",    "type",      "v",      "worker",  NULL};

static int rd_control_offsets(altar__rd_t *r, const msgpack_object *v, altar_control_msg_t *m) {
  if (v->type != MSGPACK_OBJECT_ARRAY) return altar__rd_fail(r, ALTAR_EDECODE, "expected array");
  size_t n = v->via.array.size;
  if (n > ALTAR_CONTROL_MAX_OFFSETS) return altar__rd_fail(r, ALTAR_ETOOBIG, "too many offsets");
  free(m->offsets);
  m->offsets = NULL;
  m->n_offsets = 0;
  if (!n) return ALTAR_OK;
  if (!(m->offsets = malloc(n * sizeof *m->offsets))) return altar__rd_fail(r, ALTAR_ENOMEM, "out of memory");
  for (size_t i = 0; i < n; i++) {
    size_t old = altar__path_index(&r->path, i);
    int rc = altar__rd_i64(r, &v->via.array.ptr[i], &m->offsets[i]);
    if (!rc && m->offsets[i] < 0) rc = altar__rd_fail(r, ALTAR_EDECODE, "offset must be >= 0");
    if (rc) return rc;
    altar__path_pop(&r->path, old);
    m->n_offsets++;
  }
  return ALTAR_OK;
}

static int rd_control_field(altar__rd_t *r, void *ctx, int idx, const msgpack_object *v) {
  altar_control_msg_t *m = ctx;
  switch (idx) {
  case C_EVENT: {
    int rc = altar__rd_str(r, v, &m->event_name);
    if (rc) return rc;
    m->event = ALTAR_CTL_UNKNOWN; /* open: a newer writer's event is skipped, not refused */
    for (int i = 0; i < ALTAR_CTL_UNKNOWN; i++)
      if (!strcmp(m->event_name, control_event_names[i])) m->event = (altar_control_event_t)i;
    if (!strcmp(m->event_name, "cancel")) m->event = ALTAR_CTL_CANCEL;
    return ALTAR_OK;
  }
  case C_GROUP_KEY: return altar__rd_opt_str(r, v, &m->group_key);
  case C_JOB_ID: return altar__rd_opt_str(r, v, &m->job_id);
  case C_LEASE_S: return altar__rd_f64(r, v, &m->lease_s);
  case C_OFFSETS: return rd_control_offsets(r, v, m);
  case C_PARTITION: {
    int64_t p;
    int rc = altar__rd_i64(r, v, &p);
    if (rc) return rc;
    if (p < 0 || p > INT32_MAX) return altar__rd_fail(r, ALTAR_EDECODE, "partition out of range");
    m->partition = (int32_t)p;
    return ALTAR_OK;
  }
  case C_TS: return altar__rd_f64(r, v, &m->ts);
  case C_TYPE: return rd_type(r, v, "control");
  case C_V: return rd_version(r, v, &m->v);
  case C_WORKER: return altar__rd_opt_str(r, v, &m->worker);
  }
  return ALTAR_OK;
}

static int rd_control_top(altar__rd_t *r, const msgpack_object *o, void *target) {
  int rc = rd_type_first(r, o, "control");
  if (!rc) rc = altar__rd_struct(r, o, control_keys, (1u << C_EVENT) | (1u << C_PARTITION), rd_control_field, target);
  const altar_control_msg_t *m = target;
  if (!rc && m->event == ALTAR_CTL_CANCEL && (!m->job_id || !*m->job_id))
    rc = altar__rd_fail(r, ALTAR_EDECODE, "job_id: required on cancel");
  return rc;
}

int altar_decode_control(const void *data, size_t len, altar_control_msg_t *pout, altar_error_t *err) {
  memset(pout, 0, sizeof *pout);
  pout->v = ALTAR_SCHEMA_VERSION;
  return decode_top(data, len, "control", rd_control_top, pout, err);
}

/* ---- peek ---- */

static int rd_peek_type(altar__rd_t *r, const msgpack_object *o, void *target) {
  const msgpack_object **pv = target;
  if (o->type != MSGPACK_OBJECT_MAP) return altar__rd_fail(r, ALTAR_EDECODE, "expected map");
  if (!(*pv = map_get(o, "type"))) return altar__rd_fail(r, ALTAR_EDECODE, "type: missing");
  return (*pv)->type == MSGPACK_OBJECT_STR ? ALTAR_OK : altar__rd_fail(r, ALTAR_EDECODE, "type: expected string");
}

int altar_peek_type(const void *data, size_t len, char *buf, size_t bufsize) {
  if (!buf || !bufsize) return ALTAR_EINVAL;
  buf[0] = '\0';
  altar__mp_doc_t u;
  int rc = altar__mp_parse(data, len, "message", &u, NULL);
  const msgpack_object *v = NULL;
  if (!rc) {
    altar__rd_t r = {.err = NULL};
    altar__path_init(&r.path, "message");
    rc = rd_peek_type(&r, &u.root, (void *)&v);
  }
  if (!rc) {
    size_t n = v->via.str.size;
    if (n >= bufsize || memchr(v->via.str.ptr, '\0', n)) {
      rc = ALTAR_EDECODE;
    } else {
      memcpy(buf, v->via.str.ptr, n);
      buf[n] = '\0';
    }
  }
  altar__mp_doc_free(&u);
  return rc;
}

/* A group event's id for a replay that only needs to know what was
 * published: the bytes are bound-checked and "type" (when present) must say
 * "group", but the shards are not decoded. */
int altar_peek_group_event_id(const void *data, size_t len, char **pout) {
  *pout = NULL;
  altar__mp_doc_t u;
  int rc = altar__mp_parse(data, len, "group", &u, NULL);
  if (!rc && u.root.type != MSGPACK_OBJECT_MAP) rc = ALTAR_EDECODE;
  altar__rd_t r = {.err = NULL};
  const msgpack_object *type = rc ? NULL : map_get(&u.root, "type");
  const msgpack_object *id = rc ? NULL : map_get(&u.root, "event_id");
  if (!rc && type && rd_type(&r, type, "group")) rc = ALTAR_EDECODE;
  if (!rc && (!id || id->type != MSGPACK_OBJECT_STR || id->via.str.size > ALTAR_MAX_STRING ||
              !altar__utf8_ok(id->via.str.ptr, id->via.str.size)))
    rc = ALTAR_EDECODE;
  if (!rc && !(*pout = strndup(id->via.str.ptr, id->via.str.size))) rc = ALTAR_ENOMEM;
  altar__mp_doc_free(&u);
  return rc;
}
