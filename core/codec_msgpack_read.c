/* Bounded msgpack reading: a structural pre-check of untrusted bytes, the
 * zone-based unpack, and typed getters that name the field at fault. */
#include "core/codec_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- field paths ---- */

void altar__path_init(altar__path_t *p, const char *root) {
  p->len = 0;
  p->s[0] = '\0';
  if (root) altar__path_key(p, root, strlen(root));
}

static void path_append(altar__path_t *p, const char *s, size_t n) {
  size_t room = sizeof p->s - 1 - p->len;
  if (n > room) n = room;             /* a truncated path still names the start of the field */
  if (n) memcpy(p->s + p->len, s, n); /* an empty key may come with a NULL ptr */
  p->len += n;
  p->s[p->len] = '\0';
}

size_t altar__path_key(altar__path_t *p, const char *name, size_t nlen) {
  size_t old = p->len;
  if (p->len) path_append(p, ".", 1);
  path_append(p, name, nlen);
  return old;
}

size_t altar__path_index(altar__path_t *p, size_t i) {
  size_t old = p->len;
  char tmp[32];
  int n = snprintf(tmp, sizeof tmp, "[%zu]", i);
  path_append(p, tmp, (size_t)n);
  return old;
}

/* Eight bytes of ASCII without NUL. */
static bool ascii8(uint64_t w) {
  return !(w & 0x8080808080808080ull) && !((w - 0x0101010101010101ull) & ~w & 0x8080808080808080ull);
}

/* Fewer than eight bytes of ASCII without NUL, read as at most two
 * overlapping loads (a copy of variable length would call memcpy) and
 * padded with a harmless byte. */
static bool ascii_short(const unsigned char *p, size_t n) {
  uint64_t w = 0x0101010101010101ull;
  if (n >= 4) {
    uint32_t a, b;
    memcpy(&a, p, 4);
    memcpy(&b, p + n - 4, 4);
    w = a | (uint64_t)b << 32;
  } else if (n >= 2) {
    uint16_t a, b;
    memcpy(&a, p, 2);
    memcpy(&b, p + n - 2, 2);
    w = (w & ~0xffffffffull) | a | (uint64_t)b << 16;
  } else if (n == 1) {
    w = (w & ~0xffull) | p[0];
  }
  return ascii8(w);
}

/* Checks s[i, len) byte by byte; s[0, i) is known to be ASCII. */
static bool utf8_from(const unsigned char *s, size_t i, size_t len) {
  while (i < len) {
    unsigned c = s[i];
    if (c == 0) return false;
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t need;
    unsigned min;
    if (c >= 0xc2 && c <= 0xdf) {
      need = 1;
      min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
      need = 2;
      min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
      need = 3;
      min = 0x10000;
    } else {
      return false;
    }
    if (len - i <= need) return false;
    unsigned cp = c & (0x3fu >> need);
    for (size_t k = 1; k <= need; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3fu);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += need + 1;
  }
  return true;
}

bool altar__utf8_ok(const char *str, size_t len) {
  const unsigned char *s = (const unsigned char *)str;
  /* ASCII without NUL, eight bytes at a time, is the common case; the
   * first word that is not goes to the byte-wise check. */
  if (len < 8) return ascii_short(s, len) || utf8_from(s, 0, len);
  size_t i = 0;
  for (; len - i >= 8; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    if (!ascii8(w)) return utf8_from(s, i, len);
  }
  if (i == len) return true;
  /* The rest as the last eight bytes, overlapping bytes already seen. */
  uint64_t w;
  memcpy(&w, s + len - 8, 8);
  return ascii8(w) || utf8_from(s, i, len);
}

/* ---- structural pre-check ----
 * msgpack-c's unpacker allocates an array's or map's element storage from the
 * count in its header before reading any element, so a 5-byte header can ask
 * for gigabytes. This pass walks the bytes first and refuses any count that
 * exceeds our bounds or the bytes left, and any nesting past ALTAR_MAX_DEPTH. */

typedef struct scan {
  const uint8_t *p;
  const uint8_t *end;
  const uint8_t *start;
  altar__path_t path;
  altar_error_t *err;
} scan_t;

static int scan_fail(scan_t *s, int code, const char *what) {
  return altar_error_set(s->err, code, "%s: %s", s->path.len ? s->path.s : "message", what);
}

