/* The JSON form of every message, through jansson. JSON is bridged to the
 * msgpack codec rather than walked a second time: JSON text → generic msgpack
 * → the typed msgpack decoder (so bounds, defaults and field-named errors are
 * the same) → struct; struct → canonical msgpack → generic JSON with sorted
 * keys, compact, so the output is byte-stable. */
#include "core/codec_int.h"

#include "altar/json_pos.h"
#include "core/unconst.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* JSON spends more bytes than msgpack on the same value (quotes, escapes). */
#define ALTAR__MAX_JSON ((size_t)ALTAR_MAX_MESSAGE * 4)

/* ---- JSON → generic msgpack ---- */

static int json_to_mp(altar__wr_t *w, const json_t *j, unsigned depth) {
  switch (json_typeof(j)) {
  case JSON_OBJECT: {
    if (depth + 1 > ALTAR_MAX_DEPTH) return altar__wr_fail(w, ALTAR_ETOOBIG, "nesting exceeds the depth bound");
    int rc = altar__wr_map(w, json_object_size(j));
    if (rc) return rc;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)ALTAR__UNCONST(j), k, v) {
      altar__wr_key(w, k);
      rc = json_to_mp(w, v, depth + 1);
      if (rc) return altar__wr_at_key(w, k, strlen(k), rc);
    }
    return ALTAR_OK;
  }
  case JSON_ARRAY: {
    if (depth + 1 > ALTAR_MAX_DEPTH) return altar__wr_fail(w, ALTAR_ETOOBIG, "nesting exceeds the depth bound");
    size_t n = json_array_size(j);
    int rc = altar__wr_array(w, n);
    for (size_t i = 0; !rc && i < n; i++) rc = altar__wr_at_index(w, i, json_to_mp(w, json_array_get(j, i), depth + 1));
    return rc;
  }
  case JSON_STRING: {
    size_t n = json_string_length(j);
    if (n > ALTAR_MAX_STRING) return altar__wr_fail_size(w, "string", n, ALTAR_MAX_STRING);
    msgpack_pack_str_with_body(&w->pk, json_string_value(j), n);
    return ALTAR_OK;
  }
  case JSON_INTEGER: altar__wr_i64(w, (int64_t)json_integer_value(j)); return ALTAR_OK;
  case JSON_REAL: return altar__wr_f64(w, json_real_value(j));
  case JSON_TRUE: altar__wr_bool(w, true); return ALTAR_OK;
  case JSON_FALSE: altar__wr_bool(w, false); return ALTAR_OK;
  case JSON_NULL: altar__wr_nil(w); return ALTAR_OK;
  }
  return altar__wr_fail(w, ALTAR_EDECODE, "unsupported JSON value");
}

/* Parses JSON text into generic msgpack in *pb (caller frees). */
static int json_text_to_mp(const char *text, size_t len, const char *root, altar_buf_t *pb, altar_error_t *err) {
  if (!text) return altar_error_set(err, ALTAR_EINVAL, "%s: NULL input", root);
  if (len > ALTAR__MAX_JSON)
    return altar_error_set(err, ALTAR_ETOOBIG, "%s: JSON of %zu bytes exceeds %zu", root, len, ALTAR__MAX_JSON);
  json_error_t jerr;
  json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!j) {
    int line = jerr.line, col = jerr.column;
    bool comma = false;
    if (jerr.position >= 0) altar_json_error_position(text, len, (size_t)jerr.position, &line, &col, &comma);
    return altar_error_set(err, ALTAR_EDECODE, "%s: invalid JSON at line %d column %d: %s", root, line, col,
                           comma ? "trailing comma" : jerr.text);
  }
  altar__wr_t w;
  altar__wr_init(&w, pb, root, err);
  int rc = altar__wr_finish(&w, 0, json_to_mp(&w, j, 0));
  json_decref(j);
  return rc;
}

/* ---- generic msgpack → JSON ---- */

