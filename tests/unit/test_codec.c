/* The wire schema: golden vectors (JSON ↔ msgpack byte for byte), round
 * trips, unknown and missing keys, truncation, wrong types, bounds, and every
 * decoder reading input that ends right before a no-access page. */
#include "altar/codec.h"
#include "altar/digest.h"
#include "core/codec_int.h"
#include "testutil.h"

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- helpers ---- */

/* A byte-string literal and its length (without the terminating NUL). */
#define B(lit) (lit), (sizeof(lit) - 1)

typedef union any_msg {
  altar_spec_t spec;
  altar_job_msg_t job;
  altar_status_event_t status;
  altar_group_event_t group;
  altar_record_t record;
  altar_control_msg_t control;
} any_msg_t;

static const altar_msg_type_t all_types[] = {ALTAR_MSG_SPEC,  ALTAR_MSG_JOB,    ALTAR_MSG_STATUS,
                                             ALTAR_MSG_GROUP, ALTAR_MSG_RECORD, ALTAR_MSG_CONTROL};

static int decode_any(altar_msg_type_t t, const void *data, size_t len, any_msg_t *m, altar_error_t *err) {
  switch (t) {
  case ALTAR_MSG_SPEC: return altar_decode_spec(data, len, &m->spec, err);
  case ALTAR_MSG_JOB: return altar_decode_job(data, len, &m->job, err);
  case ALTAR_MSG_STATUS: return altar_decode_status(data, len, &m->status, err);
  case ALTAR_MSG_GROUP: return altar_decode_group(data, len, &m->group, err);
  case ALTAR_MSG_RECORD: return altar_decode_record(data, len, &m->record, err);
  case ALTAR_MSG_CONTROL: return altar_decode_control(data, len, &m->control, err);
  case ALTAR_MSG_GROUP_PAGE: return altar_decode_group_page(data, len, &m->group, err);
  }
  return -1;
}

static int encode_any(altar_msg_type_t t, const any_msg_t *m, altar_buf_t *out, altar_error_t *err) {
  switch (t) {
  case ALTAR_MSG_SPEC: return altar_encode_spec(&m->spec, out, err);
  case ALTAR_MSG_JOB: return altar_encode_job(&m->job, out, err);
  case ALTAR_MSG_STATUS: return altar_encode_status(&m->status, out, err);
  case ALTAR_MSG_GROUP: return altar_encode_group(&m->group, out, err);
  case ALTAR_MSG_RECORD: return altar_encode_record(&m->record, out, err);
  case ALTAR_MSG_CONTROL: return altar_encode_control(&m->control, out, err);
  case ALTAR_MSG_GROUP_PAGE: return altar_encode_group_page(&m->group, out, err);
  }
  return -1;
}

static int from_json_any(altar_msg_type_t t, const char *text, any_msg_t *m, altar_error_t *err) {
  size_t n = strlen(text);
  switch (t) {
  case ALTAR_MSG_SPEC: return altar_spec_from_json(text, n, &m->spec, err);
  case ALTAR_MSG_JOB: return altar_job_from_json(text, n, &m->job, err);
  case ALTAR_MSG_STATUS: return altar_status_from_json(text, n, &m->status, err);
  case ALTAR_MSG_GROUP: return altar_group_from_json(text, n, &m->group, err);
  case ALTAR_MSG_RECORD: return altar_record_from_json(text, n, &m->record, err);
  case ALTAR_MSG_CONTROL: return altar_control_from_json(text, n, &m->control, err);
  case ALTAR_MSG_GROUP_PAGE: break; /* no bridge of its own: altar_codec_json_to_msgpack */
  }
  return -1;
}

static bool equal_any(altar_msg_type_t t, const any_msg_t *a, const any_msg_t *b) {
  switch (t) {
  case ALTAR_MSG_SPEC: return altar_spec_equal(&a->spec, &b->spec);
  case ALTAR_MSG_JOB:
    return a->job.v == b->job.v && a->job.attempt == b->job.attempt && a->job.submitted_at == b->job.submitted_at &&
           !strcmp(a->job.job_id, b->job.job_id) && altar_spec_equal(&a->job.spec, &b->job.spec);
  case ALTAR_MSG_STATUS: return altar_status_event_equal(&a->status, &b->status);
  case ALTAR_MSG_GROUP:
  case ALTAR_MSG_GROUP_PAGE: return altar_group_event_equal(&a->group, &b->group);
  case ALTAR_MSG_RECORD: return altar_record_equal(&a->record, &b->record);
  case ALTAR_MSG_CONTROL: {
    const altar_control_msg_t *x = &a->control, *y = &b->control;
    bool same = x->v == y->v && x->event == y->event && x->partition == y->partition && x->n_offsets == y->n_offsets &&
                x->lease_s == y->lease_s && x->ts == y->ts && !x->worker == !y->worker &&
                (!x->worker || !strcmp(x->worker, y->worker)) && !x->job_id == !y->job_id &&
                (!x->job_id || !strcmp(x->job_id, y->job_id)) && !x->group_key == !y->group_key &&
                (!x->group_key || !strcmp(x->group_key, y->group_key));
    for (size_t i = 0; same && i < x->n_offsets; i++) same = x->offsets[i] == y->offsets[i];
    return same;
  }
  }
  return false;
}

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

/* One golden vector: NAME.json beside NAME.msgpack. */
typedef struct vec {
  altar_msg_type_t type;
  char name[128];
  char *json;
  size_t json_len;
  uint8_t *mp;
  size_t mp_len;
} vec_t;

static vec_t vecs[64];
static size_t n_vecs;

static int cmp_names(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static int load_vectors(void) {
  char dir[1024];
  for (size_t ti = 0; ti < sizeof all_types / sizeof all_types[0]; ti++) {
    altar_msg_type_t t = all_types[ti];
    snprintf(dir, sizeof dir, "%s/schemas/vectors/%s", altar_test_source_dir(), altar_msg_type_name(t));
    DIR *d = opendir(dir);
    if (!d) {
      fprintf(stderr, "cannot open %s\n", dir);
      return -1;
    }
    char *names[64];
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 64) {
      size_t l = strlen(de->d_name);
      if (l > 5 && !strcmp(de->d_name + l - 5, ".json")) names[n++] = strndup(de->d_name, l - 5);
    }
    closedir(d);
    qsort(names, n, sizeof names[0], cmp_names);
    for (size_t i = 0; i < n; i++) {
      if (n_vecs >= sizeof vecs / sizeof vecs[0]) return -1;
      vec_t *v = &vecs[n_vecs++];
      v->type = t;
      snprintf(v->name, sizeof v->name, "%s/%s", altar_msg_type_name(t), names[i]);
      char path[1200];
      snprintf(path, sizeof path, "%s/%s.json", dir, names[i]);
      v->json = altar_test_read_file(path, &v->json_len);
      snprintf(path, sizeof path, "%s/%s.msgpack", dir, names[i]);
      v->mp = (uint8_t *)altar_test_read_file(path, &v->mp_len);
      free(names[i]);
      if (!v->json || !v->mp) {
        fprintf(stderr, "vector %s: missing .json or .msgpack\n", v->name);
        return -1;
      }
    }
  }
  return 0;
}

static int suite_init(void) { return load_vectors(); }

static int suite_clean(void) {
  for (size_t i = 0; i < n_vecs; i++) {
    free(vecs[i].json);
    free(vecs[i].mp);
  }
  n_vecs = 0;
  return 0;
}

/* The vector's JSON in the codec's output form: compact, keys sorted. */
static char *canonical_json(const char *text, size_t len) {
  json_t *j = json_loadb(text, len, 0, NULL);
  if (!j) return NULL;
  char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(j);
  return s;
}

#define ASSERT_ERR(rc, code, prefix)                                                                                   \
  do {                                                                                                                 \
    CU_ASSERT_EQUAL(rc, code);                                                                                         \
    if (strncmp(err.msg, prefix, strlen(prefix))) {                                                                    \
      fprintf(stderr, "\n  expected error starting \"%s\", got \"%s\" (rc %d)\n", prefix, err.msg, rc);                \
      CU_FAIL("error message does not name the field");                                                                \
    }                                                                                                                  \
  } while (0)

/* ---- golden vectors ---- */

static void test_vectors_present(void) {
  size_t per_type[6] = {0};
  for (size_t i = 0; i < n_vecs; i++) per_type[vecs[i].type]++;
  CU_ASSERT(n_vecs >= 17);
  for (int t = 0; t < 6; t++) CU_ASSERT(per_type[t] >= 2);
}

static void test_vectors_json_to_msgpack(void) {
  for (size_t i = 0; i < n_vecs; i++) {
    vec_t *v = &vecs[i];
    altar_buf_t out = {0};
    altar_error_t err = {0};
    int rc = altar_codec_json_to_msgpack(v->type, v->json, v->json_len, &out, &err);
    CU_ASSERT_EQUAL(rc, 0);
    bool same = !rc && out.len == v->mp_len && !memcmp(out.data, v->mp, out.len);
    if (!same) fprintf(stderr, "\n  %s: JSON does not encode to its msgpack bytes (%s)\n", v->name, err.msg);
    CU_ASSERT(same);
    altar_buf_free(&out);
  }
}

static void test_vectors_msgpack_to_json(void) {
  for (size_t i = 0; i < n_vecs; i++) {
    vec_t *v = &vecs[i];
    altar_error_t err = {0};
    char *got = altar_codec_msgpack_to_json(v->type, v->mp, v->mp_len, &err);
    CU_ASSERT_PTR_NOT_NULL(got);
    if (!got) {
      fprintf(stderr, "\n  %s: %s\n", v->name, err.msg);
      continue;
    }
    json_t *a = json_loads(got, 0, NULL), *b = json_loadb(v->json, v->json_len, 0, NULL);
    CU_ASSERT(a && b && json_equal(a, b));
    char *canon = canonical_json(v->json, v->json_len);
    CU_ASSERT(canon && !strcmp(canon, got)); /* byte-stable: compact, sorted */
    if (canon && strcmp(canon, got)) fprintf(stderr, "\n  %s:\n  got  %s\n  want %s\n", v->name, got, canon);
    free(canon);
    json_decref(a);
    json_decref(b);
    free(got);
  }
}

static void test_vectors_round_trip(void) {
  for (size_t i = 0; i < n_vecs; i++) {
    vec_t *v = &vecs[i];
    any_msg_t a, b;
    altar_error_t err = {0};
    CU_ASSERT_EQUAL(decode_any(v->type, v->mp, v->mp_len, &a, &err), 0);
    CU_ASSERT_EQUAL(from_json_any(v->type, v->json, &b, &err), 0);
    CU_ASSERT(equal_any(v->type, &a, &b));
    altar_buf_t out = {0};
    CU_ASSERT_EQUAL(encode_any(v->type, &a, &out, &err), 0);
    CU_ASSERT(out.len == v->mp_len && !memcmp(out.data, v->mp, out.len));
    /* decode(encode(x)) == x */
    any_msg_t c;
    CU_ASSERT_EQUAL(decode_any(v->type, out.data, out.len, &c, &err), 0);
    CU_ASSERT(equal_any(v->type, &a, &c));
    clear_any(v->type, &c);
    altar_buf_free(&out);
    clear_any(v->type, &a);
    clear_any(v->type, &b);
  }
}

/* Encoded maps always carry their keys in bytewise order, at every depth. */
static bool keys_sorted(const msgpack_object *o) {
  if (o->type == MSGPACK_OBJECT_ARRAY) {
    for (size_t i = 0; i < o->via.array.size; i++)
      if (!keys_sorted(&o->via.array.ptr[i])) return false;
  } else if (o->type == MSGPACK_OBJECT_MAP) {
    for (size_t i = 0; i < o->via.map.size; i++) {
      if (!keys_sorted(&o->via.map.ptr[i].val)) return false;
      if (i == 0) continue;
      const msgpack_object_str *p = &o->via.map.ptr[i - 1].key.via.str, *k = &o->via.map.ptr[i].key.via.str;
      size_t n = p->size < k->size ? p->size : k->size;
      int c = memcmp(p->ptr, k->ptr, n);
      if (c > 0 || (c == 0 && p->size >= k->size)) return false;
    }
  }
  return true;
}