static int scan_truncated(scan_t *s) {
  char what[64];
  snprintf(what, sizeof what, "truncated: input ends after %zu bytes", (size_t)(s->end - s->start));
  return scan_fail(s, ALTAR_EDECODE, what);
}

static int scan_need(scan_t *s, size_t n) { return (size_t)(s->end - s->p) < n ? scan_truncated(s) : ALTAR_OK; }

/* Reads an n-byte big-endian length after the format byte. */
static int scan_len(scan_t *s, size_t n, uint64_t *plen) {
  int rc = scan_need(s, n);
  if (rc) return rc;
  *plen = altar__be(s->p, n);
  s->p += n;
  return ALTAR_OK;
}

static int scan_bytes(scan_t *s, uint64_t n, const char *kind) {
  if (n > ALTAR_MAX_STRING) {
    char what[96];
    snprintf(what, sizeof what, "%s of %" PRIu64 " bytes exceeds %u", kind, n, ALTAR_MAX_STRING);
    return scan_fail(s, ALTAR_ETOOBIG, what);
  }
  int rc = scan_need(s, (size_t)n);
  if (rc) return rc;
  s->p += n;
  return ALTAR_OK;
}

static int scan_value(scan_t *s, unsigned depth);

static int scan_container(scan_t *s, uint64_t n, bool is_map, unsigned depth) {
  if (depth + 1 > ALTAR_MAX_DEPTH) return scan_fail(s, ALTAR_ETOOBIG, "nesting exceeds the depth bound");
  uint64_t max = is_map ? ALTAR_MAX_MAP : ALTAR_MAX_ARRAY;
  if (n > max) {
    char what[96];
    snprintf(what, sizeof what, "%s of %" PRIu64 " entries exceeds %" PRIu64, is_map ? "map" : "array", n, max);
    return scan_fail(s, ALTAR_ETOOBIG, what);
  }
  /* Every element takes at least one byte: a count the bytes cannot hold is truncation. */
  if ((is_map ? 2 * n : n) > (uint64_t)(s->end - s->p)) return scan_truncated(s);
  for (uint64_t i = 0; i < n; i++) {
    size_t old;
    if (is_map) {
      const uint8_t *k = s->p;
      int rc = scan_value(s, depth + 1);
      if (rc) return rc;
      /* Name the value by its key when the key is a short string. */
      uint8_t f = k[0];
      if (f >= 0xa0 && f <= 0xbf && (size_t)(f & 0x1f) + 1 == (size_t)(s->p - k))
        old = altar__path_key(&s->path, (const char *)k + 1, f & 0x1f);
      else if (f == 0xd9 && s->p - k >= 2 && (size_t)k[1] + 2 == (size_t)(s->p - k))
        old = altar__path_key(&s->path, (const char *)k + 2, k[1]);
      else old = altar__path_key(&s->path, "?", 1);
    } else {
      old = altar__path_index(&s->path, (size_t)i);
    }
    int rc = scan_value(s, depth + 1);
    altar__path_pop(&s->path, old);
    if (rc) return rc;
  }
  return ALTAR_OK;
}

