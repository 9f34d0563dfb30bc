/* The fast path of the status event decoder: one straight pass over bytes
 * in exactly the form our encoder writes (every field present, keys in
 * order, shortest headers, float64 times), building the event in an arena.
 * No object tree, no field path, no allocation per string. Anything else,
 * valid or not, is declined and left to altar_decode_status, which words
 * the error; the fuzz target for status events checks that both agree.
 * With ALTAR_DECODE_SPEC_BYTES the spec is walked by the same functions
 * with the reader "dry": every check made, nothing stored (no arena
 * allocation or copy for its strings, maps and arrays), and only its bytes
 * kept. altar_decode_spec_outputs_canonical walks a spec so too, keeping
 * its outputs. */
#include "core/codec_int.h"

#include <math.h>
#include <string.h>

typedef struct fr {
  const uint8_t *p, *end;
  altar_arena_t *a;
  bool spec_bytes; /* ALTAR_DECODE_SPEC_BYTES */
  /* Validating only: the helpers below check as ever but store nothing
   * (outputs left as they are). Set while walking the spec, with spec_bytes. */
  bool dry;
  /* With dry: a spec's outputs are stored all the same (what
   * altar_decode_spec_outputs_canonical keeps of a spec). */
  bool outputs_only;
} fr_t;

/* A header of width w after the format byte, and the value in it. */
static bool hdr(fr_t *r, size_t w, uint64_t *pv) {
  if ((size_t)(r->end - r->p) < w) return false;
  *pv = altar__be(r->p, w);
  r->p += w;
  return true;
}

/* A length in the shortest of: the fix form (tag fix, low bits mask), then
 * the 8/16/32-bit forms at tags w8 (0 when the type has none), w16, w32. */
static bool length(fr_t *r, uint8_t fix, uint8_t mask, uint8_t w8, uint8_t w16, uint8_t w32, uint64_t *pn) {
  if (r->p >= r->end) return false;
  uint8_t f = *r->p++;
  if ((f & (uint8_t)~mask) == fix) {
    *pn = f & mask;
    return true;
  }
  if (w8 && f == w8) return hdr(r, 1, pn) && *pn > mask;
  if (f == w16) return hdr(r, 2, pn) && *pn > (w8 ? 0xffu : mask);
  if (f == w32) return hdr(r, 4, pn) && *pn > 0xffffu;
  return false;
}

static bool map_of(fr_t *r, uint64_t *pn) { return length(r, 0x80, 0x0f, 0, 0xde, 0xdf, pn) && *pn <= ALTAR_MAX_MAP; }
static bool array_of(fr_t *r, uint64_t *pn) {
  return length(r, 0x90, 0x0f, 0, 0xdc, 0xdd, pn) && *pn <= ALTAR_MAX_ARRAY;
}

/* String bytes in place: bounded, UTF-8 without NUL. */
static bool str_view(fr_t *r, const char **ps, size_t *pn) {
  uint64_t n;
  if (!length(r, 0xa0, 0x1f, 0xd9, 0xda, 0xdb, &n) || n > ALTAR_MAX_STRING || n > (uint64_t)(r->end - r->p))
    return false;
  *ps = (const char *)r->p;
  *pn = (size_t)n;
  r->p += n;
  return altar__utf8_ok(*ps, *pn);
}

static bool str(fr_t *r, char **pout) {
  const char *s;
  size_t n;
  return str_view(r, &s, &n) && (r->dry || (*pout = altar_arena_strndup(r->a, s, n)) != NULL);
}

static bool nil(fr_t *r) {
  if (r->p < r->end && *r->p == 0xc0) {
    r->p++;
    return true;
  }
  return false;
}

static bool opt_str(fr_t *r, char **pout) {
  *pout = NULL;
  return nil(r) || str(r, pout);
}

/* The next string, which must be exactly k: a map key or a fixed value
 * (all of them are short enough for the fixstr form). A literal's length
 * is known when compiling. */
static bool lit_n(fr_t *r, const char *k, size_t n) {
  if ((size_t)(r->end - r->p) < n + 1 || r->p[0] != (0xa0 | n) || memcmp(r->p + 1, k, n)) return false;
  r->p += n + 1;
  return true;
}
#define lit(r, k) lit_n((r), (k), sizeof(k) - 1)