static void test_vectors_canonical_keys(void) {
  for (size_t i = 0; i < n_vecs; i++) {
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    CU_ASSERT_EQUAL(msgpack_unpack_next(&u, (const char *)vecs[i].mp, vecs[i].mp_len, &off), MSGPACK_UNPACK_SUCCESS);
    CU_ASSERT(keys_sorted(&u.data));
    msgpack_unpacked_destroy(&u);
  }
}

static void test_peek_type(void) {
  for (size_t i = 0; i < n_vecs; i++) {
    char buf[16];
    int rc = altar_peek_type(vecs[i].mp, vecs[i].mp_len, buf, sizeof buf);
    if (vecs[i].type == ALTAR_MSG_JOB || vecs[i].type == ALTAR_MSG_STATUS || vecs[i].type == ALTAR_MSG_GROUP ||
        vecs[i].type == ALTAR_MSG_CONTROL) {
      CU_ASSERT_EQUAL(rc, 0);
      CU_ASSERT_STRING_EQUAL(buf, altar_msg_type_name(vecs[i].type));
    } else {
      CU_ASSERT_EQUAL(rc, ALTAR_EDECODE); /* spec and record carry no "type" */
    }
  }
  char buf[4];
  CU_ASSERT_EQUAL(altar_peek_type(B("\x81\xa4type\xa6status"), buf, sizeof buf), ALTAR_EDECODE); /* too small */
  CU_ASSERT_EQUAL(altar_peek_type(B("\x81\xa4type\x01"), buf, sizeof buf), ALTAR_EDECODE);
  CU_ASSERT_EQUAL(altar_peek_type(B("\x91\x01"), buf, sizeof buf), ALTAR_EDECODE);
  CU_ASSERT_EQUAL(altar_peek_type("", 0, buf, sizeof buf), ALTAR_EDECODE);
}

/* A replay reads only the ids of published group events: every group
 * vector gives the id full decoding gives; other messages are refused. */
static void test_peek_group_event_id(void) {
  size_t groups = 0;
  for (size_t i = 0; i < n_vecs; i++) {
    char *id = NULL;
    int rc = altar_peek_group_event_id(vecs[i].mp, vecs[i].mp_len, &id);
    if (vecs[i].type == ALTAR_MSG_GROUP) {
      groups++;
      altar_group_event_t g;
      altar_error_t err = {0};
      CU_ASSERT_EQUAL_FATAL(altar_decode_group(vecs[i].mp, vecs[i].mp_len, &g, &err), 0);
      CU_ASSERT_EQUAL(rc, 0);
      if (!rc && g.event_id) CU_ASSERT_STRING_EQUAL(id, g.event_id);
      altar_group_event_clear(&g);
    } else if (vecs[i].type == ALTAR_MSG_JOB || vecs[i].type == ALTAR_MSG_STATUS) {
      CU_ASSERT_EQUAL(rc, ALTAR_EDECODE); /* another type */
      CU_ASSERT_PTR_NULL(id);
    }
    free(id);
  }
  CU_ASSERT(groups > 0);
  char *id = NULL;
  CU_ASSERT_EQUAL(altar_peek_group_event_id(B("\x82\xa8"
                                              "event_id"
                                              "\xa2"
                                              "ab"
                                              "\xa4"
                                              "type"
                                              "\xa5"
                                              "group"),
                                            &id),
                  0);
  if (id) CU_ASSERT_STRING_EQUAL(id, "ab");
  free(id);
  id = NULL;
  CU_ASSERT_EQUAL(altar_peek_group_event_id(B("\x81\xa4"
                                              "type"
                                              "\xa5"
                                              "group"),
                                            &id),
                  ALTAR_EDECODE); /* no id */
  CU_ASSERT_EQUAL(altar_peek_group_event_id(B("\x81\xa8"
                                              "event_id"
                                              "\x01"),
                                            &id),
                  ALTAR_EDECODE); /* not a string */
  CU_ASSERT_EQUAL(altar_peek_group_event_id(B("\x81\xa8"
                                              "event_id"
                                              "\xa2"
                                              "a\x00"),
                                            &id),
                  ALTAR_EDECODE); /* NUL byte */
  CU_ASSERT_EQUAL(altar_peek_group_event_id(B("\x81\xa8"
                                              "event_id"
                                              "\xa2"
                                              "ab\xc1"),
                                            &id),
                  ALTAR_EDECODE); /* trailing */
  CU_ASSERT_EQUAL(altar_peek_group_event_id(B("\x91\x01"), &id), ALTAR_EDECODE);
  CU_ASSERT_EQUAL(altar_peek_group_event_id("", 0, &id), ALTAR_EDECODE);
  CU_ASSERT_PTR_NULL(id);
}

/* A message of one type fed to another type's decoder is named by "type". */
static void test_type_mismatch(void) {
  for (size_t i = 0; i < n_vecs; i++) {
    vec_t *v = &vecs[i];
    if (v->type != ALTAR_MSG_JOB && v->type != ALTAR_MSG_STATUS && v->type != ALTAR_MSG_GROUP &&
        v->type != ALTAR_MSG_CONTROL)
      continue;
    static const altar_msg_type_t typed[] = {ALTAR_MSG_JOB, ALTAR_MSG_STATUS, ALTAR_MSG_GROUP, ALTAR_MSG_CONTROL};
    for (size_t k = 0; k < 4; k++) {
      if (typed[k] == v->type) continue;
      any_msg_t m;
      altar_error_t err = {0};
      char want[32];
      snprintf(want, sizeof want, "%s.type: expected", altar_msg_type_name(typed[k]));
      int rc = decode_any(typed[k], v->mp, v->mp_len, &m, &err);
      ASSERT_ERR(rc, ALTAR_EDECODE, want);
      clear_any(typed[k], &m);
    }
  }
}

static void test_msg_type_names(void) {
  for (size_t i = 0; i < 5; i++) {
    altar_msg_type_t t;
    CU_ASSERT_EQUAL(altar_msg_type_parse(altar_msg_type_name(all_types[i]), &t), 0);
    CU_ASSERT_EQUAL(t, all_types[i]);
  }
  altar_msg_type_t t;
  CU_ASSERT_EQUAL(altar_msg_type_parse("jobs", &t), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_msg_type_parse(NULL, &t), ALTAR_EINVAL);
}

/* ---- unknown and missing keys ---- */

/* Appends an unknown key (with a nested value) to a top-level fixmap. */
static uint8_t *with_extra_key(const uint8_t *mp, size_t len, size_t *pn) {
  static const uint8_t extra[] = {0xaa, 'z',  'z',  '_',  'f', 'u', 't', 'u', 'r', 'e', '!', /* "zz_future!" */
                                  0x92, 0x01, 0x81, 0xa1, 'a', 0xc0};                        /* [1, {"a": nil}] */
  if (len == 0 || (mp[0] & 0xf0) != 0x80 || (mp[0] & 0x0f) == 15) return NULL;
  uint8_t *b = malloc(len + sizeof extra);
  memcpy(b, mp, len);
  b[0]++;
  memcpy(b + len, extra, sizeof extra);
  *pn = len + sizeof extra;
  return b;
}

static void test_unknown_keys_ignored(void) {
  for (size_t i = 0; i < n_vecs; i++) {
    vec_t *v = &vecs[i];
    size_t n = 0;
    uint8_t *b = with_extra_key(v->mp, v->mp_len, &n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    any_msg_t a, c;
    altar_error_t err = {0};
    CU_ASSERT_EQUAL(decode_any(v->type, v->mp, v->mp_len, &a, &err), 0);
    CU_ASSERT_EQUAL(decode_any(v->type, b, n, &c, &err), 0);
    CU_ASSERT(equal_any(v->type, &a, &c));
    altar_buf_t out = {0};
    CU_ASSERT_EQUAL(encode_any(v->type, &c, &out, &err), 0);
    CU_ASSERT(out.len == v->mp_len && !memcmp(out.data, v->mp, out.len)); /* dropped on re-encode */
    altar_buf_free(&out);
    clear_any(v->type, &a);
    clear_any(v->type, &c);
    free(b);
  }
  /* unknown keys nested inside known structures, in JSON */
  const char *doc = "{\"kind\":\"k\",\"image\":\"i\",\"command\":[\"a\"],\"new_field\":{\"x\":[1,2,{\"y\":null}]},"
                    "\"resources\":{\"count\":2,\"gpu\":\"a100\",\"future\":true},"
                    "\"inputs\":[{\"uri\":\"u\",\"logical_path\":\"p\",\"checksum_v2\":\"zz\"}]}";
  altar_spec_t s;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_spec_from_json(doc, strlen(doc), &s, &err), 0);
  CU_ASSERT_EQUAL(s.resources.count, 2);
  CU_ASSERT_STRING_EQUAL(s.resources.gpu, "a100");
  CU_ASSERT_EQUAL(s.n_inputs, 1);
  altar_spec_clear(&s);
}

static void test_missing_keys_defaulted(void) {
  altar_error_t err = {0};
  const char *sj = "{\"kind\":\"k\",\"image\":\"i\",\"command\":[\"run\"]}";
  altar_spec_t s;
  CU_ASSERT_EQUAL_FATAL(altar_spec_from_json(sj, strlen(sj), &s, &err), 0);
  CU_ASSERT_EQUAL(s.resources.count, 1);
  CU_ASSERT_PTR_NULL(s.resources.gpu);
  CU_ASSERT(!s.resources.memory_mb.set);
  CU_ASSERT(!s.timeout_s.set);
  CU_ASSERT_EQUAL(s.labels.n, 0);
  CU_ASSERT_EQUAL(s.n_inputs + s.n_outputs + s.n_avoid_hosts, 0);
  CU_ASSERT_PTR_NULL(s.plugin_identity);
  altar_spec_clear(&s);

  /* resources: nil reads as the defaults too */
  const char *sn = "{\"kind\":\"k\",\"image\":\"i\",\"command\":[],\"resources\":null}";
  CU_ASSERT_EQUAL(altar_spec_from_json(sn, strlen(sn), &s, &err), 0);
  CU_ASSERT_EQUAL(s.resources.count, 1);
  altar_spec_clear(&s);

  const char *jj = "{\"spec\":{\"kind\":\"k\",\"image\":\"i\",\"command\":[\"run\"]}}";
  altar_job_msg_t j;
  CU_ASSERT_EQUAL_FATAL(altar_job_from_json(jj, strlen(jj), &j, &err), 0);
  CU_ASSERT_EQUAL(j.v, 1);
  CU_ASSERT_EQUAL(j.attempt, 0);
  CU_ASSERT_STRING_EQUAL(j.job_id, "");
  CU_ASSERT_EQUAL(j.spec.n_avoid_hosts, 0);
  CU_ASSERT_EQUAL(j.submitted_at, 0.0);
  CU_ASSERT_EQUAL(j.spec.resources.count, 1);
  altar_job_msg_clear(&j);

  const char *stj = "{\"event\":\"state\",\"failure\":{}}";
  altar_status_event_t st;
  CU_ASSERT_EQUAL_FATAL(altar_status_from_json(stj, strlen(stj), &st, &err), 0);
  CU_ASSERT_EQUAL(st.v, 1);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_PENDING);
  CU_ASSERT_STRING_EQUAL(st.task_key, "");
  CU_ASSERT_STRING_EQUAL(st.kind, "");
  CU_ASSERT_STRING_EQUAL(st.handle.backend, "");
  CU_ASSERT_STRING_EQUAL(st.handle.external_id, "");
  CU_ASSERT_PTR_NULL(st.spec);
  CU_ASSERT_PTR_NULL(st.worker);
  CU_ASSERT(!st.source.set);
  CU_ASSERT_PTR_NOT_NULL_FATAL(st.failure);
  CU_ASSERT_STRING_EQUAL(st.failure->reason, "job_failed");
  CU_ASSERT(!st.failure->deterministic); /* the safe default: worth a retry */
  CU_ASSERT(!st.failure->exit_code.set);
  CU_ASSERT_PTR_NULL(st.failure->detail);
  altar_status_event_clear(&st);

  const char *gj = "{\"event\":\"fired\"}";
  altar_group_event_t g;
  CU_ASSERT_EQUAL_FATAL(altar_group_from_json(gj, strlen(gj), &g, &err), 0);
  CU_ASSERT_EQUAL(g.n_shards, 0);
  CU_ASSERT_STRING_EQUAL(g.event_id, "");
  CU_ASSERT_STRING_EQUAL(g.group_key, "");
  altar_group_event_clear(&g);

  altar_record_t r;
  CU_ASSERT_EQUAL_FATAL(altar_record_from_json("{}", 2, &r, &err), 0);
  CU_ASSERT_EQUAL(r.state, ALTAR_STATE_PENDING);
  CU_ASSERT_EQUAL(r.restart_count, 0);
  CU_ASSERT(!r.consumed);
  CU_ASSERT_PTR_NULL(r.spec);
  CU_ASSERT_PTR_NULL(r.failure);
  CU_ASSERT_STRING_EQUAL(r.kind, "");
  CU_ASSERT_EQUAL(r.handle.labels.n, 0);
  /* a defaulted record encodes (nothing NULL where a string is required) */
  altar_buf_t out = {0};
  CU_ASSERT_EQUAL(altar_encode_record(&r, &out, &err), 0);
  altar_buf_free(&out);
  altar_record_clear(&r);
}