static int scan_value(scan_t *s, unsigned depth) {
  int rc = scan_need(s, 1);
  if (rc) return rc;
  uint8_t f = *s->p++;
  uint64_t n;
  if (f <= 0x7f || f >= 0xe0 || f == 0xc0 || f == 0xc2 || f == 0xc3) return ALTAR_OK;
  if (f >= 0x80 && f <= 0x8f) return scan_container(s, f & 0x0f, true, depth);
  if (f >= 0x90 && f <= 0x9f) return scan_container(s, f & 0x0f, false, depth);
  if (f >= 0xa0 && f <= 0xbf) return scan_bytes(s, f & 0x1f, "string");
  switch (f) {
  case 0xc4:
  case 0xc5:
  case 0xc6: /* bin 8/16/32 */
    if ((rc = scan_len(s, (size_t)1 << (f - 0xc4), &n))) return rc;
    return scan_bytes(s, n, "binary");
  case 0xc7:
  case 0xc8:
  case 0xc9: /* ext 8/16/32: length, type byte, data */
    if ((rc = scan_len(s, (size_t)1 << (f - 0xc7), &n))) return rc;
    return scan_bytes(s, n + 1, "extension");
  case 0xca: return scan_need(s, 4) ? scan_truncated(s) : (s->p += 4, ALTAR_OK);
  case 0xcb: return scan_need(s, 8) ? scan_truncated(s) : (s->p += 8, ALTAR_OK);
  case 0xcc:
  case 0xcd:
  case 0xce:
  case 0xcf: /* uint 8..64 */
  case 0xd0:
  case 0xd1:
  case 0xd2:
  case 0xd3: { /* int 8..64 */
    size_t w = (size_t)1 << ((f - 0xcc) & 3);
    if ((rc = scan_need(s, w))) return rc;
    s->p += w;
    return ALTAR_OK;
  }
  case 0xd4:
  case 0xd5:
  case 0xd6:
  case 0xd7:
  case 0xd8: /* fixext 1..16 + type byte */ return scan_bytes(s, ((uint64_t)1 << (f - 0xd4)) + 1, "extension");
  case 0xd9:
  case 0xda:
  case 0xdb:
    if ((rc = scan_len(s, (size_t)1 << (f - 0xd9), &n))) return rc;
    return scan_bytes(s, n, "string");
  case 0xdc:
  case 0xdd:
    if ((rc = scan_len(s, (size_t)2 << (f - 0xdc), &n))) return rc;
    return scan_container(s, n, false, depth);
  case 0xde:
  case 0xdf:
    if ((rc = scan_len(s, (size_t)2 << (f - 0xde), &n))) return rc;
    return scan_container(s, n, true, depth);
  default: /* 0xc1 is reserved */ return scan_fail(s, ALTAR_EDECODE, "invalid msgpack format byte 0xc1");
  }
}

int altar__mp_check(const void *data, size_t len, const char *root, altar_error_t *err) {
  scan_t s = {.p = data, .end = (const uint8_t *)data + len, .start = data, .err = err};
  altar__path_init(&s.path, root);
  if (len > ALTAR_MAX_MESSAGE) {
    char what[96];
    snprintf(what, sizeof what, "message of %zu bytes exceeds %u", len, ALTAR_MAX_MESSAGE);
    return scan_fail(&s, ALTAR_ETOOBIG, what);
  }
  if (!data || len == 0) return scan_fail(&s, ALTAR_EDECODE, "empty input");
  int rc = scan_value(&s, 0);
  if (rc) return rc;
  if (s.p != s.end) {
    char what[64];
    snprintf(what, sizeof what, "%zu trailing bytes after the message", (size_t)(s.end - s.p));
    altar__path_init(&s.path, root);
    return scan_fail(&s, ALTAR_EDECODE, what);
  }
  return ALTAR_OK;
}

/* ---- one-pass parse ----
 * The same verdicts as the pre-check above, reached while building the tree,
 * without keeping a field path: on any refusal the pre-check runs once more to
 * word the error, so messages stay exactly those of altar__mp_check. */

struct altar__mp_block {
  altar__mp_block_t *next;
  size_t cap, used;
  msgpack_object nodes[];
};

#define MP_BLOCK_NODES 1024u
#define MP_REFUSED 1 /* a bound or truncation: worded by altar__mp_check */

typedef struct mp_parser {
  const uint8_t *p;
  const uint8_t *end;
  altar__mp_doc_t *doc;
  const uint8_t *last_trail; /* see mp_set_str */
  bool noncanon;             /* see altar__mp_doc_t.canonical */
} mp_parser_t;

/* n contiguous nodes (a container's elements, two per map entry). */
static msgpack_object *mp_nodes(altar__mp_doc_t *d, size_t n) {
  if (ALTAR__MP_INLINE_NODES - d->used >= n) {
    msgpack_object *o = d->inline_nodes + d->used;
    d->used += n;
    return o;
  }
  altar__mp_block_t *b = d->heap;
  if (!b || b->cap - b->used < n) {
    size_t cap = n > MP_BLOCK_NODES ? n : MP_BLOCK_NODES;
    b = malloc(sizeof *b + cap * sizeof b->nodes[0]);
    if (!b) return NULL;
    b->cap = cap;
    b->used = 0;
    b->next = d->heap;
    d->heap = b;
  }
  msgpack_object *o = b->nodes + b->used;
  b->used += n;
  return o;
}

static int mp_value(mp_parser_t *s, unsigned depth, msgpack_object *o);