static json_t *mp_to_json(const msgpack_object *o, altar__rd_t *r) {
  switch (o->type) {
  case MSGPACK_OBJECT_NIL: return json_null();
  case MSGPACK_OBJECT_BOOLEAN: return json_boolean(o->via.boolean);
  case MSGPACK_OBJECT_POSITIVE_INTEGER:
    if (o->via.u64 > (uint64_t)INT64_MAX) break;
    return json_integer((json_int_t)o->via.u64);
  case MSGPACK_OBJECT_NEGATIVE_INTEGER: return json_integer((json_int_t)o->via.i64);
  case MSGPACK_OBJECT_FLOAT32:
  case MSGPACK_OBJECT_FLOAT64: return json_real(o->via.f64);                     /* NULL for non-finite */
  case MSGPACK_OBJECT_STR: return json_stringn(o->via.str.ptr, o->via.str.size); /* NULL unless UTF-8 */
  case MSGPACK_OBJECT_ARRAY: {
    json_t *a = json_array();
    for (size_t i = 0; a && i < o->via.array.size; i++) {
      size_t old = altar__path_index(&r->path, i);
      json_t *v = mp_to_json(&o->via.array.ptr[i], r);
      altar__path_pop(&r->path, old);
      if (!v || json_array_append_new(a, v)) {
        json_decref(a);
        return NULL;
      }
    }
    return a;
  }
  case MSGPACK_OBJECT_MAP: {
    json_t *m = json_object();
    for (size_t i = 0; m && i < o->via.map.size; i++) {
      const msgpack_object_kv *kv = &o->via.map.ptr[i];
      if (kv->key.type != MSGPACK_OBJECT_STR) {
        altar__rd_fail(r, ALTAR_EDECODE, "map key: expected string");
        json_decref(m);
        return NULL;
      }
      size_t old = altar__path_key(&r->path, kv->key.via.str.ptr, kv->key.via.str.size);
      json_t *v = mp_to_json(&kv->val, r);
      int bad = !v || json_object_setn_new(m, kv->key.via.str.ptr, kv->key.via.str.size, v);
      if (bad && !r->err->code) altar__rd_fail(r, ALTAR_EDECODE, "not representable in JSON");
      altar__path_pop(&r->path, old);
      if (bad) {
        json_decref(m);
        return NULL;
      }
    }
    return m;
  }
  default: break;
  }
  altar__rd_fail(r, ALTAR_EDECODE, "not representable in JSON");
  return NULL;
}

char *altar__mp_to_json(const void *data, size_t len, const char *root, altar_error_t *err) {
  altar_error_t local = {0};
  if (!err) err = &local;
  err->code = 0;
  altar__mp_doc_t u;
  char *out = NULL;
  if (!altar__mp_parse(data, len, root, &u, err)) {
    altar__rd_t r = {.err = err};
    altar__path_init(&r.path, root);
    json_t *j = mp_to_json(&u.root, &r);
    if (j) {
      out = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
      if (!out) altar_error_set(err, ALTAR_ENOMEM, "%s: out of memory", root);
      json_decref(j);
    } else if (!err->code) {
      altar_error_set(err, ALTAR_EDECODE, "%s: not representable in JSON", root);
    }
  }
  altar__mp_doc_free(&u);
  if (!out) return NULL;
  /* jansson allocates with malloc by default; hand back a plain malloc'd copy
   * anyway so callers free() it whatever allocator jansson was given. */
  char *copy = strdup(out);
  free(out);
  if (!copy) altar_error_set(err, ALTAR_ENOMEM, "%s: out of memory", root);
  return copy;
}

/* ---- typed bridges ---- */

typedef int (*enc_fn)(const void *msg, altar_buf_t *out, altar_error_t *err);
typedef int (*dec_fn)(const void *data, size_t len, void *pout, altar_error_t *err);

static char *to_json(enc_fn enc, const void *msg, const char *root, altar_error_t *err) {
  altar_buf_t b = {0};
  char *out = NULL;
  if (!enc(msg, &b, err)) out = altar__mp_to_json(b.data, b.len, root, err);
  altar_buf_free(&b);
  return out;
}