static void test_required_fields(void) {
  static const struct {
    altar_msg_type_t t;
    const char *json;
    const char *want;
  } cases[] = {
      {ALTAR_MSG_SPEC, "{\"image\":\"i\",\"command\":[]}", "spec.kind: missing required field"},
      {ALTAR_MSG_SPEC, "{\"kind\":\"k\",\"command\":[]}", "spec.image: missing required field"},
      {ALTAR_MSG_SPEC, "{\"kind\":\"k\",\"image\":\"i\"}", "spec.command: missing required field"},
      {ALTAR_MSG_SPEC, "{\"kind\":\"k\",\"image\":\"i\",\"command\":[],\"inputs\":[{\"logical_path\":\"p\"}]}",
       "spec.inputs[0].uri: missing required field"},
      {ALTAR_MSG_SPEC, "{\"kind\":\"k\",\"image\":\"i\",\"command\":[],\"outputs\":[{\"uri\":\"u\"}]}",
       "spec.outputs[0].logical_path: missing required field"},
      {ALTAR_MSG_JOB, "{\"job_id\":\"j\"}", "job.spec: missing required field"},
      {ALTAR_MSG_JOB, "{\"spec\":{\"kind\":\"k\",\"command\":[]}}", "job.spec.image: missing required field"},
      {ALTAR_MSG_STATUS, "{\"state\":\"running\"}", "status.event: missing required field"},
      {ALTAR_MSG_STATUS, "{\"event\":\"state\",\"source\":{\"partition\":1}}",
       "status.source.topic: missing required field"},
      {ALTAR_MSG_GROUP, "{\"kind\":\"k\"}", "group.event: missing required field"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    any_msg_t m;
    altar_error_t err = {0};
    int rc = from_json_any(cases[i].t, cases[i].json, &m, &err);
    ASSERT_ERR(rc, ALTAR_EDECODE, cases[i].want);
    clear_any(cases[i].t, &m);
  }
  /* an empty spec (empty strings, empty command) is decodable: checking it is validate's job */
  altar_spec_t s;
  altar_error_t err = {0};
  const char *e = "{\"kind\":\"\",\"image\":\"\",\"command\":[]}";
  CU_ASSERT_EQUAL(altar_spec_from_json(e, strlen(e), &s, &err), 0);
  altar_spec_clear(&s);
}

/* ---- wrong types, named by path ---- */

static void test_wrong_types(void) {
  static const struct {
    altar_msg_type_t t;
    const char *json;
    const char *want;
  } cases[] = {
      {ALTAR_MSG_STATUS, "{\"event\":\"state\",\"handle\":{\"labels\":{\"fold\":3}}}",
       "status.handle.labels.fold: expected string"},
      {ALTAR_MSG_STATUS, "{\"event\":\"state\",\"handle\":{\"backend\":[]}}", "status.handle.backend: expected string"},
      {ALTAR_MSG_STATUS, "{\"event\":\"state\",\"ts\":\"now\"}", "status.ts: expected number"},
      {ALTAR_MSG_STATUS, "{\"event\":\"state\",\"state\":\"done\"}", "status.state: expected one of"},
      {ALTAR_MSG_STATUS, "{\"event\":\"exploded\"}", "status.event: expected one of"},
      {ALTAR_MSG_STATUS, "{\"event\":\"state\",\"failure\":\"oom\"}", "status.failure: expected map or nil"},
      {ALTAR_MSG_STATUS, "{\"event\":\"state\",\"failure\":{\"exit_code\":\"1\"}}",
       "status.failure.exit_code: expected integer or nil"},
      {ALTAR_MSG_STATUS, "{\"event\":\"state\",\"failure\":{\"deterministic\":1}}",
       "status.failure.deterministic: expected boolean"},
      {ALTAR_MSG_STATUS, "{\"event\":\"state\",\"source\":{\"topic\":\"t\",\"partition\":4294967296}}",
       "status.source.partition: partition out of range"},
      {ALTAR_MSG_STATUS, "{\"event\":\"state\",\"worker\":7}", "status.worker: expected string or nil"},
      {ALTAR_MSG_STATUS, "{\"event\":\"state\",\"spec\":{\"kind\":1}}", "status.spec.kind: expected string"},
      {ALTAR_MSG_STATUS, "{\"event\":\"state\",\"type\":\"job\"}", "status.type: expected \"status\""},
      {ALTAR_MSG_SPEC, "{\"kind\":\"k\",\"image\":\"i\",\"command\":\"run\"}", "spec.command: expected array"},
      {ALTAR_MSG_SPEC, "{\"kind\":\"k\",\"image\":\"i\",\"command\":[\"a\",2]}", "spec.command[1]: expected string"},
      {ALTAR_MSG_SPEC,
       "{\"kind\":\"k\",\"image\":\"i\",\"command\":[],\"inputs\":[{\"uri\":\"u\",\"logical_path\":\"p\"},"
       "{\"uri\":\"u\",\"logical_path\":\"p\",\"digest\":5}]}",
       "spec.inputs[1].digest: expected string or nil"},
      {ALTAR_MSG_SPEC, "{\"kind\":\"k\",\"image\":\"i\",\"command\":[],\"inputs\":[7]}",
       "spec.inputs[0]: expected map"},
      {ALTAR_MSG_SPEC, "{\"kind\":\"k\",\"image\":\"i\",\"command\":[],\"resources\":{\"count\":1.5}}",
       "spec.resources.count: expected integer"},
      {ALTAR_MSG_SPEC, "{\"kind\":\"k\",\"image\":\"i\",\"command\":[],\"timeout_s\":true}",
       "spec.timeout_s: expected integer or nil"},
      {ALTAR_MSG_SPEC, "{\"kind\":\"k\",\"image\":\"i\",\"command\":[],\"plugin_identity\":[]}",
       "spec.plugin_identity: expected map of strings or nil"},
      {ALTAR_MSG_SPEC, "{\"kind\":\"k\",\"image\":\"i\",\"command\":[],\"labels\":null}",
       "spec.labels: expected map of strings"},
      {ALTAR_MSG_SPEC, "[1,2]", "spec: expected map"},
      {ALTAR_MSG_JOB, "{\"attempt\":\"2\",\"spec\":{\"kind\":\"k\",\"image\":\"i\",\"command\":[]}}",
       "job.attempt: expected integer"},
      {ALTAR_MSG_JOB, "{\"avoid_hosts\":[\"a\",null],\"spec\":{\"kind\":\"k\",\"image\":\"i\",\"command\":[]}}",
       "job.avoid_hosts[1]: expected string"},
      {ALTAR_MSG_JOB, "{\"v\":0,\"spec\":{\"kind\":\"k\",\"image\":\"i\",\"command\":[]}}",
       "job.v: schema version must be >= 1"},
      {ALTAR_MSG_JOB, "{\"type\":\"status\",\"spec\":{\"kind\":\"k\",\"image\":\"i\",\"command\":[]}}",
       "job.type: expected \"job\""},
      {ALTAR_MSG_JOB, "{\"spec\":{\"kind\":\"k\",\"image\":\"i\",\"command\":[],\"labels\":{\"a\":{}}}}",
       "job.spec.labels.a: expected string"},
      {ALTAR_MSG_GROUP, "{\"event\":\"fired\",\"shards\":[{},{\"external_id\":[]}]}",
       "group.shards[1].external_id: expected string"},
      {ALTAR_MSG_GROUP, "{\"event\":\"fired\",\"shards\":{}}", "group.shards: expected array"},
      {ALTAR_MSG_GROUP, "{\"event\":\"dead\"}", "group.event: expected one of"},
      {ALTAR_MSG_RECORD, "{\"consumed\":1}", "record.consumed: expected boolean"},
      {ALTAR_MSG_RECORD, "{\"restart_count\":-1.0}", "record.restart_count: expected integer"},
      {ALTAR_MSG_RECORD, "{\"spec\":\"x\"}", "record.spec: expected map or nil"},
      {ALTAR_MSG_RECORD, "{\"handle\":{\"plugin_identity\":{\"abi\":null}}}",
       "record.handle.plugin_identity.abi: expected string"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    any_msg_t m;
    altar_error_t err = {0};
    int rc = from_json_any(cases[i].t, cases[i].json, &m, &err);
    ASSERT_ERR(rc, ALTAR_EDECODE, cases[i].want);
    clear_any(cases[i].t, &m);
  }
}

/* JSON numbers may stand for floats; floats never stand for integers. */
static void test_number_forms(void) {
  altar_status_event_t st;
  altar_error_t err = {0};
  const char *j = "{\"event\":\"state\",\"ts\":5}";
  CU_ASSERT_EQUAL_FATAL(altar_status_from_json(j, strlen(j), &st, &err), 0);
  CU_ASSERT_EQUAL(st.ts, 5.0);
  char *out = altar_status_to_json(&st, &err);
  CU_ASSERT(out && strstr(out, "\"ts\":5.0"));
  free(out);
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL(altar_encode_status(&st, &b, &err), 0);
  st.ts = NAN;
  altar_buf_t b2 = {0};
  ASSERT_ERR(altar_encode_status(&st, &b2, &err), ALTAR_EINVAL, "status.ts: expected a finite number");
  CU_ASSERT_EQUAL(b2.len, 0); /* nothing half-written */
  altar_buf_free(&b2);
  altar_status_event_clear(&st);
  /* a float64 NaN on the wire is refused by the decoder too */
  const uint8_t ts_key[] = {0xa2, 't', 's', 0xcb};
  uint8_t *p = NULL;
  for (size_t i = 0; i + sizeof ts_key + 8 <= b.len; i++) {
    if (!memcmp(b.data + i, ts_key, sizeof ts_key)) p = b.data + i + sizeof ts_key;
  }
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  memcpy(p, "\x7f\xf8\x00\x00\x00\x00\x00\x00", 8);
  int rc = altar_decode_status(b.data, b.len, &st, &err);
  ASSERT_ERR(rc, ALTAR_EDECODE, "status.ts: expected a finite number");
  altar_status_event_clear(&st);
  altar_buf_free(&b);
  /* float32 and integer timestamps are read as float64 and written back as float64 */
  const uint8_t f32[] = {0x82, 0xa5, 'e',  'v', 'e', 'n',  't',  0xa5, 's',  't', 'a',
                         't',  'e',  0xa2, 't', 's', 0xca, 0x40, 0x20, 0x00, 0x00}; /* 2.5f */
  CU_ASSERT_EQUAL(altar_decode_status(f32, sizeof f32, &st, &err), 0);
  CU_ASSERT_EQUAL(st.ts, 2.5);
  altar_status_event_clear(&st);
}

/* ---- hostile bytes ---- */

static void test_truncated_every_prefix(void) {
  for (size_t i = 0; i < n_vecs; i++) {
    vec_t *v = &vecs[i];
    for (size_t len = 0; len < v->mp_len; len++) {
      any_msg_t m;
      altar_error_t err = {0};
      int rc = decode_any(v->type, v->mp, len, &m, &err);
      CU_ASSERT(rc == ALTAR_EDECODE || rc == ALTAR_ETOOBIG);
      CU_ASSERT(err.msg[0] != '\0');
      clear_any(v->type, &m);
      char *j = altar_codec_msgpack_to_json(v->type, v->mp, len, &err);
      CU_ASSERT_PTR_NULL(j);
      free(j);
    }
  }
}

static void test_raw_malformed(void) {
  static const struct {
    const char *bytes;
    size_t len;
    int code;
    const char *want;
  } cases[] = {
      {B(""), ALTAR_EDECODE, "spec: empty input"},
      {B("\xc1"), ALTAR_EDECODE, "spec: invalid msgpack format byte"},
      {B("\x80\x00"), ALTAR_EDECODE, "spec: 1 trailing bytes"},
      /* array32 claiming 4 billion elements in 6 bytes: refused before any allocation */
      {B("\xdd\xff\xff\xff\xff\x00"), ALTAR_ETOOBIG, "spec: array of 4294967295 entries exceeds"},
      {B("\xdf\xff\xff\xff\xff\x00"), ALTAR_ETOOBIG, "spec: map of 4294967295 entries exceeds"},
      /* within the bound, but more elements than bytes left */
      {B("\xdc\x0f\xa0\x01\x02"), ALTAR_EDECODE, "spec: truncated"},
      {B("\xde\x03\xff\xa1k\x01"), ALTAR_EDECODE, "spec: truncated"},
      {B("\xdb\xff\xff\xff\xff"
         "abc"),
       ALTAR_ETOOBIG, "spec: string of 4294967295 bytes exceeds"},
      {B("\xc6\x7f\xff\xff\xff"), ALTAR_ETOOBIG, "spec: binary of 2147483647 bytes exceeds"},
      {B("\xc9\x00\x00\x00\x10\x01"), ALTAR_EDECODE, "spec: truncated"},
      {B("\x81\xa4kind\xda\x00\x10xx"), ALTAR_EDECODE, "spec.kind: truncated"},
      {B("\x81\xa4kind\xd9\x02\xc3\x28"), ALTAR_EDECODE, "spec.kind: expected UTF-8 text"},
      {B("\x81\xa4kind\xa3"
         "a\x00"
         "b"),
       ALTAR_EDECODE, "spec.kind: expected UTF-8 text without NUL"},
      {B("\x81\xa4kind\xa1k\x81\xa4kind\xa1k"), ALTAR_EDECODE, "spec: 8 trailing bytes"},
      {B("\x82\xa4kind\xa1k\xa4kind\xa1j"), ALTAR_EDECODE, "spec.kind: duplicate key"},
      {B("\x81\x01\x02"), ALTAR_EDECODE, "spec: map key: expected string"},
      {B("\x85\xa4kind\xa1k\xa5image\xa1i\xa7"
         "command\x90\xa6labels\x82\xa1"
         "a\xa1"
         "1\xa1"
         "a\xa1"
         "2\xa1z\xc0"),
       ALTAR_EDECODE, "spec.labels.a: duplicate key"},
      {B("\x84\xa4kind\xa1k\xa5image\xa1i\xa7"
         "command\x90\xa6labels\x81\xa1k\xc4\x01x"),
       ALTAR_EDECODE, "spec.labels.k: expected string"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    altar_spec_t s;
    altar_error_t err = {0};
    int rc = altar_decode_spec(cases[i].bytes, cases[i].len, &s, &err);
    ASSERT_ERR(rc, cases[i].code, cases[i].want);
    altar_spec_clear(&s);
  }
}

/* A spec JSON document with a label value of n bytes, n labels, or n args. */
static char *big_spec_json(size_t str_len, size_t n_labels, size_t n_args) {
  altar_buf_t b = {0};
  altar_buf_append_str(&b, "{\"kind\":\"k\",\"image\":\"i\",\"command\":[");
  for (size_t i = 0; i < n_args; i++) altar_buf_append_str(&b, i ? ",\"a\"" : "\"a\"");
  altar_buf_append_str(&b, "],\"labels\":{\"big\":\"");
  for (size_t i = 0; i < str_len; i++) altar_buf_append(&b, "x", 1);
  altar_buf_append_str(&b, "\"");
  for (size_t i = 0; i < n_labels; i++) {
    char kv[48];
    snprintf(kv, sizeof kv, ",\"l%zu\":\"v\"", i);
    altar_buf_append_str(&b, kv);
  }
  altar_buf_append_str(&b, "}}");
  return altar_buf_detach(&b);
}

static void test_bounds(void) {
  altar_error_t err = {0};
  altar_spec_t s;
  /* at the bounds: accepted */
  char *j = big_spec_json(ALTAR_MAX_STRING, ALTAR_MAX_MAP - 1, ALTAR_MAX_ARRAY);
  CU_ASSERT_EQUAL(altar_spec_from_json(j, strlen(j), &s, &err), 0);
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL(altar_encode_spec(&s, &b, &err), 0);
  altar_spec_clear(&s);
  altar_buf_free(&b);
  free(j);
  /* one past each bound: refused, naming the field */
  j = big_spec_json(ALTAR_MAX_STRING + 1, 0, 1);
  ASSERT_ERR(altar_spec_from_json(j, strlen(j), &s, &err), ALTAR_ETOOBIG,
             "spec.labels.big: string of 65537 bytes exceeds the size bound of 65536 bytes");
  altar_spec_clear(&s);
  free(j);
  j = big_spec_json(1, ALTAR_MAX_MAP, 1);
  ASSERT_ERR(altar_spec_from_json(j, strlen(j), &s, &err), ALTAR_ETOOBIG, "spec.labels: map");
  altar_spec_clear(&s);
  free(j);
  j = big_spec_json(1, 0, ALTAR_MAX_ARRAY + 1);
  ASSERT_ERR(altar_spec_from_json(j, strlen(j), &s, &err), ALTAR_ETOOBIG, "spec.command: array");
  altar_spec_clear(&s);
  free(j);

  /* encoders refuse what decoders would refuse */
  altar_spec_t *sp = altar_spec_new("k", "i");
  for (size_t i = 0; i <= ALTAR_MAX_ARRAY; i++) altar_spec_add_arg(sp, "a");
  ASSERT_ERR(altar_encode_spec(sp, &b, &err), ALTAR_ETOOBIG,
             "spec.command: array of 4097 entries exceeds the size bound of 4096 entries");
  CU_ASSERT_EQUAL(b.len, 0);
  altar_spec_free(sp);
  sp = altar_spec_new("k", "i");
  char *longv = malloc(ALTAR_MAX_STRING + 2);
  memset(longv, 'v', ALTAR_MAX_STRING + 1);
  longv[ALTAR_MAX_STRING + 1] = '\0';
  altar_spec_set_label(sp, "fold", longv);
  ASSERT_ERR(altar_encode_spec(sp, &b, &err), ALTAR_ETOOBIG,
             "spec.labels.fold: string of 65537 bytes exceeds the size bound of 65536 bytes");
  free(longv);
  altar_spec_set_label(sp, "fold", "\xff");
  ASSERT_ERR(altar_encode_spec(sp, &b, &err), ALTAR_EINVAL, "spec.labels.fold: not valid UTF-8");
  altar_spec_free(sp);
  /* the path is collected on the way out: an element of an array in a field */
  sp = altar_spec_new("k", "i");
  altar_spec_add_input(sp, "u0", "p0", NULL, NULL);
  altar_spec_add_input(sp, "u1", "p1", NULL, NULL);
  free(sp->inputs[1].uri);
  sp->inputs[1].uri = strdup("bad\xc3");
  ASSERT_ERR(altar_encode_spec(sp, &b, &err), ALTAR_EINVAL, "spec.inputs[1].uri: not valid UTF-8");
  altar_spec_add_arg(sp, "\xff");
  ASSERT_ERR(altar_encode_spec(sp, &b, &err), ALTAR_EINVAL, "spec.command[0]: not valid UTF-8");
  CU_ASSERT_EQUAL(b.len, 0);
  altar_spec_free(sp);
  altar_spec_t empty;
  memset(&empty, 0, sizeof empty);
  ASSERT_ERR(altar_encode_spec(&empty, &b, &err), ALTAR_EINVAL, "spec.image: missing required field");

  /* depth: 17 nested arrays under an unknown key */
  altar_buf_t d = {0};
  altar_buf_append_str(&d, "{\"kind\":\"k\",\"image\":\"i\",\"command\":[],\"x\":");
  for (int i = 0; i < 16; i++) altar_buf_append_str(&d, "[");
  for (int i = 0; i < 16; i++) altar_buf_append_str(&d, "]");
  altar_buf_append_str(&d, "}");
  ASSERT_ERR(altar_spec_from_json((char *)d.data, d.len, &s, &err), ALTAR_ETOOBIG, "spec.x");
  altar_spec_clear(&s);
  altar_buf_free(&d);
  /* the same depth in raw msgpack: fixmap{"x": 16 nested fixarrays} */
  uint8_t raw[32] = {0x81, 0xa1, 'x'};
  for (int i = 0; i < 16; i++) raw[3 + i] = i == 15 ? 0x90 : 0x91;
  ASSERT_ERR(altar_decode_spec(raw, 19, &s, &err), ALTAR_ETOOBIG, "spec.x");
  altar_spec_clear(&s);
  raw[3 + 14] = 0x90; /* 16 levels in all: within the bound, then a missing kind */
  ASSERT_ERR(altar_decode_spec(raw, 18, &s, &err), ALTAR_EDECODE, "spec.command: missing required field");
  altar_spec_clear(&s);

  /* a message larger than ALTAR_MAX_MESSAGE is refused before parsing */
  size_t huge = (size_t)ALTAR_MAX_MESSAGE + 1;
  uint8_t *hb = calloc(1, huge);
  ASSERT_ERR(altar_decode_record(hb, huge, &(altar_record_t){0}, &err), ALTAR_ETOOBIG, "record: message of");
  free(hb);
  /* an encoded message past the bound is refused too (many inputs of long strings) */
  sp = altar_spec_new("k", "i");
  char *s60k = malloc(60001);
  memset(s60k, 'u', 60000);
  s60k[60000] = '\0';
  for (int i = 0; i < 80; i++) altar_spec_add_input(sp, s60k, "p", NULL, NULL);
  ASSERT_ERR(altar_encode_spec(sp, &b, &err), ALTAR_ETOOBIG, "encode: message of");
  CU_ASSERT_EQUAL(b.len, 0);
  free(s60k);
  altar_spec_free(sp);
  altar_buf_free(&b);
}

/* Encoders refuse values a decoder would refuse, naming the field. */
static void test_encoder_refusals(void) {
  altar_error_t err = {0};
  altar_buf_t b = {0};
  altar_job_msg_t j;
  memset(&j, 0, sizeof j);
  ASSERT_ERR(altar_encode_job(&j, &b, &err), ALTAR_EINVAL, "job.job_id: missing required field");
  j.job_id = "j";
  j.spec.kind = "k";
  j.spec.image = "i";
  j.v = -1;
  ASSERT_ERR(altar_encode_job(&j, &b, &err), ALTAR_EINVAL, "job.v: schema version must be >= 1");
  altar_status_event_t st;
  memset(&st, 0, sizeof st);
  st.task_key = "k";
  st.kind = "kind";
  ASSERT_ERR(altar_encode_status(&st, &b, &err), ALTAR_EINVAL, "status.handle.backend: missing required field");
  st.handle.backend = "process";
  st.handle.external_id = "1";
  st.state = (altar_state_t)7;
  ASSERT_ERR(altar_encode_status(&st, &b, &err), ALTAR_EINVAL, "status: state: unknown state");
  st.state = ALTAR_STATE_RUNNING;
  st.source.set = true; /* set, but no topic */
  ASSERT_ERR(altar_encode_status(&st, &b, &err), ALTAR_EINVAL, "status.source.topic: missing required field");
  st.source.set = false;
  CU_ASSERT_EQUAL(altar_encode_status(&st, &b, &err), 0);
  CU_ASSERT(b.len > 0);
  altar_group_event_t g;
  memset(&g, 0, sizeof g);
  g.event = (altar_group_event_kind_t)5;
  ASSERT_ERR(altar_encode_group(&g, &b, &err), ALTAR_EINVAL, "group: event: unknown kind");
  size_t before = b.len;
  ASSERT_ERR(altar_encode_record(NULL, &b, &err), ALTAR_EINVAL, "record: NULL argument");
  CU_ASSERT_EQUAL(b.len, before); /* failed encodes append nothing */
  altar_buf_free(&b);
}

static void test_json_errors(void) {
  altar_error_t err = {0};
  altar_spec_t s;
  ASSERT_ERR(altar_spec_from_json("{\"kind\":", 8, &s, &err), ALTAR_EDECODE, "spec: invalid JSON");
  altar_spec_clear(&s);
  const char *dup = "{\"kind\":\"a\",\"kind\":\"b\",\"image\":\"i\",\"command\":[]}";
  ASSERT_ERR(altar_spec_from_json(dup, strlen(dup), &s, &err), ALTAR_EDECODE, "spec: invalid JSON");
  altar_spec_clear(&s);
  const char *nul = "{\"kind\":\"a\\u0000b\",\"image\":\"i\",\"command\":[]}";
  ASSERT_ERR(altar_spec_from_json(nul, strlen(nul), &s, &err), ALTAR_EDECODE, "spec: invalid JSON");
  altar_spec_clear(&s);
  altar_buf_t b = {0};
  ASSERT_ERR(altar_codec_json_to_msgpack((altar_msg_type_t)99, "{}", 2, &b, &err), ALTAR_EINVAL, "codec:");
  CU_ASSERT_PTR_NULL(altar_codec_msgpack_to_json((altar_msg_type_t)99, "\x80", 1, &err));
}

/* ---- no reads past the end: input placed right before a PROT_NONE page ---- */

typedef struct guard {
  uint8_t *base;
  size_t page;
} guard_t;

static guard_t guard_new(void) {
  guard_t g = {.page = (size_t)sysconf(_SC_PAGESIZE)};
  g.base = mmap(NULL, 2 * g.page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CU_ASSERT_FATAL(g.base != MAP_FAILED);
  CU_ASSERT_FATAL(mprotect(g.base + g.page, g.page, PROT_NONE) == 0);
  return g;
}

/* Copies data so that its last byte is the last readable one. */
static const uint8_t *guard_place(guard_t *g, const void *data, size_t len) {
  uint8_t *p = g->base + g->page - len;
  memcpy(p, data, len);
  return p;
}

static void test_guard_page(void) {
  guard_t g = guard_new();
  for (size_t i = 0; i < n_vecs; i++) {
    vec_t *v = &vecs[i];
    CU_ASSERT_FATAL(v->mp_len <= g.page);
    for (size_t len = 0; len <= v->mp_len; len++) {
      const uint8_t *p = guard_place(&g, v->mp, len);
      any_msg_t m;
      altar_error_t err = {0};
      int rc = decode_any(v->type, p, len, &m, &err);
      CU_ASSERT_EQUAL(rc == 0, len == v->mp_len);
      clear_any(v->type, &m);
      char buf[16];
      altar_peek_type(p, len, buf, sizeof buf);
    }
    /* and the JSON form, through the JSON decoders */
    if (v->json_len <= g.page) {
      const char *p = (const char *)guard_place(&g, v->json, v->json_len);
      altar_buf_t out = {0};
      altar_error_t err = {0};
      CU_ASSERT_EQUAL(altar_codec_json_to_msgpack(v->type, p, v->json_len, &out, &err), 0);
      altar_buf_free(&out);
    }
  }
  munmap(g.base, 2 * g.page);
}

/* ---- standalone JSON of the model's parts ---- */

static void test_parts_to_json(void) {
  altar_error_t err = {0};
  altar_failure_t *f = altar_failure_exit(137, "killed", false);
  char *s = altar_failure_to_json(f, &err);
  CU_ASSERT_STRING_EQUAL(s,
                         "{\"detail\":\"killed\",\"deterministic\":false,\"exit_code\":137,\"reason\":\"exit_137\"}");
  free(s);
  s = altar_failure_to_json(NULL, &err);
  CU_ASSERT_STRING_EQUAL(s, "null");
  free(s);
  altar_handle_t h;
  altar_handle_init(&h, "process", "pid-1");
  altar_strmap_set(&h.labels, "fold", "0");
  s = altar_handle_to_json(&h, &err);
  CU_ASSERT_STRING_EQUAL(s, "{\"backend\":\"process\",\"external_id\":\"pid-1\",\"labels\":{\"fold\":\"0\"},"
                            "\"plugin_identity\":null}");
  free(s);
  altar_status_t st;
  altar_status_init(&st, &h, ALTAR_STATE_FAILED, f);
  s = altar_status_result_to_json(&st, &err);
  CU_ASSERT_PTR_NOT_NULL(s);
  CU_ASSERT(s && !strncmp(s, "{\"failure\":{\"detail\":\"killed\"", 29) && strstr(s, "\"state\":\"failed\"}"));
  free(s);
  altar_status_clear(&st);
  altar_handle_clear(&h);
}

/* A canonical status message hands its spec's bytes over (exactly what
 * altar_encode_spec writes); any deviation from canonical form does not. */
static altar_status_event_t *kept_event(void) {
  static altar_status_event_t e;
  memset(&e, 0, sizeof e);
  e.v = 1;
  e.event = ALTAR_EV_SUBMITTED;
  e.kind = strdup("train");
  e.task_key = strdup("tk-1");
  altar_handle_init(&e.handle, "process", "t-1");
  altar_strmap_set(&e.handle.labels, "fold", "3");
  e.ts = 1700000000.25;
  e.spec = altar_spec_new("train", "registry.example.org/some/long/image/name:1.4.2"); /* str8 */
  altar_spec_add_arg(e.spec, "python");
  altar_spec_set_label(e.spec, "z", "1");
  altar_spec_set_label(e.spec, "a", "2");
  e.spec->resources.count = 300;                    /* uint16 */
  e.spec->timeout_s = (altar_opt_i64_t){true, 200}; /* uint8 */
  return &e;
}

static bool same_bytes(const void *x, size_t xlen, const void *y, size_t ylen) {
  return xlen == ylen && (!xlen || !memcmp(x, y, xlen));
}
static bool same_enc(const altar_spec_enc_t *x, const altar_spec_enc_t *y) {
  return same_bytes(altar_spec_enc_data(x), altar_spec_enc_len(x), altar_spec_enc_data(y), altar_spec_enc_len(y));
}
static bool same_fixed(const altar_record_fixed_t *x, const altar_record_fixed_t *y) {
  return same_bytes(altar_record_fixed_data(x), altar_record_fixed_len(x), altar_record_fixed_data(y),
                    altar_record_fixed_len(y));
}

/* The fast path with ALTAR_DECODE_SPEC_BYTES against it without, f (its
 * event, when fast): the same verdict, no spec struct, the same spec and
 * fixed bytes, every other field equal. */
static void spec_bytes_agrees(const uint8_t *data, size_t len, bool fast, const altar_status_event_t *f) {
  altar_arena_t a = {0};
  altar_status_event_t d;
  bool dry = altar_decode_status_canonical(data, len, &a, ALTAR_DECODE_SPEC_BYTES, &d) == 0;
  CU_ASSERT_EQUAL(dry, fast);
  CU_ASSERT(d.spec == NULL);
  if (dry && fast) {
    CU_ASSERT(same_enc(&d.spec_enc, &f->spec_enc));
    CU_ASSERT(same_fixed(&d.record_fixed, &f->record_fixed));
    CU_ASSERT((f->spec != NULL) == (altar_spec_enc_len(&d.spec_enc) > 0)); /* a spec, present as bytes */
    altar_status_event_t with = d;
    with.spec = f->spec;
    CU_ASSERT(altar_status_event_equal(&with, f));
  }
  if (!dry)
    CU_ASSERT(d.task_key == NULL && altar_spec_enc_len(&d.spec_enc) == 0 && d.handle.labels.n == 0); /* left zeroed */
  altar_arena_free(&a);
}

/* The fast path against the full decoder on the same bytes: it accepts
 * exactly the messages that are valid and in our encoder's own form, and
 * then gives the same event (spec bytes included); so does it with the spec
 * kept as bytes only. Returns its verdict. */
static bool fast_agrees(const uint8_t *data, size_t len) {
  altar_arena_t a = {0};
  altar_status_event_t f, s;
  altar_error_t err = {0};
  bool fast = altar_decode_status_canonical(data, len, &a, 0, &f) == 0;
  spec_bytes_agrees(data, len, fast, &f);
  bool full = altar_decode_status(data, len, &s, &err) == 0;
  altar_buf_t enc = {0};
  bool own = full && altar_encode_status(&s, &enc, &err) == 0 && enc.len == len && !memcmp(enc.data, data, len);
  CU_ASSERT_EQUAL(fast, own);
  if (fast && full) {
    CU_ASSERT(altar_status_event_equal(&f, &s));
    CU_ASSERT(same_enc(&f.spec_enc, &s.spec_enc));
    altar_buf_reset(&enc);
    CU_ASSERT(altar_encode_status(&f, &enc, &err) == 0 && enc.len == len && !memcmp(enc.data, data, len));
    /* its handle and kind bytes are a record's fixed part */
    altar_record_t rec = {.handle = f.handle, .kind = f.kind};
    altar_buf_reset(&enc);
    CU_ASSERT(altar__encode_record_fixed(&rec, &enc, &err) == 0 && enc.len == altar_record_fixed_len(&f.record_fixed) &&
              !memcmp(enc.data, altar_record_fixed_data(&f.record_fixed), enc.len));
  }
  if (!fast) CU_ASSERT(f.task_key == NULL && f.spec == NULL && f.handle.labels.n == 0); /* left zeroed */
  altar_buf_free(&enc);
  altar_status_event_clear(&s);
  altar_arena_free(&a);
  return fast;
}

static bool decode_keeps(const uint8_t *data, size_t len, bool *pok) {
  altar_status_event_t d;
  altar_error_t err = {0};
  *pok = altar_decode_status(data, len, &d, &err) == 0;
  bool kept = altar_spec_enc_len(&d.spec_enc) > 0;
  CU_ASSERT_EQUAL(fast_agrees(data, len), kept);
  if (kept) {
    altar_buf_t se = {0};
    CU_ASSERT(altar_encode_spec(d.spec, &se, &err) == 0);
    CU_ASSERT(se.len == altar_spec_enc_len(&d.spec_enc) && !memcmp(se.data, altar_spec_enc_data(&d.spec_enc), se.len));
    altar_buf_free(&se);
  }
  altar_status_event_clear(&d);
  return kept;
}

/* bytes with `ins` inserted at `at` and `del` bytes removed there */
static void splice(const altar_buf_t *src, size_t at, size_t del, const void *ins, size_t n, altar_buf_t *out) {
  altar_buf_reset(out);
  altar_buf_append(out, src->data, at);
  altar_buf_append(out, ins, n);
  altar_buf_append(out, src->data + at + del, src->len - at - del);
}

static size_t find_bytes(const altar_buf_t *b, const void *pat, size_t n) {
  for (size_t i = 0; i + n <= b->len; i++)
    if (!memcmp(b->data + i, pat, n)) return i;
  CU_FAIL("pattern not found");
  return 0;
}

static void test_spec_bytes_kept_when_canonical(void) {
  altar_status_event_t *e = kept_event();
  altar_buf_t b = {0}, v = {0};
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_encode_status(e, &b, &err) == 0);
  bool ok;
  CU_ASSERT(decode_keeps(b.data, b.len, &ok));
  CU_ASSERT(ok);
  /* timeout_s 200 as uint16 instead of uint8: decodes, not kept */
  size_t at = find_bytes(&b, "timeout_s\xcc\xc8", 11);
  splice(&b, at + 9, 2, "\xcd\x00\xc8", 3, &v);
  CU_ASSERT(!decode_keeps(v.data, v.len, &ok));
  CU_ASSERT(ok);
  /* ts as float32: decodes, not kept */
  at = find_bytes(&b, "\xa2ts\xcb", 4);
  float f = 1700000000.0f;
  uint32_t u;
  memcpy(&u, &f, 4);
  uint8_t f32[5] = {0xca, (uint8_t)(u >> 24), (uint8_t)(u >> 16), (uint8_t)(u >> 8), (uint8_t)u};
  splice(&b, at + 3, 9, f32, 5, &v);
  CU_ASSERT(!decode_keeps(v.data, v.len, &ok));
  CU_ASSERT(ok);
  /* spec labels out of order ("z" before "a"): decodes, not kept */
  at = find_bytes(&b,
                  "\xa1"
                  "a\xa1"
                  "2\xa1z\xa1"
                  "1",
                  8);
  splice(&b, at, 8,
         "\xa1z\xa1"
         "1\xa1"
         "a\xa1"
         "2",
         8, &v);
  CU_ASSERT(!decode_keeps(v.data, v.len, &ok));
  CU_ASSERT(ok);
  /* a spec without its timeout_s key: decodes, not kept */
  at = find_bytes(&b, "\xa9timeout_s", 10);
  size_t spec_map = find_bytes(&b, "\xa4spec\x89", 6) + 5;
  altar_buf_t w = {0};
  splice(&b, at, 12, "", 0, &w);          /* drop key and value (0xcc 0xc8) */
  splice(&w, spec_map, 1, "\x88", 1, &v); /* 8 entries now */
  CU_ASSERT(!decode_keeps(v.data, v.len, &ok));
  CU_ASSERT(ok);
  altar_buf_free(&w);
  altar_buf_free(&v);
  altar_buf_free(&b);
  altar_status_event_clear(e);
}

/* Every string of a spec is checked (UTF-8, no NUL) whether the spec is
 * built or kept as bytes only: one bad byte in any of them and both modes
 * decline, as the full decoder refuses. */
static void test_spec_strings_checked_in_both_modes(void) {
  altar_status_event_t e = {.v = 1, .event = ALTAR_EV_SUBMITTED, .ts = 5.5};
  e.kind = "train";
  e.task_key = "tk";
  altar_handle_init(&e.handle, "process", "t-1");
  e.spec = altar_spec_new("sQ0", "iQ1");
  altar_spec_add_arg(e.spec, "cQ2");
  altar_spec_add_input(e.spec, "uQ3", "lQ4", "kQ5", "dQ6");
  altar_spec_set_label(e.spec, "aQ7", "vQ8");
  altar_spec_add_output(e.spec, "oQ9", "pQA");
  e.spec->plugin_identity = altar_strmap_new();
  altar_strmap_set(e.spec->plugin_identity, "xQB", "yQC");
  altar_spec_set_gpu(e.spec, "gQD", 1);
  altar_buf_t b = {0};
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_encode_status(&e, &b, &err) == 0);
  CU_ASSERT(fast_agrees(b.data, b.len)); /* both modes accept it as it is */
  const char marks[] = "0123456789ABCD";
  for (size_t m = 0; m < sizeof marks - 1; m++) {
    char pat[2] = {'Q', marks[m]};
    size_t at = find_bytes(&b, pat, 2) + 1;
    const uint8_t bad[] = {0xff, 0x00, 0xc3}; /* never UTF-8; NUL; a lead byte cut short */
    for (size_t k = 0; k < sizeof bad; k++) {
      uint8_t keep = b.data[at];
      b.data[at] = bad[k];
      altar_status_event_t d;
      CU_ASSERT(altar_decode_status(b.data, b.len, &d, &err) != 0);
      altar_status_event_clear(&d);
      altar_arena_t a = {0};
      CU_ASSERT(altar_decode_status_canonical(b.data, b.len, &a, ALTAR_DECODE_SPEC_BYTES, &d) == ALTAR_ENOTSUP);
      CU_ASSERT(altar_decode_status_canonical(b.data, b.len, &a, 0, &d) == ALTAR_ENOTSUP);
      altar_arena_free(&a);
      CU_ASSERT(!fast_agrees(b.data, b.len));
      b.data[at] = keep;
    }
  }
  altar_buf_free(&b);
  altar_spec_free(e.spec);
  altar_handle_clear(&e.handle);
}

/* A spec's outputs read from its canonical bytes (what the reconciler reads
 * of each member when a group fires): the same outputs as the full decoder,
 * in order, placed in the arena; a spec in any other form, or with a bad
 * string anywhere, is declined with nothing left in the arena; so is every
 * prefix and every spec vector not in our own form. */
static bool outputs_agree(const uint8_t *data, size_t len) {
  altar_arena_t a = {0};
  altar_transfer_t *o;
  size_t n;
  bool fast = altar_decode_spec_outputs_canonical(data, len, &a, &o, &n) == 0;
  if (!fast) CU_ASSERT(o == NULL && n == 0 && altar_arena_mark(&a).head == NULL);
  altar_spec_t s;
  altar_error_t err = {0};
  bool full = altar_decode_spec(data, len, &s, &err) == 0;
  altar_buf_t enc = {0};
  bool own = full && altar_encode_spec(&s, &enc, &err) == 0 && enc.len == len && !memcmp(enc.data, data, len);
  CU_ASSERT_EQUAL(fast, own);
  if (fast && full) {
    CU_ASSERT_EQUAL_FATAL(n, s.n_outputs);
    for (size_t i = 0; i < n; i++) {
      CU_ASSERT_STRING_EQUAL(o[i].uri, s.outputs[i].uri);
      CU_ASSERT_STRING_EQUAL(o[i].logical_path, s.outputs[i].logical_path);
      CU_ASSERT((o[i].digest == NULL) == (s.outputs[i].digest == NULL));
      if (o[i].digest && s.outputs[i].digest) CU_ASSERT_STRING_EQUAL(o[i].digest, s.outputs[i].digest);
      CU_ASSERT((o[i].locality_key == NULL) == (s.outputs[i].locality_key == NULL));
    }
  }
  altar_buf_free(&enc);
  altar_spec_clear(&s);
  altar_arena_free(&a);
  return fast;
}

static void test_spec_outputs_fast_path(void) {
  altar_spec_t *s = altar_spec_new("train", "img");
  altar_spec_add_arg(s, "python");
  altar_spec_add_input(s, "gs://b/in", "in.txt", "k", "sha256:00");
  altar_spec_set_label(s, "fold", "3");
  altar_spec_add_output(s, "gs://b/out/1", "o/1");
  altar_spec_add_output(s, "gs://b/out/2", "o/2");
  s->outputs[1].digest = strdup("sha256:ab");
  altar_buf_t b = {0}, v = {0};
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_encode_spec(s, &b, &err) == 0);
  altar_arena_t a = {0};
  altar_transfer_t *o;
  size_t n;
  CU_ASSERT_FATAL(altar_decode_spec_outputs_canonical(b.data, b.len, &a, &o, &n) == 0);
  CU_ASSERT_FATAL(n == 2);
  CU_ASSERT_STRING_EQUAL(o[0].uri, "gs://b/out/1");
  CU_ASSERT_STRING_EQUAL(o[1].logical_path, "o/2");
  CU_ASSERT(o[0].digest == NULL && o[1].digest && !strcmp(o[1].digest, "sha256:ab"));
  altar_arena_free(&a);
  CU_ASSERT(outputs_agree(b.data, b.len));
  /* every prefix is declined */
  for (size_t k = 0; k < b.len; k++) CU_ASSERT(!outputs_agree(b.data, k));
  /* timeout_s nil written as a missing key: decodes, not in our form */
  size_t at = find_bytes(&b, "\xa9timeout_s\xc0", 11);
  altar_buf_t w = {0};
  splice(&b, at, 11, "", 0, &w);
  splice(&w, 0, 1, "\x88", 1, &v);
  CU_ASSERT(!outputs_agree(v.data, v.len));
  altar_buf_free(&w);
  /* a bad byte in a string before, inside and after the outputs */
  const char *marks[] = {"python", "fold", "o/2", "img"};
  for (size_t m = 0; m < sizeof marks / sizeof *marks; m++) {
    at = find_bytes(&b, marks[m], strlen(marks[m]));
    uint8_t keep = b.data[at];
    b.data[at] = 0xff;
    CU_ASSERT(!outputs_agree(b.data, b.len));
    b.data[at] = keep;
  }
  /* a spec with no outputs */
  altar_spec_t *bare = altar_spec_new("train", "img");
  altar_spec_add_arg(bare, "true");
  altar_buf_reset(&v);
  CU_ASSERT_FATAL(altar_encode_spec(bare, &v, &err) == 0);
  CU_ASSERT(altar_decode_spec_outputs_canonical(v.data, v.len, &a, &o, &n) == 0 && n == 0 && o == NULL);
  altar_arena_free(&a);
  /* every spec vector */
  for (size_t i = 0; i < n_vecs; i++)
    if (vecs[i].type == ALTAR_MSG_SPEC) outputs_agree(vecs[i].mp, vecs[i].mp_len);
  altar_spec_free(bare);
  altar_buf_free(&v);
  altar_buf_free(&b);
  altar_spec_free(s);
}

/* The canonical fast path on every status vector, every prefix of one, one
 * changed byte at every position, and the forms around each header bound. */
static void test_fast_status_path(void) {
  size_t accepted = 0;
  for (size_t i = 0; i < n_vecs; i++) {
    vec_t *v = &vecs[i];
    if (v->type != ALTAR_MSG_STATUS) continue;
    accepted += fast_agrees(v->mp, v->mp_len);
    for (size_t len = 0; len < v->mp_len; len++) CU_ASSERT(!fast_agrees(v->mp, len));
    uint8_t *m = malloc(v->mp_len);
    for (size_t at = 0; at < v->mp_len; at++) {
      for (unsigned delta = 1; delta < 256; delta += 37) {
        memcpy(m, v->mp, v->mp_len);
        m[at] = (uint8_t)(m[at] + delta);
        fast_agrees(m, v->mp_len);
      }
    }
    free(m);
  }
  CU_ASSERT(accepted > 0);
  /* strings of 31/32, 255/256 and 65535/65536 bytes (fixstr, str8, str16,
   * str32); integers at each width's edge; a failure; a source; an empty
   * and a 16-entry label map (fixmap, map16). */
  static const size_t lens[] = {0, 31, 32, 255, 256, 65535, 65536, 65537};
  static const int64_t ints[] = {
      0,  127, 128, 255,  256,  65535,  65536,  4294967295ll, 4294967296ll,           INT64_MAX,
      -1, -32, -33, -128, -129, -32768, -32769, INT32_MIN,    (int64_t)INT32_MIN - 1, INT64_MIN};
  for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
    altar_status_event_t *e = kept_event();
    char *big = malloc(lens[k] + 1);
    memset(big, 'x', lens[k]);
    big[lens[k]] = '\0';
    free(e->worker);
    e->worker = big;
    e->source = (altar_source_t){
        .set = true, .topic = strdup("jobs"), .partition = (int32_t)(k % 3) - 1, .offset = ints[k * 2 % 20]};
    e->spec->timeout_s = (altar_opt_i64_t){true, ints[(k * 2 + 1) % 20]};
    e->state = ALTAR_STATE_FAILED;
    e->failure = altar_failure_exit(ints[k + 10], k % 2 ? NULL : "detail", k % 2);
    for (size_t l = 0; k == 3 && l < 16; l++) {
      char key[8];
      snprintf(key, sizeof key, "k%02zu", l);
      altar_strmap_set(&e->handle.labels, key, "v");
    }
    if (k == 4) altar_strmap_clear(&e->spec->labels);
    altar_buf_t b = {0};
    altar_error_t err = {0};
    int rc = altar_encode_status(e, &b, &err);
    if (lens[k] <= ALTAR_MAX_STRING) {
      CU_ASSERT_EQUAL_FATAL(rc, 0);
      CU_ASSERT(fast_agrees(b.data, b.len));
    } else {
      CU_ASSERT_NOT_EQUAL(rc, 0); /* the encoder refuses it; so do both decoders */
      e->worker = NULL;           /* big is still ours, freed below */
      CU_ASSERT_EQUAL_FATAL(altar_encode_status(e, &b, &err), 0);
      /* worker: nil → a str32 of 65537 bytes, one past the bound */
      size_t at = find_bytes(&b, "\xa6worker\xc0", 8);
      altar_buf_t v = {0};
      splice(&b, at + 7, 1, "\xdb\x00\x01\x00\x01", 5, &v);
      altar_buf_append(&v, big, lens[k]);
      CU_ASSERT(!fast_agrees(v.data, v.len));
      altar_buf_free(&v);
      free(big);
    }
    altar_buf_free(&b);
    altar_status_event_clear(e);
  }
  for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
    altar_status_event_t *e = kept_event();
    e->source = (altar_source_t){.set = true, .topic = strdup("jobs"), .offset = ints[k]};
    altar_buf_t b = {0};
    altar_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(altar_encode_status(e, &b, &err), 0);
    CU_ASSERT(fast_agrees(b.data, b.len));
    altar_buf_free(&b);
    altar_status_event_clear(e);
  }
  /* Valid but in a longer form than ours, or invalid in ways only a map's
   * order shows: declined (and for the invalid ones refused by both). */
  altar_status_event_t *e = kept_event();
  altar_strmap_set(&e->handle.labels, "folx", "4");
  altar_strmap_set(&e->handle.labels, "a", "1");
  altar_strmap_set(&e->handle.labels, "ab", "2");
  altar_buf_t b = {0}, v = {0};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_encode_status(e, &b, &err), 0);
  CU_ASSERT(fast_agrees(b.data, b.len));
  size_t at = find_bytes(&b,
                         "\xa4"
                         "fold",
                         5);
  splice(&b, at, 1, "\xd9\x04", 2, &v); /* a key as str8 */
  CU_ASSERT(!fast_agrees(v.data, v.len));
  at = find_bytes(&b, "\xa6handle\x84", 8);
  splice(&b, at + 7, 1, "\xde\x00\x04", 3, &v); /* a map of 4 as map16 */
  CU_ASSERT(!fast_agrees(v.data, v.len));
  at = find_bytes(&b,
                  "\xa4"
                  "folx",
                  5);
  splice(&b, at + 4, 1, "d", 1, &v); /* "fold" twice */
  CU_ASSERT(!fast_agrees(v.data, v.len));
  at = find_bytes(&b,
                  "\xa1"
                  "a\xa1"
                  "1\xa2"
                  "ab\xa1"
                  "2",
                  9);
  splice(&b, at, 9,
         "\xa2"
         "ab\xa1"
         "2\xa1"
         "a\xa1"
         "1",
         9, &v); /* "ab" before "a" */
  CU_ASSERT(!fast_agrees(v.data, v.len));
  at = find_bytes(&b,
                  "\xa1"
                  "v\x01",
                  3);
  splice(&b, at + 2, 1, "\xcc\x01", 2, &v); /* v: 1 as uint8 */
  CU_ASSERT(!fast_agrees(v.data, v.len));
  altar_buf_free(&v);
  altar_buf_free(&b);
  altar_status_event_clear(e);
}