static int mp_container(mp_parser_t *s, uint64_t n, bool is_map, unsigned depth, msgpack_object *o) {
  if (depth + 1 > ALTAR_MAX_DEPTH) return MP_REFUSED;
  if (n > (is_map ? ALTAR_MAX_MAP : ALTAR_MAX_ARRAY)) return MP_REFUSED;
  if ((is_map ? 2 * n : n) > (uint64_t)(s->end - s->p)) return MP_REFUSED;
  msgpack_object *kids = mp_nodes(s->doc, (size_t)(is_map ? 2 * n : n) + (n == 0));
  if (!kids) return ALTAR_ENOMEM;
  if (is_map) {
    /* msgpack_object_kv is two msgpack_objects laid end to end */
    _Static_assert(sizeof(msgpack_object_kv) == 2 * sizeof(msgpack_object), "kv layout");
    o->type = MSGPACK_OBJECT_MAP;
    o->via.map.size = (uint32_t)n;
    o->via.map.ptr = (msgpack_object_kv *)(void *)kids;
  } else {
    o->type = MSGPACK_OBJECT_ARRAY;
    o->via.array.size = (uint32_t)n;
    o->via.array.ptr = kids;
  }
  size_t total = (size_t)(is_map ? 2 * n : n);
  bool top = depth == 0 && is_map;
  for (size_t i = 0; i < total; i++) {
    const uint8_t *at = s->p;
    int rc = mp_value(s, depth + 1, &kids[i]);
    if (rc) return rc;
    if (top && (i & 1) && i / 2 < ALTAR__MP_TOP_SPANS) {
      s->doc->top_start[i / 2] = at;
      s->doc->top_end[i / 2] = s->p;
    }
    if (is_map && !(i & 1) && !s->noncanon) {
      /* Keys rise strictly, bytewise (then shorter first). */
      const msgpack_object *k = &kids[i];
      if (k->type != MSGPACK_OBJECT_STR) {
        s->noncanon = true;
      } else if (i >= 2) {
        const msgpack_object *pk = &kids[i - 2];
        if (!altar__key_before(pk->via.str.ptr, pk->via.str.size, k->via.str.ptr, k->via.str.size)) s->noncanon = true;
      }
    }
  }
  return ALTAR_OK;
}

/* n bytes of string, binary or extension data at s->p. */
static int mp_bytes(mp_parser_t *s, uint64_t n, const uint8_t **pp) {
  if (n > ALTAR_MAX_STRING || n > (uint64_t)(s->end - s->p)) return MP_REFUSED;
  if (n) s->last_trail = s->p;
  *pp = s->p;
  s->p += n;
  return ALTAR_OK;
}

static int mp_len(mp_parser_t *s, size_t w, uint64_t *pn) {
  if ((size_t)(s->end - s->p) < w) return MP_REFUSED;
  s->last_trail = s->p;
  *pn = altar__be(s->p, w);
  s->p += w;
  return ALTAR_OK;
}

/* An empty string or binary gets the ptr msgpack-c 4 gives it: the start of
 * the last multi-byte field read, NULL when there was none. Only its
 * NULL-ness is observable (the JSON bridge refuses a NULL string). */
static void mp_set_str(mp_parser_t *s, msgpack_object *o, msgpack_object_type t, const uint8_t *p, uint64_t n) {
  o->type = t;
  o->via.str.size = (uint32_t)n;
  o->via.str.ptr = (const char *)(n ? p : s->last_trail);
}

static int mp_ext(mp_parser_t *s, uint64_t n, msgpack_object *o) {
  const uint8_t *p;
  int rc = mp_bytes(s, n + 1, &p);
  if (rc) return rc;
  o->type = MSGPACK_OBJECT_EXT;
  o->via.ext.type = (int8_t)p[0];
  o->via.ext.size = (uint32_t)n;
  o->via.ext.ptr = (const char *)p + 1;
  return ALTAR_OK;
}

/* Integers as msgpack-c types them: a non-negative value is POSITIVE_INTEGER
 * whatever its wire format. */
static void mp_int(msgpack_object *o, int64_t v) {
  if (v >= 0) {
    o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
    o->via.u64 = (uint64_t)v;
  } else {
    o->type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
    o->via.i64 = v;
  }
}

static int mp_wide(mp_parser_t *s, uint8_t f, unsigned depth, msgpack_object *o);
static bool mp_shortest(uint8_t f, const msgpack_object *o);

