/* altar — codec internals shared by core/codec_*.c and core/identity.c.
 * Not part of the public API: users go through include/altar/codec.h. */
#ifndef ALTAR_CODEC_INT_H
#define ALTAR_CODEC_INT_H

#include "altar/codec.h"

#include <msgpack.h>
#include <stdint.h>
#include <string.h>

/* A field path such as "status.handle.labels.fold", grown and shrunk as a
 * walker descends, so every error can name the field at fault. */
#define ALTAR__PATH_MAX 256
typedef struct altar__path {
  char s[ALTAR__PATH_MAX];
  size_t len;
} altar__path_t;

void altar__path_init(altar__path_t *p, const char *root);
/* Appends ".name" (or "name" at the root) / "[i]"; returns the old length for pop. */
size_t altar__path_key(altar__path_t *p, const char *name, size_t nlen);
size_t altar__path_index(altar__path_t *p, size_t i);
static inline void altar__path_pop(altar__path_t *p, size_t old) {
  p->len = old;
  p->s[old] = '\0';
}

/* True when s[0..len) is well-formed UTF-8 without NUL bytes. */
bool altar__utf8_ok(const char *s, size_t len);

/* An n-byte big-endian number. */
static inline uint64_t altar__be(const uint8_t *p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; i++) v = (v << 8) | p[i];
  return v;
}

/* Whether map key a sorts strictly before b as our encoder writes keys:
 * bytewise, then the shorter first. Either may be empty (and NULL then). */
static inline bool altar__key_before(const char *a, size_t an, const char *b, size_t bn) {
  int c = an && bn ? memcmp(a, b, an < bn ? an : bn) : 0;
  return c < 0 || (c == 0 && an < bn);
}

/* The names of altar_status_event_kind_t, in order. */
extern const char *const altar__status_event_names[3];

/* ---- reading (core/codec_msgpack_read.c) ---- */

/* Checks that data holds exactly one msgpack object within every ALTAR_MAX_*
 * bound (message size, string, array, map, depth) and that each declared
 * length fits in the bytes that remain, so the unpacker that follows never
 * allocates from an unchecked length. ETOOBIG or EDECODE naming the field
 * under `root`. */
int altar__mp_check(const void *data, size_t len, const char *root, altar_error_t *err);

/* An object tree parsed from bytes by altar__mp_parse. Strings, binaries and
 * extensions point into the parsed bytes, which must outlive the tree. Nodes
 * come from the inline block first (no allocation for the usual message),
 * then from heap blocks. */
#define ALTAR__MP_INLINE_NODES 192
typedef struct altar__mp_block altar__mp_block_t;
#define ALTAR__MP_TOP_SPANS 32
typedef struct altar__mp_doc {
  msgpack_object root;
  /* True when every header had its shortest form, no float32, bin or ext
   * occurred and every map's string keys rose strictly bytewise: the
   * wire half of "these bytes are what our encoder would write". */
  bool canonical;
  /* Where the value of each of the root map's first ALTAR__MP_TOP_SPANS
   * entries lies in the parsed bytes. */
  const uint8_t *top_start[ALTAR__MP_TOP_SPANS], *top_end[ALTAR__MP_TOP_SPANS];
  size_t used;             /* nodes taken from inline_nodes */
  altar__mp_block_t *heap; /* overflow blocks, freed by altar__mp_doc_free */
  msgpack_object inline_nodes[ALTAR__MP_INLINE_NODES];
} altar__mp_doc_t;

/* Parses data in one pass with exactly the bounds, verdicts and messages of
 * altar__mp_check, building the same tree msgpack_unpack_next would. *doc
 * needs no initialisation; call altar__mp_doc_free afterwards whatever the
 * result. ETOOBIG, EDECODE or ENOMEM. */
int altar__mp_parse(const void *data, size_t len, const char *root, altar__mp_doc_t *doc, altar_error_t *err);
void altar__mp_doc_free(altar__mp_doc_t *doc);