/* Well-formed sequences as the Unicode standard tabulates them (Table 3-7:
 * the lead byte fixes the range of the second), NUL excluded. */
static bool utf8_reference(const unsigned char *s, size_t n) {
  static const struct {
    unsigned char lo, hi, second_lo, second_hi, len;
  } rows[] = {{0x01, 0x7f, 0, 0, 1},       {0xc2, 0xdf, 0x80, 0xbf, 2}, {0xe0, 0xe0, 0xa0, 0xbf, 3},
              {0xe1, 0xec, 0x80, 0xbf, 3}, {0xed, 0xed, 0x80, 0x9f, 3}, {0xee, 0xef, 0x80, 0xbf, 3},
              {0xf0, 0xf0, 0x90, 0xbf, 4}, {0xf1, 0xf3, 0x80, 0xbf, 4}, {0xf4, 0xf4, 0x80, 0x8f, 4}};
  for (size_t i = 0; i < n;) {
    size_t r = 0;
    while (r < sizeof rows / sizeof rows[0] && !(s[i] >= rows[r].lo && s[i] <= rows[r].hi)) r++;
    if (r == sizeof rows / sizeof rows[0] || n - i < rows[r].len) return false;
    if (rows[r].len > 1 && (s[i + 1] < rows[r].second_lo || s[i + 1] > rows[r].second_hi)) return false;
    for (size_t k = 2; k < rows[r].len; k++)
      if (s[i + k] < 0x80 || s[i + k] > 0xbf) return false;
    i += rows[r].len;
  }
  return true;
}