static int mp_value(mp_parser_t *s, unsigned depth, msgpack_object *o) {
  if (s->p >= s->end) return MP_REFUSED;
  uint8_t f = *s->p++;
  const uint8_t *p;
  int rc;
  if (f <= 0x7f) {
    o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
    o->via.u64 = f;
    return ALTAR_OK;
  }
  if (f >= 0xe0) {
    o->type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
    o->via.i64 = (int8_t)f;
    return ALTAR_OK;
  }
  if (f >= 0xa0 && f <= 0xbf) {
    if ((rc = mp_bytes(s, f & 0x1f, &p))) return rc;
    mp_set_str(s, o, MSGPACK_OBJECT_STR, p, f & 0x1f);
    return ALTAR_OK;
  }
  if (f <= 0x8f) return mp_container(s, f & 0x0f, true, depth, o);
  if (f <= 0x9f) return mp_container(s, f & 0x0f, false, depth, o);
  rc = mp_wide(s, f, depth, o);
  if (!rc && !s->noncanon && !mp_shortest(f, o)) s->noncanon = true;
  return rc;
}

/* Whether the (non-fix) format byte f was the shortest for the value o it
 * produced, as msgpack-c's packer chooses: unsigned forms for non-negative
 * integers, signed for negative, float64 only, str (never bin), no ext. */
static bool mp_shortest(uint8_t f, const msgpack_object *o) {
  switch (f) {
  case 0xc0:
  case 0xc2:
  case 0xc3:
  case 0xcb: return true;
  case 0xcc: return o->via.u64 >= 0x80;
  case 0xcd: return o->via.u64 >= 0x100;
  case 0xce: return o->via.u64 >= 0x10000;
  case 0xcf: return o->via.u64 >= 0x100000000ull;
  case 0xd0: return o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o->via.i64 < -32;
  case 0xd1: return o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o->via.i64 < -128;
  case 0xd2: return o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o->via.i64 < -32768;
  case 0xd3: return o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o->via.i64 < INT32_MIN;
  case 0xd9: return o->via.str.size >= 32;
  case 0xda: return o->via.str.size >= 0x100;
  case 0xdb: return o->via.str.size >= 0x10000;
  case 0xdc: return o->via.array.size >= 16;
  case 0xdd: return o->via.array.size >= 0x10000;
  case 0xde: return o->via.map.size >= 16;
  case 0xdf: return o->via.map.size >= 0x10000;
  default: return false; /* float32, bin, ext */
  }
}

/* The formats with a header byte of their own (not fixint/fixstr/fixmap/fixarray). */
static int mp_wide(mp_parser_t *s, uint8_t f, unsigned depth, msgpack_object *o) {
  uint64_t n;
  const uint8_t *p;
  int rc;
  switch (f) {
  case 0xc0: o->type = MSGPACK_OBJECT_NIL; return ALTAR_OK;
  case 0xc2:
  case 0xc3:
    o->type = MSGPACK_OBJECT_BOOLEAN;
    o->via.boolean = f == 0xc3;
    return ALTAR_OK;
  case 0xc4:
  case 0xc5:
  case 0xc6:
    if ((rc = mp_len(s, (size_t)1 << (f - 0xc4), &n)) || (rc = mp_bytes(s, n, &p))) return rc;
    mp_set_str(s, o, MSGPACK_OBJECT_BIN, p, n);
    return ALTAR_OK;
  case 0xc7:
  case 0xc8:
  case 0xc9:
    if ((rc = mp_len(s, (size_t)1 << (f - 0xc7), &n))) return rc;
    return mp_ext(s, n, o);
  case 0xca: {
    if ((rc = mp_len(s, 4, &n))) return rc;
    uint32_t u = (uint32_t)n;
    float fv;
    memcpy(&fv, &u, sizeof fv);
    o->type = MSGPACK_OBJECT_FLOAT32;
    o->via.f64 = fv;
    return ALTAR_OK;
  }
  case 0xcb: {
    if ((rc = mp_len(s, 8, &n))) return rc;
    double dv;
    memcpy(&dv, &n, sizeof dv);
    o->type = MSGPACK_OBJECT_FLOAT64;
    o->via.f64 = dv;
    return ALTAR_OK;
  }
  case 0xcc:
  case 0xcd:
  case 0xce:
  case 0xcf:
    if ((rc = mp_len(s, (size_t)1 << (f - 0xcc), &n))) return rc;
    o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
    o->via.u64 = n;
    return ALTAR_OK;
  case 0xd0:
    if ((rc = mp_len(s, 1, &n))) return rc;
    mp_int(o, (int8_t)(uint8_t)n);
    return ALTAR_OK;
  case 0xd1:
    if ((rc = mp_len(s, 2, &n))) return rc;
    mp_int(o, (int16_t)(uint16_t)n);
    return ALTAR_OK;
  case 0xd2:
    if ((rc = mp_len(s, 4, &n))) return rc;
    mp_int(o, (int32_t)(uint32_t)n);
    return ALTAR_OK;
  case 0xd3:
    if ((rc = mp_len(s, 8, &n))) return rc;
    mp_int(o, (int64_t)n);
    return ALTAR_OK;
  case 0xd4:
  case 0xd5:
  case 0xd6:
  case 0xd7:
  case 0xd8: return mp_ext(s, (uint64_t)1 << (f - 0xd4), o);
  case 0xd9:
  case 0xda:
  case 0xdb:
    if ((rc = mp_len(s, (size_t)1 << (f - 0xd9), &n)) || (rc = mp_bytes(s, n, &p))) return rc;
    mp_set_str(s, o, MSGPACK_OBJECT_STR, p, n);
    return ALTAR_OK;
  case 0xdc:
  case 0xdd:
    if ((rc = mp_len(s, (size_t)2 << (f - 0xdc), &n))) return rc;
    return mp_container(s, n, false, depth, o);
  case 0xde:
  case 0xdf:
    if ((rc = mp_len(s, (size_t)2 << (f - 0xde), &n))) return rc;
    return mp_container(s, n, true, depth, o);
  default: /* 0xc1 */ return MP_REFUSED;
  }
}