/* Typed walk over an unpacked object tree. Each getter checks the object's
 * type and reports "<path>: expected <type>" on mismatch. Getters that return
 * strings allocate (malloc) copies; the caller owns them. */
typedef struct altar__rd {
  altar__path_t path;
  altar_error_t *err;
  /* Set when the walk met something our encoder writes otherwise (a struct
   * with a key missing or unknown, an integer where a float belongs, nil
   * resources): the typed half of the canonical check. */
  bool noncanon;
  const altar__mp_doc_t *doc; /* the tree being walked */
} altar__rd_t;

int altar__rd_fail(altar__rd_t *r, int code, const char *what);
/* As altar__wr_fail_size, for a read. */
int altar__rd_fail_size(altar__rd_t *r, const char *what, size_t n, size_t bound);
int altar__rd_str(altar__rd_t *r, const msgpack_object *o, char **pout);
int altar__rd_opt_str(altar__rd_t *r, const msgpack_object *o, char **pout); /* nil → NULL */
int altar__rd_i64(altar__rd_t *r, const msgpack_object *o, int64_t *pout);
int altar__rd_opt_i64(altar__rd_t *r, const msgpack_object *o, altar_opt_i64_t *pout);
int altar__rd_bool(altar__rd_t *r, const msgpack_object *o, bool *pout);
int altar__rd_f64(altar__rd_t *r, const msgpack_object *o, double *pout); /* finite; ints accepted */
int altar__rd_strv(altar__rd_t *r, const msgpack_object *o, char ***pv, size_t *pn);
int altar__rd_strmap(altar__rd_t *r, const msgpack_object *o, altar_strmap_t *m);
int altar__rd_opt_strmap(altar__rd_t *r, const msgpack_object *o, altar_strmap_t **pm);
/* Requires a map; for NULL-terminated `keys`, calls back with the index of
 * each known key (unknown keys skipped, duplicates rejected) and the path
 * already extended by the key name. `required` is a bitmask of key indexes
 * that must be present. */
typedef int (*altar__rd_field_fn)(altar__rd_t *r, void *ctx, int idx, const msgpack_object *val);
int altar__rd_struct(altar__rd_t *r, const msgpack_object *o, const char *const *keys, uint32_t required,
                     altar__rd_field_fn fn, void *ctx);

/* ---- writing (core/codec_msgpack_write.c) ---- */

/* A msgpack packer appending to an altar_buf_t. An unencodable value (NULL
 * required string, bound exceeded, invalid UTF-8, non-finite float) is
 * reported by field: the path is not tracked on the way down (encoding is
 * hot, failing is rare) but collected segment by segment as the failure
 * returns through ALTAR__WR_FIELD and the wr_at_* helpers. */
typedef struct altar__wr_seg {
  const char *name; /* NULL for an array index */
  size_t len;
  size_t index;
} altar__wr_seg_t;

#define ALTAR__WR_MAX_SEGS (ALTAR_MAX_DEPTH * 2 + 8)
typedef struct altar__wr {
  msgpack_packer pk;
  altar_buf_t *out;
  bool oom;
  const char *root;
  int fail_code;
  const char *fail_what;                    /* set by altar__wr_fail, reported by altar__wr_finish */
  char fail_buf[96];                        /* fail_what of altar__wr_fail_size */
  altar__wr_seg_t segs[ALTAR__WR_MAX_SEGS]; /* innermost first */
  size_t nsegs;
  altar_error_t *err;
} altar__wr_t;

void altar__wr_init(altar__wr_t *w, altar_buf_t *out, const char *root, altar_error_t *err);
/* Final status of a top-level write that returned rc: a failure recorded by
 * altar__wr_fail is turned into the error naming its field; on success,
 * ENOMEM if any append failed, ETOOBIG past ALTAR_MAX_MESSAGE bytes written
 * since `start`. */
int altar__wr_finish(altar__wr_t *w, size_t start, int rc);
/* Records a failure (`what` must be a string literal); returns code. */
int altar__wr_fail(altar__wr_t *w, int code, const char *what);
/* ALTAR_ETOOBIG for a string, array or map (what) of n bytes or entries over
 * bound, both named in the message. */