/* The UTF-8 check against a reference written from the standard's table,
 * for every length up to 24 with a NUL, a stray continuation byte, a valid
 * two- and four-byte character, or a truncated one at every position, and
 * invalid bytes right behind the end. */
static void test_utf8_check(void) {
  static const char *const inserts[] = {"\x00",     "\x80",         "\xc3\xa9", "\xf0\x9f\x98\x80",
                                        "\xe2\x82", "\xed\xa0\x80", "\xc0\xaf", "z"};
  unsigned char buf[40];
  size_t checked = 0;
  for (size_t len = 0; len <= 24; len++)
    for (size_t at = 0; at <= len; at++)
      for (size_t k = 0; k < sizeof inserts / sizeof inserts[0]; k++) {
        size_t il = k == 0 ? 1 : strlen(inserts[k]);
        memset(buf, 'a', sizeof buf);
        memcpy(buf + at, inserts[k], il);
        size_t n = len + il;
        memset(buf + n, 0xff, sizeof buf - n); /* a read past the end would see it */
        CU_ASSERT_EQUAL(altar__utf8_ok((const char *)buf, n), utf8_reference(buf, n));
        checked++;
      }
  CU_ASSERT(checked > 1000);
  CU_ASSERT(altar__utf8_ok("", 0));
  CU_ASSERT(!altar__utf8_ok("abcdefg\0", 8));
  CU_ASSERT(!altar__utf8_ok("abcdefghijklmno\xff", 16));
}