void altar__mp_doc_free(altar__mp_doc_t *doc) {
  if (!doc) return;
  altar__mp_block_t *b = doc->heap;
  while (b) {
    altar__mp_block_t *nx = b->next;
    free(b);
    b = nx;
  }
  doc->heap = NULL;
  doc->used = 0;
}

int altar__mp_parse(const void *data, size_t len, const char *root, altar__mp_doc_t *doc, altar_error_t *err) {
  doc->used = 0;
  doc->heap = NULL;
  doc->root.type = MSGPACK_OBJECT_NIL;
  int rc = MP_REFUSED;
  doc->canonical = false;
  if (data && len && len <= ALTAR_MAX_MESSAGE) {
    mp_parser_t s = {.p = data, .end = (const uint8_t *)data + len, .doc = doc};
    rc = mp_value(&s, 0, &doc->root);
    if (!rc && s.p != s.end) rc = MP_REFUSED;
    doc->canonical = !rc && !s.noncanon;
  }
  if (rc == ALTAR_ENOMEM) return altar_error_set(err, ALTAR_ENOMEM, "%s: out of memory", root);
  if (rc) {
    /* Word the refusal as the pre-check does; it refuses whatever we refuse. */
    rc = altar__mp_check(data, len, root, err);
    if (!rc) rc = altar_error_set(err, ALTAR_EDECODE, "%s: malformed msgpack", root);
  }
  return rc;
}

/* ---- typed getters ---- */

int altar__rd_fail(altar__rd_t *r, int code, const char *what) {
  return altar_error_set(r->err, code, "%s: %s", r->path.len ? r->path.s : "message", what);
}

int altar__rd_fail_size(altar__rd_t *r, const char *what, size_t n, size_t bound) {
  const char *unit = strcmp(what, "string") ? "entries" : "bytes";
  return altar_error_set(r->err, ALTAR_ETOOBIG, "%s: %s of %zu %s exceeds the size bound of %zu %s",
                         r->path.len ? r->path.s : "message", what, n, unit, bound, unit);
}

/* Bounds and UTF-8 of string bytes, checked where they lie. */
static int rd_valid(altar__rd_t *r, const char *s, size_t n) {
  if (n > ALTAR_MAX_STRING) return altar__rd_fail_size(r, "string", n, ALTAR_MAX_STRING);
  if (!altar__utf8_ok(s, n)) return altar__rd_fail(r, ALTAR_EDECODE, "expected UTF-8 text without NUL bytes");
  return ALTAR_OK;
}

static int rd_copy(altar__rd_t *r, const char *s, size_t n, char **pout) {
  int rc = rd_valid(r, s, n);
  if (rc) return rc;
  char *d = malloc(n + 1);
  if (!d) return altar__rd_fail(r, ALTAR_ENOMEM, "out of memory");
  if (n) memcpy(d, s, n);
  d[n] = '\0';
  *pout = d;
  return ALTAR_OK;
}