int altar__wr_fail_size(altar__wr_t *w, const char *what, size_t n, size_t bound);
/* Pass a failure rc up through the entry `name` / element `i`. */
static inline int altar__wr_at_key(altar__wr_t *w, const char *name, size_t len, int rc) {
  if (rc && w->fail_what && w->nsegs < ALTAR__WR_MAX_SEGS) w->segs[w->nsegs++] = (altar__wr_seg_t){name, len, 0};
  return rc;
}
static inline int altar__wr_at_index(altar__wr_t *w, size_t i, int rc) {
  if (rc && w->fail_what && w->nsegs < ALTAR__WR_MAX_SEGS) w->segs[w->nsegs++] = (altar__wr_seg_t){NULL, 0, i};
  return rc;
}
/* Writes the key of a map entry; entries must come in bytewise key order. */
void altar__wr_key(altar__wr_t *w, const char *key);
int altar__wr_map(altar__wr_t *w, size_t n);
int altar__wr_array(altar__wr_t *w, size_t n);
int altar__wr_str(altar__wr_t *w, const char *s);     /* NULL is an error */
int altar__wr_opt_str(altar__wr_t *w, const char *s); /* NULL → nil */
void altar__wr_i64(altar__wr_t *w, int64_t v);
void altar__wr_opt_i64(altar__wr_t *w, altar_opt_i64_t v);
void altar__wr_bool(altar__wr_t *w, bool v);
void altar__wr_nil(altar__wr_t *w);
int altar__wr_f64(altar__wr_t *w, double v);
int altar__wr_strv(altar__wr_t *w, char *const *v, size_t n);
int altar__wr_strmap(altar__wr_t *w, const altar_strmap_t *m);
int altar__wr_opt_strmap(altar__wr_t *w, const altar_strmap_t *m);

/* Field helper: write the key (a literal), write the value, and on failure
 * add the key to the path on the way out. */
#define ALTAR__WR_FIELD(w, key, expr)                                                                                  \
  do {                                                                                                                 \
    msgpack_pack_str_with_body(&(w)->pk, (key), sizeof(key) - 1);                                                      \
    int wr_rc__ = (expr);                                                                                              \
    if (wr_rc__) return altar__wr_at_key((w), (key), sizeof(key) - 1, wr_rc__);                                        \
  } while (0)

/* ---- the model's parts (core/codec_parts.c) ---- */

int altar__wr_spec(altar__wr_t *w, const altar_spec_t *spec);
int altar__wr_handle(altar__wr_t *w, const altar_handle_t *h);
int altar__wr_transfers(altar__wr_t *w, const altar_transfer_t *t, size_t n);
/* The "handle" and "kind" entries of a record's map, checked as a full
 * encoding checks them: the ledger packs them once per record and writes
 * the changing fields around them. */
int altar__encode_record_fixed(const altar_record_t *rec, altar_buf_t *out, altar_error_t *err);
int altar__wr_failure(altar__wr_t *w, const altar_failure_t *f); /* NULL → nil */
/* Decoders fill a zeroed target; on error the caller clears it. */
int altar__rd_spec(altar__rd_t *r, const msgpack_object *o, altar_spec_t *spec);
int altar__rd_handle(altar__rd_t *r, const msgpack_object *o, altar_handle_t *h);
int altar__rd_transfers(altar__rd_t *r, const msgpack_object *o, altar_transfer_t **pv, size_t *pn);
int altar__rd_failure(altar__rd_t *r, const msgpack_object *o, altar_failure_t **pf); /* nil → NULL */
int altar__rd_state(altar__rd_t *r, const msgpack_object *o, altar_state_t *ps);

/* ---- JSON (core/codec_json.c) ---- */

/* Generic msgpack object → compact JSON with sorted keys (malloc'd). */
char *altar__mp_to_json(const void *data, size_t len, const char *root, altar_error_t *err);

#endif