/* Control messages (jobs topic): bounds, required fields, and an event of
 * a newer writer read as unknown and written back as it came. */
static void test_control_messages(void) {
  altar_control_msg_t m;
  altar_error_t err = {0};
  /* {"event":"drain","partition":3,"job_ids":["j"]}: unknown event and key */
  CU_ASSERT_EQUAL(altar_control_from_json(B("{\"event\":\"drain\",\"partition\":3,\"job_ids\":[\"j\"]}"), &m, &err), 0);
  CU_ASSERT_EQUAL(m.event, ALTAR_CTL_UNKNOWN);
  CU_ASSERT_STRING_EQUAL(m.event_name, "drain");
  CU_ASSERT_EQUAL(m.partition, 3);
  CU_ASSERT_EQUAL(m.n_offsets, 0);
  char *json = altar_control_to_json(&m, &err);
  CU_ASSERT_PTR_NOT_NULL(json);
  if (json) CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"event\":\"drain\""));
  free(json);
  altar_control_msg_clear(&m);
  /* cancel: job_id required, group_key optional; both written for cancel only. */
  CU_ASSERT_EQUAL(altar_control_from_json(B("{\"event\":\"cancel\",\"partition\":2,\"job_id\":\"j-1\"}"), &m, &err), 0);
  CU_ASSERT_EQUAL(m.event, ALTAR_CTL_CANCEL);
  CU_ASSERT_STRING_EQUAL(m.job_id, "j-1");
  CU_ASSERT_PTR_NULL(m.group_key);
  json = altar_control_to_json(&m, &err);
  CU_ASSERT_PTR_NOT_NULL(json);
  if (json) CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"group_key\":null,\"job_id\":\"j-1\""));
  free(json);
  altar_control_msg_clear(&m);
  CU_ASSERT_EQUAL(altar_control_from_json(B("{\"event\":\"cancel\",\"partition\":2}"), &m, &err), ALTAR_EDECODE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "job_id: required on cancel"));
  altar_control_msg_clear(&m);
  CU_ASSERT_EQUAL(altar_control_from_json(B("{\"event\":\"done\",\"partition\":2,\"job_id\":\"j\"}"), &m, &err), 0);
  json = altar_control_to_json(&m, &err);
  if (json) CU_ASSERT_PTR_NULL(strstr(json, "job_id")); /* not a done's field */
  free(json);
  altar_control_msg_clear(&m);
  static const struct {
    const char *json;
    int rc;
    const char *msg;
  } bad[] = {
      {"{\"partition\":1}", ALTAR_EDECODE, "control.event: missing required field"},
      {"{\"event\":\"done\"}", ALTAR_EDECODE, "control.partition: missing required field"},
      {"{\"event\":\"done\",\"partition\":-1}", ALTAR_EDECODE, "control.partition: partition out of range"},
      {"{\"event\":\"done\",\"partition\":4294967296}", ALTAR_EDECODE, "control.partition: partition out of range"},
      {"{\"event\":\"done\",\"partition\":1,\"offsets\":[1,-2]}", ALTAR_EDECODE,
       "control.offsets[1]: offset must be >= 0"},
      {"{\"event\":\"done\",\"partition\":1,\"offsets\":[\"1\"]}", ALTAR_EDECODE,
       "control.offsets[0]: expected integer"},
      {"{\"event\":\"done\",\"partition\":1,\"offsets\":{}}", ALTAR_EDECODE, "control.offsets: expected array"},
      {"{\"event\":1,\"partition\":1}", ALTAR_EDECODE, "control.event: expected string"},
      {"{\"type\":\"job\",\"event\":\"done\",\"partition\":1}", ALTAR_EDECODE, "control.type: expected \"control\""},
      {"{\"event\":\"done\",\"partition\":1,\"v\":0}", ALTAR_EDECODE, "control.v: schema version must be >= 1"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    memset(&err, 0, sizeof err);
    int rc = altar_control_from_json(bad[i].json, strlen(bad[i].json), &m, &err);
    ASSERT_ERR(rc, bad[i].rc, bad[i].msg);
    altar_control_msg_clear(&m);
  }
  /* More offsets than the bound: refused before any is read. */
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL(altar_buf_append(&b,
                                   "\x82\xa5"
                                   "event"
                                   "\xa4"
                                   "done"
                                   "\xa7"
                                   "offsets"
                                   "\xdc\x04\x01",
                                   23),
                  0);
  for (int i = 0; i < 1025; i++) CU_ASSERT_EQUAL(altar_buf_append(&b, "\x01", 1), 0);
  memset(&err, 0, sizeof err);
  ASSERT_ERR(altar_decode_control(b.data, b.len, &m, &err), ALTAR_ETOOBIG, "control.offsets: too many offsets");
  altar_control_msg_clear(&m);
  altar_buf_free(&b);
  /* The encoder refuses what no reader would accept. */
  int64_t offs[] = {5, -1};
  altar_control_msg_t e = {.event = ALTAR_CTL_DONE, .partition = 0, .offsets = offs, .n_offsets = 2};
  memset(&err, 0, sizeof err);
  CU_ASSERT_EQUAL(altar_encode_control(&e, &b, &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(b.len, 0);
  e.n_offsets = 1;
  e.event = (altar_control_event_t)7;
  CU_ASSERT_EQUAL(altar_encode_control(&e, &b, &err), ALTAR_EINVAL);
  e.event = ALTAR_CTL_UNKNOWN; /* without a name */
  CU_ASSERT_EQUAL(altar_encode_control(&e, &b, &err), ALTAR_EINVAL);
  e.event = ALTAR_CTL_LEASE;
  e.partition = -1;
  CU_ASSERT_EQUAL(altar_encode_control(&e, &b, &err), ALTAR_EINVAL);
  altar_buf_free(&b);
}

static void test_event_equality(void) {
  for (size_t i = 0; i < n_vecs; i++) {
    vec_t *v = &vecs[i];
    if (v->type != ALTAR_MSG_STATUS && v->type != ALTAR_MSG_GROUP) continue;
    any_msg_t a, b;
    altar_error_t err = {0};
    CU_ASSERT_EQUAL(decode_any(v->type, v->mp, v->mp_len, &a, &err), 0);
    CU_ASSERT_EQUAL(decode_any(v->type, v->mp, v->mp_len, &b, &err), 0);
    CU_ASSERT(equal_any(v->type, &a, &b));
    if (v->type == ALTAR_MSG_STATUS) {
      b.status.ts += 1;
      CU_ASSERT(!altar_status_event_equal(&a.status, &b.status));
      b.status.ts -= 1;
      b.status.source.set = !b.status.source.set;
      CU_ASSERT(!altar_status_event_equal(&a.status, &b.status));
      b.status.source.set = !b.status.source.set;
    } else {
      b.group.event = b.group.event == ALTAR_GROUP_FIRED ? ALTAR_GROUP_DEAD_LETTERED : ALTAR_GROUP_FIRED;
      CU_ASSERT(!altar_group_event_equal(&a.group, &b.group));
    }
    clear_any(v->type, &a);
    clear_any(v->type, &b);
  }
}

/* A record written around its fixed part is altar_encode_record's bytes
 * (spec left out) for every state, flag and restart count; one with a
 * failure or an unknown state is refused, for altar_encode_record to judge. */
static void test_record_around_fixed_part(void) {
  altar_error_t err = {0};
  altar_record_t rec = {0};
  CU_ASSERT_FATAL(altar_handle_init(&rec.handle, "process", "job-7") == 0);
  altar_strmap_set(&rec.handle.labels, "fold", "3");
  rec.kind = "train";
  altar_record_fixed_t fixed = {0};
  CU_ASSERT_FATAL(altar_record_fixed_make(&rec.handle, rec.kind, &fixed, &err) == 0);
  const int64_t counts[] = {0, 1, 127, 128, -1, -33, 65536, INT64_MAX, INT64_MIN};
  altar_buf_t a = {0}, b = {0};
  for (int st = ALTAR_STATE_PENDING; st <= ALTAR_STATE_FAILED; st++)
    for (int consumed = 0; consumed < 2; consumed++)
      for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        rec.state = (altar_state_t)st;
        rec.consumed = consumed;
        rec.restart_count = counts[i];
        altar_buf_reset(&a);
        altar_buf_reset(&b);
        CU_ASSERT_FATAL(altar_encode_record(&rec, &a, &err) == 0);
        CU_ASSERT_FATAL(
            altar_encode_record_around(&rec, altar_record_fixed_data(&fixed), altar_record_fixed_len(&fixed), &b) == 0);
        CU_ASSERT(a.len == b.len && !memcmp(a.data, b.data, a.len));
      }
  rec.failure = altar_failure_exit(2, "x", false);
  CU_ASSERT_EQUAL(altar_encode_record_around(&rec, altar_record_fixed_data(&fixed), altar_record_fixed_len(&fixed), &b),
                  ALTAR_EINVAL);
  altar_failure_free(rec.failure);
  rec.failure = NULL;
  rec.state = (altar_state_t)9;
  CU_ASSERT_EQUAL(altar_encode_record_around(&rec, altar_record_fixed_data(&fixed), altar_record_fixed_len(&fixed), &b),
                  ALTAR_EINVAL);
  /* Made again into the same holder: the same bytes. */
  altar_buf_reset(&a);
  altar_buf_append(&a, altar_record_fixed_data(&fixed), altar_record_fixed_len(&fixed));
  CU_ASSERT_FATAL(altar_record_fixed_make(&rec.handle, rec.kind, &fixed, &err) == 0);
  CU_ASSERT(a.len == altar_record_fixed_len(&fixed) && !memcmp(a.data, altar_record_fixed_data(&fixed), a.len));
  altar_record_fixed_clear(&fixed);
  CU_ASSERT_EQUAL(altar_record_fixed_len(&fixed), 0);
  altar_buf_free(&a);
  altar_buf_free(&b);
  altar_handle_clear(&rec.handle);
}

/* A group of 10,000 members: the id over all their keys is the SHA-256 of
 * the canonical map (array 16 header) written here by hand; the event
 * splits into a head and pages, each within the bounds, the same bytes
 * every time, read back whole; a narrow event is one message, byte for
 * byte altar_encode_group's; pages with a bad index are refused. */
static void test_wide_group_pages(void) {
  enum { N = 10000 };
  altar_handle_t *hs = calloc(N, sizeof *hs);
  altar_transfer_t *outs = calloc(N, sizeof *outs);
  char **keys = calloc(N, sizeof *keys);
  CU_ASSERT_FATAL(hs && outs && keys);
  for (int i = 0; i < N; i++) {
    char eid[32], k[65], uri[64], lp[32];
    snprintf(eid, sizeof eid, "m-%d", i);
    altar_handle_init(&hs[i], "process", eid);
    altar_strmap_set(&hs[i].labels, "job_id", "j");
    snprintf(k, sizeof k, "%064d", N - i); /* arrival order is not key order */
    keys[i] = strdup(k);
    snprintf(uri, sizeof uri, "file:///out/%d", i);
    snprintf(lp, sizeof lp, "o/%d", i);
    outs[i].uri = strdup(uri);
    outs[i].logical_path = strdup(lp);
  }
  char id[ALTAR_TASK_KEY_LEN + 1];
  CU_ASSERT_EQUAL_FATAL(altar_group_event_id("k", "j", (const char *const *)keys, N, id), 0);
  /* by hand: {"group_key": "j", "kind": "k", "task_keys": [sorted keys]} */
  altar_buf_t b = {0};
  altar_buf_append(&b, "\x83\xa9group_key\xa1j\xa4kind\xa1k\xa9task_keys\xdc\x27\x10", 33);
  for (int i = 1; i <= N; i++) { /* "%064d" of 1..N sorts as the numbers do */
    char k[65];
    snprintf(k, sizeof k, "%064d", i);
    altar_buf_append(&b, "\xd9\x40", 2);
    altar_buf_append(&b, k, 64);
  }
  char want[ALTAR_DIGEST_BUFSZ];
  CU_ASSERT_EQUAL_FATAL(altar_sha256_bytes(b.data, b.len, want, NULL), 0);
  CU_ASSERT_STRING_EQUAL(id, want + strlen(ALTAR_DIGEST_PREFIX));
  altar_buf_free(&b);

  altar_group_event_t g = {.v = 1,
                           .event = ALTAR_GROUP_FIRED,
                           .event_id = id,
                           .kind = "k",
                           .group_key = "j",
                           .shards = hs,
                           .n_shards = N,
                           .outputs = outs,
                           .n_outputs = N,
                           .ts = 7};
  CU_ASSERT_FALSE(altar_group_event_fits(&g));
  altar_buf_t *m1 = NULL, *m2 = NULL;
  size_t n1 = 0, n2 = 0;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_encode_group_messages(&g, &m1, &n1, &err), 0);
  CU_ASSERT_EQUAL_FATAL(altar_encode_group_messages(&g, &m2, &n2, &err), 0);
  CU_ASSERT_EQUAL_FATAL(n1, n2);
  CU_ASSERT(n1 >= 5); /* 10,000 members and 10,000 outputs, at most 4,096 of each a message */
  altar_group_event_t head;
  CU_ASSERT_EQUAL_FATAL(altar_decode_group(m1[0].data, m1[0].len, &head, &err), 0);
  CU_ASSERT_EQUAL(head.members_total, N);
  CU_ASSERT_EQUAL(head.pages, n1 - 1);
  CU_ASSERT_STRING_EQUAL(head.event_id, id);
  CU_ASSERT_EQUAL(ALTAR_GROUP_MEMBERS(&head), N);
  for (size_t i = 0; i < n1; i++) {
    CU_ASSERT(m1[i].len == m2[i].len && !memcmp(m1[i].data, m2[i].data, m1[i].len)); /* deterministic */
    CU_ASSERT(m1[i].len <= ALTAR_MAX_MESSAGE);
    char type[32];
    CU_ASSERT_EQUAL(altar_peek_type(m1[i].data, m1[i].len, type, sizeof type), 0);
    CU_ASSERT_STRING_EQUAL(type, i ? "group_page" : "group");
    if (!i) continue;
    altar_group_event_t p;
    CU_ASSERT_EQUAL_FATAL(altar_decode_group_page(m1[i].data, m1[i].len, &p, &err), 0);
    CU_ASSERT(p.n_shards <= ALTAR_MAX_ARRAY && p.n_outputs <= ALTAR_MAX_ARRAY);
    /* a page is no group event to an older reader; the JSON bridge reads it */
    altar_group_event_t x;
    CU_ASSERT_NOT_EQUAL(altar_decode_group(m1[i].data, m1[i].len, &x, NULL), 0);
    altar_group_event_clear(&x);
    char *js = altar_codec_msgpack_to_json(ALTAR_MSG_GROUP_PAGE, m1[i].data, m1[i].len, &err);
    CU_ASSERT(js && strstr(js, "\"type\":\"group_page\""));
    free(js);
    CU_ASSERT_EQUAL(altar_group_event_take_page(&head, &p), 1);
    altar_group_event_clear(&p);
  }
  CU_ASSERT_EQUAL(head.page, head.pages);
  CU_ASSERT_EQUAL_FATAL(head.n_shards, N);
  CU_ASSERT_EQUAL_FATAL(head.n_outputs, N);
  for (int i = 0; i < N; i++) {
    CU_ASSERT(altar_handle_equal(&head.shards[i], &hs[i]));
    CU_ASSERT_STRING_EQUAL(head.outputs[i].uri, outs[i].uri);
  }
  altar_group_event_clear(&head);
  for (size_t i = 0; i < n1; i++) {
    altar_buf_free(&m1[i]);
    altar_buf_free(&m2[i]);
  }
  free(m1);
  free(m2);

  /* narrow: one message, altar_encode_group's bytes, no new keys */
  g.n_shards = 3;
  g.n_outputs = 3;
  CU_ASSERT(altar_group_event_fits(&g));
  CU_ASSERT_EQUAL_FATAL(altar_encode_group_messages(&g, &m1, &n1, &err), 0);
  CU_ASSERT_EQUAL_FATAL(n1, 1);
  altar_buf_t one = {0};
  CU_ASSERT_EQUAL_FATAL(altar_encode_group(&g, &one, &err), 0);
  CU_ASSERT(one.len == m1[0].len && !memcmp(one.data, m1[0].data, one.len));
  CU_ASSERT(!memmem(one.data, one.len, "members_total", 13) && !memmem(one.data, one.len, "pages", 5));
  altar_buf_free(&one);
  altar_buf_free(&m1[0]);
  free(m1);

  /* a page must say which of how many it is */
  g.pages = 2;
  g.page = 3;
  CU_ASSERT_EQUAL(altar_encode_group_page(&g, &one, &err), ALTAR_EINVAL);
  g.page = 0;
  CU_ASSERT_EQUAL(altar_encode_group_page(&g, &one, &err), ALTAR_EINVAL);
  g.page = 2;
  CU_ASSERT_EQUAL_FATAL(altar_encode_group_page(&g, &one, &err), 0);
  altar_group_event_t p;
  CU_ASSERT_EQUAL(altar_decode_group_page(one.data, one.len, &p, &err), 0);
  CU_ASSERT_EQUAL(p.page, 2);
  altar_group_event_t h2 = {.pages = 2}; /* page 2 before page 1: not taken */
  CU_ASSERT_EQUAL(altar_group_event_take_page(&h2, &p), 0);
  altar_group_event_clear(&p);
  altar_buf_free(&one);

  for (int i = 0; i < N; i++) {
    altar_handle_clear(&hs[i]);
    altar_transfer_clear(&outs[i]);
    free(keys[i]);
  }
  free(hs);
  free(outs);
  free(keys);
}