int altar__rd_str(altar__rd_t *r, const msgpack_object *o, char **pout) {
  if (o->type != MSGPACK_OBJECT_STR) return altar__rd_fail(r, ALTAR_EDECODE, "expected string");
  return rd_copy(r, o->via.str.ptr, o->via.str.size, pout);
}

int altar__rd_opt_str(altar__rd_t *r, const msgpack_object *o, char **pout) {
  if (o->type == MSGPACK_OBJECT_NIL) {
    *pout = NULL;
    return ALTAR_OK;
  }
  if (o->type != MSGPACK_OBJECT_STR) return altar__rd_fail(r, ALTAR_EDECODE, "expected string or nil");
  return rd_copy(r, o->via.str.ptr, o->via.str.size, pout);
}

int altar__rd_i64(altar__rd_t *r, const msgpack_object *o, int64_t *pout) {
  if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
    if (o->via.u64 > (uint64_t)INT64_MAX) return altar__rd_fail(r, ALTAR_EDECODE, "integer out of range");
    *pout = (int64_t)o->via.u64;
    return ALTAR_OK;
  }
  if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
    *pout = o->via.i64;
    return ALTAR_OK;
  }
  return altar__rd_fail(r, ALTAR_EDECODE, "expected integer");
}

int altar__rd_opt_i64(altar__rd_t *r, const msgpack_object *o, altar_opt_i64_t *pout) {
  if (o->type == MSGPACK_OBJECT_NIL) {
    *pout = (altar_opt_i64_t){false, 0};
    return ALTAR_OK;
  }
  if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER && o->type != MSGPACK_OBJECT_NEGATIVE_INTEGER)
    return altar__rd_fail(r, ALTAR_EDECODE, "expected integer or nil");
  pout->set = true;
  return altar__rd_i64(r, o, &pout->v);
}

int altar__rd_bool(altar__rd_t *r, const msgpack_object *o, bool *pout) {
  if (o->type != MSGPACK_OBJECT_BOOLEAN) return altar__rd_fail(r, ALTAR_EDECODE, "expected boolean");
  *pout = o->via.boolean;
  return ALTAR_OK;
}

int altar__rd_f64(altar__rd_t *r, const msgpack_object *o, double *pout) {
  double v;
  switch (o->type) {
  case MSGPACK_OBJECT_FLOAT32:
  case MSGPACK_OBJECT_FLOAT64: v = o->via.f64; break;
  case MSGPACK_OBJECT_POSITIVE_INTEGER:
    v = (double)o->via.u64;
    r->noncanon = true;
    break;
  case MSGPACK_OBJECT_NEGATIVE_INTEGER:
    v = (double)o->via.i64;
    r->noncanon = true;
    break;
  default: return altar__rd_fail(r, ALTAR_EDECODE, "expected number");
  }
  if (!isfinite(v)) return altar__rd_fail(r, ALTAR_EDECODE, "expected a finite number");
  *pout = v;
  return ALTAR_OK;
}

int altar__rd_strv(altar__rd_t *r, const msgpack_object *o, char ***pv, size_t *pn) {
  if (o->type != MSGPACK_OBJECT_ARRAY) return altar__rd_fail(r, ALTAR_EDECODE, "expected array of strings");
  size_t n = o->via.array.size;
  if (n > ALTAR_MAX_ARRAY) return altar__rd_fail_size(r, "array", n, ALTAR_MAX_ARRAY);
  *pv = NULL;
  *pn = 0;
  if (!n) return ALTAR_OK;
  char **v = calloc(n, sizeof *v);
  if (!v) return altar__rd_fail(r, ALTAR_ENOMEM, "out of memory");
  *pv = v; /* filled progressively so the caller's clear frees a partial array */
  for (size_t i = 0; i < n; i++) {
    size_t old = altar__path_index(&r->path, i);
    int rc = altar__rd_str(r, &o->via.array.ptr[i], &v[i]);
    altar__path_pop(&r->path, old);
    if (rc) return rc;
    *pn = i + 1;
  }
  return ALTAR_OK;
}

/* A string object checked in place; no copy. */
static int rd_check(altar__rd_t *r, const msgpack_object *o) {
  if (o->type != MSGPACK_OBJECT_STR) return altar__rd_fail(r, ALTAR_EDECODE, "expected string");
  return rd_valid(r, o->via.str.ptr, o->via.str.size);
}