/* A string that must be one of names[0..n); its index. */
static bool one_of(fr_t *r, const char *const *names, int n, int *pidx) {
  const char *s;
  size_t len;
  if (!str_view(r, &s, &len)) return false;
  for (int i = 0; i < n; i++)
    if (names[i][0] == (len ? s[0] : 0) && strlen(names[i]) == len && !memcmp(names[i], s, len)) {
      *pidx = i;
      return true;
    }
  return false;
}

/* An integer in msgpack-c's shortest form: unsigned forms for values >= 0. */
static bool i64(fr_t *r, int64_t *pv) {
  if (r->p >= r->end) return false;
  uint8_t f = *r->p++;
  uint64_t u;
  if (f <= 0x7f || f >= 0xe0) {
    *pv = (int8_t)f;
    return true;
  }
  if (f >= 0xcc && f <= 0xcf) {
    size_t w = (size_t)1 << (f - 0xcc);
    static const uint64_t least[] = {0x80, 0x100, 0x10000, 0x100000000ull};
    if (!hdr(r, w, &u) || u < least[f - 0xcc] || u > (uint64_t)INT64_MAX) return false;
    *pv = (int64_t)u;
    return true;
  }
  if (f >= 0xd0 && f <= 0xd3) {
    size_t w = (size_t)1 << (f - 0xd0);
    static const int64_t below[] = {-32, -128, -32768, INT32_MIN};
    if (!hdr(r, w, &u)) return false;
    int64_t v = w == 1 ? (int8_t)u : w == 2 ? (int16_t)u : w == 4 ? (int32_t)u : (int64_t)u;
    if (v >= below[f - 0xd0]) return false;
    *pv = v;
    return true;
  }
  return false;
}

static bool opt_i64(fr_t *r, altar_opt_i64_t *pv) {
  *pv = (altar_opt_i64_t){false, 0};
  if (nil(r)) return true;
  pv->set = true;
  return i64(r, &pv->v);
}

static bool f64(fr_t *r, double *pv) {
  uint64_t u;
  if (r->p >= r->end || *r->p++ != 0xcb || !hdr(r, 8, &u)) return false;
  memcpy(pv, &u, sizeof *pv);
  return isfinite(*pv);
}

static bool boolean(fr_t *r, bool *pv) {
  if (r->p >= r->end || (*r->p != 0xc2 && *r->p != 0xc3)) return false;
  *pv = *r->p++ == 0xc3;
  return true;
}

/* m may be NULL when dry. */
static bool strmap(fr_t *r, altar_strmap_t *m) {
  uint64_t n;
  if (!map_of(r, &n)) return false;
  char **slots = n && !r->dry ? altar_arena_alloc(r->a, 2 * (size_t)n * sizeof *slots) : NULL;
  if (n && !r->dry && !slots) return false;
  const char *prev = NULL;
  size_t prev_n = 0;
  for (size_t i = 0; i < n; i++) {
    const char *k, *v;
    size_t kn, vn;
    if (!str_view(r, &k, &kn) || (i && !altar__key_before(prev, prev_n, k, kn)) || !str_view(r, &v, &vn)) return false;
    prev = k;
    prev_n = kn;
    if (r->dry) continue;
    char *b = altar_arena_alloc(r->a, kn + vn + 2); /* "key\0value\0", as the map keeps entries */
    if (!b) return false;
    memcpy(b, k, kn);
    b[kn] = '\0';
    memcpy(b + kn + 1, v, vn);
    b[kn + 1 + vn] = '\0';
    slots[i] = b;
    slots[n + i] = b + kn + 1;
  }
  if (!r->dry) altar_strmap_wrap(m, slots, (size_t)n);
  return true;
}

static bool opt_strmap(fr_t *r, altar_strmap_t **pm) {
  *pm = NULL;
  if (nil(r)) return true;
  if (r->dry) return strmap(r, NULL);
  return (*pm = altar_arena_alloc(r->a, sizeof **pm)) != NULL && strmap(r, *pm);
}

static bool strv(fr_t *r, char ***pv, size_t *pn) {
  uint64_t n;
  *pv = NULL;
  *pn = 0;
  if (!array_of(r, &n)) return false;
  if (!n) return true;
  char *one = NULL; /* the slot of every string when dry (left unwritten) */
  if (!r->dry && !(*pv = altar_arena_alloc(r->a, (size_t)n * sizeof **pv))) return false;
  for (size_t i = 0; i < n; i++)
    if (!str(r, r->dry ? &one : &(*pv)[i])) return false;
  if (!r->dry) *pn = (size_t)n;
  return true;
}