static int from_json(dec_fn dec, const char *text, size_t len, void *pout, const char *root, altar_error_t *err) {
  altar_buf_t b = {0};
  int rc = json_text_to_mp(text, len, root, &b, err);
  if (!rc) rc = dec(b.data, b.len, pout, err);
  altar_buf_free(&b);
  return rc;
}

/* Thin adapters so one table serves every type. */
static int enc_spec(const void *m, altar_buf_t *o, altar_error_t *e) { return altar_encode_spec(m, o, e); }
static int enc_job(const void *m, altar_buf_t *o, altar_error_t *e) { return altar_encode_job(m, o, e); }
static int enc_control(const void *m, altar_buf_t *o, altar_error_t *e) { return altar_encode_control(m, o, e); }
static int enc_status(const void *m, altar_buf_t *o, altar_error_t *e) { return altar_encode_status(m, o, e); }
static int enc_group(const void *m, altar_buf_t *o, altar_error_t *e) { return altar_encode_group(m, o, e); }
static int enc_record(const void *m, altar_buf_t *o, altar_error_t *e) { return altar_encode_record(m, o, e); }
static int dec_spec(const void *d, size_t n, void *p, altar_error_t *e) { return altar_decode_spec(d, n, p, e); }
static int dec_job(const void *d, size_t n, void *p, altar_error_t *e) { return altar_decode_job(d, n, p, e); }
static int dec_control(const void *d, size_t n, void *p, altar_error_t *e) { return altar_decode_control(d, n, p, e); }
static int dec_status(const void *d, size_t n, void *p, altar_error_t *e) { return altar_decode_status(d, n, p, e); }
static int dec_group(const void *d, size_t n, void *p, altar_error_t *e) { return altar_decode_group(d, n, p, e); }
static int dec_record(const void *d, size_t n, void *p, altar_error_t *e) { return altar_decode_record(d, n, p, e); }

char *altar_spec_to_json(const altar_spec_t *s, altar_error_t *err) { return to_json(enc_spec, s, "spec", err); }
char *altar_job_to_json(const altar_job_msg_t *m, altar_error_t *err) { return to_json(enc_job, m, "job", err); }
char *altar_control_to_json(const altar_control_msg_t *m, altar_error_t *err) {
  return to_json(enc_control, m, "control", err);
}
int altar_control_from_json(const char *text, size_t len, altar_control_msg_t *pout, altar_error_t *err) {
  memset(pout, 0, sizeof *pout);
  return from_json(dec_control, text, len, pout, "control", err);
}
char *altar_status_to_json(const altar_status_event_t *e, altar_error_t *err) {
  return to_json(enc_status, e, "status", err);
}
char *altar_group_to_json(const altar_group_event_t *e, altar_error_t *err) {
  return to_json(enc_group, e, "group", err);
}
char *altar_record_to_json(const altar_record_t *r, altar_error_t *err) {
  return to_json(enc_record, r, "record", err);
}

int altar_spec_from_json(const char *text, size_t len, altar_spec_t *pout, altar_error_t *err) {
  memset(pout, 0, sizeof *pout);
  return from_json(dec_spec, text, len, pout, "spec", err);
}
int altar_job_from_json(const char *text, size_t len, altar_job_msg_t *pout, altar_error_t *err) {
  memset(pout, 0, sizeof *pout);
  return from_json(dec_job, text, len, pout, "job", err);
}
int altar_status_from_json(const char *text, size_t len, altar_status_event_t *pout, altar_error_t *err) {
  memset(pout, 0, sizeof *pout);
  return from_json(dec_status, text, len, pout, "status", err);
}
int altar_group_from_json(const char *text, size_t len, altar_group_event_t *pout, altar_error_t *err) {
  memset(pout, 0, sizeof *pout);
  return from_json(dec_group, text, len, pout, "group", err);
}
int altar_record_from_json(const char *text, size_t len, altar_record_t *pout, altar_error_t *err) {
  memset(pout, 0, sizeof *pout);
  return from_json(dec_record, text, len, pout, "record", err);
}