int altar__rd_strmap(altar__rd_t *r, const msgpack_object *o, altar_strmap_t *m) {
  if (o->type != MSGPACK_OBJECT_MAP) return altar__rd_fail(r, ALTAR_EDECODE, "expected map of strings");
  if (o->via.map.size > ALTAR_MAX_MAP) return altar__rd_fail_size(r, "map", o->via.map.size, ALTAR_MAX_MAP);
  if (altar_strmap_reserve(m, o->via.map.size)) return altar__rd_fail(r, ALTAR_ENOMEM, "out of memory");
  for (size_t i = 0; i < o->via.map.size; i++) {
    const msgpack_object_kv *kv = &o->via.map.ptr[i];
    if (kv->key.type != MSGPACK_OBJECT_STR) return altar__rd_fail(r, ALTAR_EDECODE, "map key: expected string");
    int rc = rd_check(r, &kv->key);
    if (rc) return rc;
    /* An empty string may come with a NULL pointer. */
    const char *key = kv->key.via.str.size ? kv->key.via.str.ptr : "";
    const char *val = kv->val.type == MSGPACK_OBJECT_STR && kv->val.via.str.size ? kv->val.via.str.ptr : "";
    size_t klen = kv->key.via.str.size;
    size_t old = altar__path_key(&r->path, key, klen);
    rc = rd_check(r, &kv->val);
    if (!rc) rc = altar_strmap_addn(m, key, klen, val, kv->val.via.str.size);
    if (rc == ALTAR_EEXIST) rc = altar__rd_fail(r, ALTAR_EDECODE, "duplicate key");
    else if (rc == ALTAR_ENOMEM) rc = altar__rd_fail(r, ALTAR_ENOMEM, "out of memory");
    altar__path_pop(&r->path, old);
    if (rc) return rc;
  }
  return ALTAR_OK;
}

int altar__rd_opt_strmap(altar__rd_t *r, const msgpack_object *o, altar_strmap_t **pm) {
  *pm = NULL;
  if (o->type == MSGPACK_OBJECT_NIL) return ALTAR_OK;
  if (o->type != MSGPACK_OBJECT_MAP) return altar__rd_fail(r, ALTAR_EDECODE, "expected map of strings or nil");
  if (!(*pm = altar_strmap_new())) return altar__rd_fail(r, ALTAR_ENOMEM, "out of memory");
  return altar__rd_strmap(r, o, *pm);
}

int altar__rd_struct(altar__rd_t *r, const msgpack_object *o, const char *const *keys, uint32_t required,
                     altar__rd_field_fn fn, void *ctx) {
  if (o->type != MSGPACK_OBJECT_MAP) return altar__rd_fail(r, ALTAR_EDECODE, "expected map");
  uint32_t seen = 0;
  for (size_t i = 0; i < o->via.map.size; i++) {
    const msgpack_object_kv *kv = &o->via.map.ptr[i];
    if (kv->key.type != MSGPACK_OBJECT_STR) return altar__rd_fail(r, ALTAR_EDECODE, "map key: expected string");
    const char *k = kv->key.via.str.ptr;
    size_t klen = kv->key.via.str.size;
    int idx = -1;
    for (int j = 0; klen && keys[j]; j++) {
      if (keys[j][0] == k[0] && strlen(keys[j]) == klen && !memcmp(keys[j], k, klen)) {
        idx = j;
        break;
      }
    }
    if (idx < 0) { /* unknown keys are ignored: an old reader reads a new writer */
      r->noncanon = true;
      continue;
    }
    size_t old = altar__path_key(&r->path, keys[idx], klen);
    int rc;
    if (seen & (1u << idx)) rc = altar__rd_fail(r, ALTAR_EDECODE, "duplicate key");
    else rc = fn(r, ctx, idx, &kv->val);
    altar__path_pop(&r->path, old);
    if (rc) return rc;
    seen |= 1u << idx;
  }
  for (int j = 0; keys[j]; j++)
    if (!(seen & (1u << j))) r->noncanon = true; /* our encoder writes every field */
  uint32_t missing = required & ~seen;
  for (int j = 0; missing && keys[j]; j++) {
    if (missing & (1u << j)) {
      size_t old = altar__path_key(&r->path, keys[j], strlen(keys[j]));
      int rc = altar__rd_fail(r, ALTAR_EDECODE, "missing required field");
      altar__path_pop(&r->path, old);
      return rc;
    }
  }
  return ALTAR_OK;
}