static bool transfers(fr_t *r, altar_transfer_t **pv, size_t *pn) {
  uint64_t n, four;
  *pv = NULL;
  *pn = 0;
  if (!array_of(r, &n)) return false;
  if (!n) return true;
  altar_transfer_t one = {0}; /* every entry's place when dry */
  altar_transfer_t *t = r->dry ? &one : altar_arena_alloc(r->a, (size_t)n * sizeof *t);
  if (!t) return false;
  for (size_t i = 0; i < n; i++) {
    altar_transfer_t *x = r->dry ? &one : &t[i];
    if (!map_of(r, &four) || four != 4 || !lit(r, "digest") || !opt_str(r, &x->digest) || !lit(r, "locality_key") ||
        !opt_str(r, &x->locality_key) || !lit(r, "logical_path") || !str(r, &x->logical_path) || !lit(r, "uri") ||
        !str(r, &x->uri))
      return false;
  }
  if (r->dry) return true;
  *pv = t;
  *pn = (size_t)n;
  return true;
}

/* A spec's outputs: stored unless dry, or even then with outputs_only. */
static bool outputs(fr_t *r, altar_spec_t *s) {
  bool dry = r->dry;
  r->dry = dry && !r->outputs_only;
  bool ok = transfers(r, &s->outputs, &s->n_outputs);
  r->dry = dry;
  return ok;
}

static bool spec(fr_t *r, altar_spec_t *s) {
  uint64_t n, three;
  memset(s, 0, sizeof *s);
  return map_of(r, &n) && n == 9 && lit(r, "command") && strv(r, &s->command, &s->n_command) && lit(r, "image") &&
         str(r, &s->image) && lit(r, "inputs") && transfers(r, &s->inputs, &s->n_inputs) && lit(r, "kind") &&
         str(r, &s->kind) && lit(r, "labels") && strmap(r, &s->labels) && lit(r, "outputs") && outputs(r, s) &&
         lit(r, "plugin_identity") && opt_strmap(r, &s->plugin_identity) && lit(r, "resources") && map_of(r, &three) &&
         three == 3 && lit(r, "count") && i64(r, &s->resources.count) && lit(r, "gpu") &&
         opt_str(r, &s->resources.gpu) && lit(r, "memory_mb") && opt_i64(r, &s->resources.memory_mb) &&
         lit(r, "timeout_s") && opt_i64(r, &s->timeout_s);
}

static bool handle(fr_t *r, altar_handle_t *h) {
  uint64_t n;
  return map_of(r, &n) && n == 4 && lit(r, "backend") && str(r, &h->backend) && lit(r, "external_id") &&
         str(r, &h->external_id) && lit(r, "labels") && strmap(r, &h->labels) && lit(r, "plugin_identity") &&
         opt_strmap(r, &h->plugin_identity);
}

static bool failure(fr_t *r, altar_failure_t **pf) {
  uint64_t n;
  *pf = NULL;
  if (nil(r)) return true;
  altar_failure_t *f = altar_arena_alloc(r->a, sizeof *f);
  if (!f || !map_of(r, &n) || n != 4 || !lit(r, "detail") || !opt_str(r, &f->detail) || !lit(r, "deterministic") ||
      !boolean(r, &f->deterministic) || !lit(r, "exit_code") || !opt_i64(r, &f->exit_code) || !lit(r, "reason") ||
      !str(r, &f->reason))
    return false;
  *pf = f;
  return true;
}

static bool source(fr_t *r, altar_source_t *src) {
  uint64_t n;
  int64_t part;
  memset(src, 0, sizeof *src);
  if (nil(r)) return true;
  if (!map_of(r, &n) || n != 3 || !lit(r, "offset") || !i64(r, &src->offset) || !lit(r, "partition") ||
      !i64(r, &part) || part < INT32_MIN || part > INT32_MAX || !lit(r, "topic") || !str(r, &src->topic))
    return false;
  src->partition = (int32_t)part;
  src->set = true;
  return true;
}

