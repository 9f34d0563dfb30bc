/* msgpack writing into an altar_buf_t. Encoders refuse what decoders would
 * refuse (missing required strings, values past the ALTAR_MAX_* bounds,
 * invalid UTF-8, non-finite floats), so nothing we publish is poison. */
#include "core/codec_int.h"

#include <math.h>
#include <string.h>

static int buf_write(void *data, const char *p, size_t n) {
  altar__wr_t *w = data;
  if (altar_buf_append(w->out, p, n)) {
    w->oom = true;
    return -1;
  }
  return 0;
}

void altar__wr_init(altar__wr_t *w, altar_buf_t *out, const char *root, altar_error_t *err) {
  w->out = out;
  w->oom = false;
  w->err = err;
  w->root = root;
  w->fail_code = 0;
  w->fail_what = NULL;
  w->nsegs = 0;
  msgpack_packer_init(&w->pk, w, buf_write);
}

int altar__wr_fail(altar__wr_t *w, int code, const char *what) {
  w->fail_code = code;
  w->fail_what = what;
  w->nsegs = 0;
  return code;
}

int altar__wr_fail_size(altar__wr_t *w, const char *what, size_t n, size_t bound) {
  const char *unit = strcmp(what, "string") ? "entries" : "bytes";
  snprintf(w->fail_buf, sizeof w->fail_buf, "%s of %zu %s exceeds the size bound of %zu %s", what, n, unit, bound,
           unit);
  return altar__wr_fail(w, ALTAR_ETOOBIG, w->fail_buf);
}

int altar__wr_finish(altar__wr_t *w, size_t start, int rc) {
  if (rc) {
    if (!w->fail_what) return rc; /* reported where it happened */
    altar__path_t path;
    altar__path_init(&path, w->root);
    for (size_t i = w->nsegs; i-- > 0;) {
      const altar__wr_seg_t *s = &w->segs[i];
      if (s->name) altar__path_key(&path, s->name, s->len);
      else altar__path_index(&path, s->index);
    }
    return altar_error_set(w->err, w->fail_code, "%s: %s", path.len ? path.s : "message", w->fail_what);
  }
  if (w->oom) return altar_error_set(w->err, ALTAR_ENOMEM, "encode: out of memory");
  if (w->out->len - start > ALTAR_MAX_MESSAGE)
    return altar_error_set(w->err, ALTAR_ETOOBIG, "encode: message of %zu bytes exceeds %u", w->out->len - start,
                           ALTAR_MAX_MESSAGE);
  return ALTAR_OK;
}

void altar__wr_key(altar__wr_t *w, const char *key) {
  size_t n = strlen(key);
  msgpack_pack_str(&w->pk, n);
  msgpack_pack_str_body(&w->pk, key, n);
}

int altar__wr_map(altar__wr_t *w, size_t n) {
  if (n > ALTAR_MAX_MAP) return altar__wr_fail_size(w, "map", n, ALTAR_MAX_MAP);
  msgpack_pack_map(&w->pk, n);
  return ALTAR_OK;
}

int altar__wr_array(altar__wr_t *w, size_t n) {
  if (n > ALTAR_MAX_ARRAY) return altar__wr_fail_size(w, "array", n, ALTAR_MAX_ARRAY);
  msgpack_pack_array(&w->pk, n);
  return ALTAR_OK;
}

int altar__wr_str(altar__wr_t *w, const char *s) {
  if (!s) return altar__wr_fail(w, ALTAR_EINVAL, "missing required field");
  size_t n = strlen(s);
  if (n > ALTAR_MAX_STRING) return altar__wr_fail_size(w, "string", n, ALTAR_MAX_STRING);
  if (!altar__utf8_ok(s, n)) return altar__wr_fail(w, ALTAR_EINVAL, "not valid UTF-8");
  msgpack_pack_str(&w->pk, n);
  msgpack_pack_str_body(&w->pk, s, n);
  return ALTAR_OK;
}

int altar__wr_opt_str(altar__wr_t *w, const char *s) {
  if (!s) {
    msgpack_pack_nil(&w->pk);
    return ALTAR_OK;
  }
  return altar__wr_str(w, s);
}

void altar__wr_i64(altar__wr_t *w, int64_t v) { msgpack_pack_int64(&w->pk, v); }

void altar__wr_opt_i64(altar__wr_t *w, altar_opt_i64_t v) {
  if (v.set) msgpack_pack_int64(&w->pk, v.v);
  else msgpack_pack_nil(&w->pk);
}

void altar__wr_bool(altar__wr_t *w, bool v) {
  if (v) msgpack_pack_true(&w->pk);
  else msgpack_pack_false(&w->pk);
}

void altar__wr_nil(altar__wr_t *w) { msgpack_pack_nil(&w->pk); }

int altar__wr_f64(altar__wr_t *w, double v) {
  if (!isfinite(v)) return altar__wr_fail(w, ALTAR_EINVAL, "expected a finite number");
  msgpack_pack_double(&w->pk, v); /* always float64, whatever the value */
  return ALTAR_OK;
}

int altar__wr_strv(altar__wr_t *w, char *const *v, size_t n) {
  int rc = altar__wr_array(w, n);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++) {
    rc = altar__wr_str(w, v[i]);
    if (rc) return altar__wr_at_index(w, i, rc);
  }
  return ALTAR_OK;
}

/* strmap keys are kept sorted by strcmp, which is bytewise: canonical as is. */
int altar__wr_strmap(altar__wr_t *w, const altar_strmap_t *m) {
  int rc = altar__wr_map(w, m->n);
  if (rc) return rc;
  for (size_t i = 0; i < m->n; i++) {
    rc = altar__wr_str(w, m->keys[i]);
    if (!rc) rc = altar__wr_str(w, m->vals[i]);
    if (rc) return altar__wr_at_key(w, m->keys[i], m->keys[i] ? strlen(m->keys[i]) : 0, rc);
  }
  return ALTAR_OK;
}

int altar__wr_opt_strmap(altar__wr_t *w, const altar_strmap_t *m) {
  if (!m) {
    msgpack_pack_nil(&w->pk);
    return ALTAR_OK;
  }
  return altar__wr_strmap(w, m);
}