/* ---- standalone parts, for JSON output of backends and the CLI ---- */

typedef int (*wr_part_fn)(altar__wr_t *w, const void *part);

static char *part_to_json(wr_part_fn fn, const void *part, const char *root, altar_error_t *err) {
  altar_buf_t b = {0};
  altar__wr_t w;
  altar__wr_init(&w, &b, root, err);
  char *out = NULL;
  int rc = altar__wr_finish(&w, 0, fn(&w, part));
  if (!rc) out = altar__mp_to_json(b.data, b.len, root, err);
  altar_buf_free(&b);
  return out;
}

static int wr_failure_part(altar__wr_t *w, const void *p) { return altar__wr_failure(w, p); }
static int wr_handle_part(altar__wr_t *w, const void *p) { return altar__wr_handle(w, p); }

/* TaskStatus: {"failure", "handle", "state"}. */
static int wr_status_result(altar__wr_t *w, const void *p) {
  const altar_status_t *st = p;
  if ((unsigned)st->state > ALTAR_STATE_FAILED) return altar__wr_fail(w, ALTAR_EINVAL, "state: unknown state");
  altar__wr_map(w, 3);
  ALTAR__WR_FIELD(w, "failure", altar__wr_failure(w, st->failure));
  ALTAR__WR_FIELD(w, "handle", altar__wr_handle(w, &st->handle));
  ALTAR__WR_FIELD(w, "state", altar__wr_str(w, altar_state_name(st->state)));
  return ALTAR_OK;
}

char *altar_failure_to_json(const altar_failure_t *f, altar_error_t *err) {
  return part_to_json(wr_failure_part, f, "failure", err);
}
char *altar_handle_to_json(const altar_handle_t *h, altar_error_t *err) {
  if (!h) {
    altar_error_set(err, ALTAR_EINVAL, "handle: NULL argument");
    return NULL;
  }
  return part_to_json(wr_handle_part, h, "handle", err);
}
char *altar_status_result_to_json(const altar_status_t *st, altar_error_t *err) {
  if (!st) {
    altar_error_set(err, ALTAR_EINVAL, "status: NULL argument");
    return NULL;
  }
  return part_to_json(wr_status_result, st, "status", err);
}

/* A part read from JSON with the same bounds and types as a message part:
 * JSON → msgpack (bounded), then the part's typed reader. */
typedef int (*rd_part_fn)(altar__rd_t *r, const msgpack_object *o, void *part);

static int part_from_json(rd_part_fn fn, const char *text, size_t len, void *part, const char *root,
                          altar_error_t *err) {
  altar_buf_t b = {0};
  int rc = json_text_to_mp(text, len, root, &b, err);
  altar__mp_doc_t u;
  if (!rc) rc = altar__mp_parse(b.data, b.len, root, &u, err);
  if (!rc) {
    altar__rd_t r = {.err = err, .doc = &u};
    altar__path_init(&r.path, root);
    rc = fn(&r, &u.root, part);
    altar__mp_doc_free(&u);
  }
  altar_buf_free(&b);
  return rc;
}

static int rd_handle_part(altar__rd_t *r, const msgpack_object *o, void *p) { return altar__rd_handle(r, o, p); }

enum { SR_FAILURE, SR_HANDLE, SR_STATE };
static const char *const status_result_keys[] = {"failure", "handle", "state", NULL};

static int rd_status_result_field(altar__rd_t *r, void *ctx, int idx, const msgpack_object *v) {
  altar_status_t *st = ctx;
  switch (idx) {
  case SR_FAILURE: altar_failure_free(st->failure); return altar__rd_failure(r, v, &st->failure);
  case SR_HANDLE: altar_handle_clear(&st->handle); return altar__rd_handle(r, v, &st->handle);
  case SR_STATE: return altar__rd_state(r, v, &st->state);
  }
  return ALTAR_OK;
}