/* The bytes from start to where r is, copied into the arena. */
static bool copy_span(fr_t *r, const uint8_t *start, altar_buf_t *out) {
  size_t n = (size_t)(r->p - start);
  uint8_t *copy = altar_arena_alloc(r->a, n);
  if (!copy) return false;
  memcpy(copy, start, n);
  *out = (altar_buf_t){.data = copy, .len = n, .cap = n};
  return true;
}

/* The spec, with a copy of its bytes as spec_enc (they are its encoding).
 * With spec_bytes the same walk runs dry over a scratch spec that stays
 * empty: e->spec is left NULL, the bytes are all that is kept. */
static bool opt_spec(fr_t *r, altar_status_event_t *e) {
  e->spec = NULL;
  if (nil(r)) return true;
  const uint8_t *start = r->p;
  if (r->spec_bytes) {
    altar_spec_t scratch;
    r->dry = true;
    bool ok = spec(r, &scratch);
    r->dry = false;
    return ok && copy_span(r, start, &e->spec_enc.codec_bytes_);
  }
  return (e->spec = altar_arena_alloc(r->a, sizeof *e->spec)) && spec(r, e->spec) &&
         copy_span(r, start, &e->spec_enc.codec_bytes_);
}

int altar_decode_spec_outputs_canonical(const void *data, size_t len, altar_arena_t *a, altar_transfer_t **pv,
                                        size_t *pn) {
  *pv = NULL;
  *pn = 0;
  if (!data || !len || len > ALTAR_MAX_MESSAGE) return ALTAR_ENOTSUP;
  fr_t r = {.p = data, .end = (const uint8_t *)data + len, .a = a, .dry = true, .outputs_only = true};
  altar_arena_mark_t mark = altar_arena_mark(a);
  altar_spec_t scratch; /* only its outputs are stored */
  if (!spec(&r, &scratch) || r.p != r.end) {
    altar_arena_rewind(a, mark);
    return ALTAR_ENOTSUP;
  }
  *pv = scratch.outputs;
  *pn = scratch.n_outputs;
  return ALTAR_OK;
}

/* The state, read as the full decoder reads it. */
static bool state(fr_t *r, altar_state_t *ps) {
  const char *s;
  size_t n;
  char name[16];
  if (!str_view(r, &s, &n) || n >= sizeof name) return false;
  memcpy(name, s, n);
  name[n] = '\0';
  return altar_state_parse(name, ps) == ALTAR_OK;
}

int altar_decode_status_canonical(const void *data, size_t len, altar_arena_t *a, unsigned flags,
                                  altar_status_event_t *pout) {
  memset(pout, 0, sizeof *pout);
  if (!data || !len || len > ALTAR_MAX_MESSAGE) return ALTAR_ENOTSUP;
  fr_t r = {
      .p = data, .end = (const uint8_t *)data + len, .a = a, .spec_bytes = (flags & ALTAR_DECODE_SPEC_BYTES) != 0};
  altar_arena_mark_t mark = altar_arena_mark(a);
  altar_status_event_t *e = pout;
  uint64_t n;
  int ev = 0;
  const uint8_t *fixed = NULL;
  /* Field by field, in the encoder's order. */
  bool ok = map_of(&r, &n) && n == 12 && lit(&r, "event") && one_of(&r, altar__status_event_names, 3, &ev) &&
            lit(&r, "failure") && failure(&r, &e->failure) && (fixed = r.p) && lit(&r, "handle") &&
            handle(&r, &e->handle) && lit(&r, "kind") && str(&r, &e->kind) &&
            copy_span(&r, fixed, &e->record_fixed.codec_bytes_) && lit(&r, "source") && source(&r, &e->source) &&
            lit(&r, "spec") && opt_spec(&r, e) && lit(&r, "state") && state(&r, &e->state) && lit(&r, "task_key") &&
            str(&r, &e->task_key) && lit(&r, "ts") && f64(&r, &e->ts) && lit(&r, "type") && lit(&r, "status") &&
            lit(&r, "v") && i64(&r, &e->v) && e->v >= 1 && lit(&r, "worker") && opt_str(&r, &e->worker) && r.p == r.end;
  if (!ok) {
    memset(pout, 0, sizeof *pout);
    altar_arena_rewind(a, mark); /* what was placed goes back: the full decoder allocates anew */
    return ALTAR_ENOTSUP;
  }
  e->event = (altar_status_event_kind_t)ev;
  return ALTAR_OK;
}