static void add_suites(void) {
  ALTAR_SUITE("codec", suite_init, suite_clean);
  ALTAR_TEST(test_record_around_fixed_part);
  ALTAR_TEST(test_vectors_present);
  ALTAR_TEST(test_vectors_json_to_msgpack);
  ALTAR_TEST(test_vectors_msgpack_to_json);
  ALTAR_TEST(test_vectors_round_trip);
  ALTAR_TEST(test_vectors_canonical_keys);
  ALTAR_TEST(test_peek_type);
  ALTAR_TEST(test_peek_group_event_id);
  ALTAR_TEST(test_msg_type_names);
  ALTAR_TEST(test_type_mismatch);
  ALTAR_TEST(test_control_messages);
  ALTAR_TEST(test_unknown_keys_ignored);
  ALTAR_TEST(test_missing_keys_defaulted);
  ALTAR_TEST(test_required_fields);
  ALTAR_TEST(test_spec_bytes_kept_when_canonical);
  ALTAR_TEST(test_spec_outputs_fast_path);
  ALTAR_TEST(test_spec_strings_checked_in_both_modes);
  ALTAR_TEST(test_wrong_types);
  ALTAR_TEST(test_number_forms);
  ALTAR_TEST(test_truncated_every_prefix);
  ALTAR_TEST(test_raw_malformed);
  ALTAR_TEST(test_bounds);
  ALTAR_TEST(test_encoder_refusals);
  ALTAR_TEST(test_json_errors);
  ALTAR_TEST(test_guard_page);
  ALTAR_TEST(test_parts_to_json);
  ALTAR_TEST(test_event_equality);
  ALTAR_TEST(test_fast_status_path);
  ALTAR_TEST(test_utf8_check);
  ALTAR_TEST(test_wide_group_pages);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add_suites); }