static int rd_status_result(altar__rd_t *r, const msgpack_object *o, void *p) {
  altar_status_t *st = p;
  int rc = altar__rd_struct(r, o, status_result_keys, (1u << SR_HANDLE) | (1u << SR_STATE), rd_status_result_field, st);
  if (!rc && st->state == ALTAR_STATE_FAILED && !st->failure &&
      !(st->failure = altar_failure_new("job_failed", NULL, false)))
    rc = altar_error_set(r->err, ALTAR_ENOMEM, "status: out of memory");
  if (!rc && st->state != ALTAR_STATE_FAILED) {
    altar_failure_free(st->failure); /* failure is set only when FAILED */
    st->failure = NULL;
  }
  return rc;
}

int altar_handle_from_json(const char *text, size_t len, altar_handle_t *pout, altar_error_t *err) {
  memset(pout, 0, sizeof *pout);
  int rc = part_from_json(rd_handle_part, text, len, pout, "handle", err);
  if (rc) altar_handle_clear(pout);
  return rc;
}

int altar_status_result_from_json(const char *text, size_t len, altar_status_t *pout, altar_error_t *err) {
  memset(pout, 0, sizeof *pout);
  int rc = part_from_json(rd_status_result, text, len, pout, "status", err);
  if (rc) altar_status_clear(pout);
  return rc;
}

/* ---- generic bridges for `altar codec` ---- */

static int enc_group_page(const void *m, altar_buf_t *o, altar_error_t *e) { return altar_encode_group_page(m, o, e); }
static int dec_group_page(const void *d, size_t n, void *p, altar_error_t *e) {
  return altar_decode_group_page(d, n, p, e);
}
static const enc_fn encoders[] = {enc_spec, enc_job, enc_status, enc_group, enc_record, enc_control, enc_group_page};
static const dec_fn decoders[] = {dec_spec, dec_job, dec_status, dec_group, dec_record, dec_control, dec_group_page};

/* Room for any message struct, so the bridges need no per-type code. */
typedef union any_msg {
  altar_spec_t spec;
  altar_job_msg_t job;
  altar_status_event_t status;
  altar_group_event_t group;
  altar_record_t record;
  altar_control_msg_t control;
} any_msg_t;

static void clear_any(altar_msg_type_t t, any_msg_t *m) {
  switch (t) {
  case ALTAR_MSG_SPEC: altar_spec_clear(&m->spec); break;
  case ALTAR_MSG_JOB: altar_job_msg_clear(&m->job); break;
  case ALTAR_MSG_STATUS: altar_status_event_clear(&m->status); break;
  case ALTAR_MSG_GROUP:
  case ALTAR_MSG_GROUP_PAGE: altar_group_event_clear(&m->group); break;
  case ALTAR_MSG_RECORD: altar_record_clear(&m->record); break;
  case ALTAR_MSG_CONTROL: altar_control_msg_clear(&m->control); break;
  }
}

int altar_codec_json_to_msgpack(altar_msg_type_t t, const char *json, size_t len, altar_buf_t *out,
                                altar_error_t *err) {
  if ((unsigned)t > ALTAR_MSG_GROUP_PAGE) return altar_error_set(err, ALTAR_EINVAL, "codec: unknown message type");
  any_msg_t m;
  memset(&m, 0, sizeof m);
  int rc = from_json(decoders[t], json, len, &m, altar_msg_type_name(t), err);
  if (!rc) rc = encoders[t](&m, out, err);
  clear_any(t, &m);
  return rc;
}

char *altar_codec_msgpack_to_json(altar_msg_type_t t, const void *data, size_t len, altar_error_t *err) {
  if ((unsigned)t > ALTAR_MSG_GROUP_PAGE) {
    altar_error_set(err, ALTAR_EINVAL, "codec: unknown message type");
    return NULL;
  }
  any_msg_t m;
  memset(&m, 0, sizeof m);
  char *out = NULL;
  if (!decoders[t](data, len, &m, err)) out = to_json(encoders[t], &m, altar_msg_type_name(t), err);
  clear_any(t, &m);
  return out;
}
