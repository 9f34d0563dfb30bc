/* The marker an imported partition keeps until its tail is applied
 * (import_marker.h). Stored as lines of text:
 *   v1
 *   cp <checkpoint id>
 *   until <the partition's end at the import>
 *   end <partition> <next> <topic>      (one per recorded ready/dead end) */
#include "reconciler/import_marker.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int altar__import_marker_encode(const altar_checkpoint_t *cp, int64_t until, altar_buf_t *out, altar_error_t *err) {
  char line[400];
  snprintf(line, sizeof line, "v1\ncp %s\nuntil %" PRId64 "\n", cp->id, until);
  int rc = altar_buf_append_str(out, line);
  for (size_t i = 0; !rc && i < cp->n_published && i < ALTAR__IMPORT_MARKER_MAX_ENDS; i++) {
    snprintf(line, sizeof line, "end %" PRId32 " %" PRId64 " %s\n", cp->published[i].partition, cp->published[i].next,
             cp->published[i].topic);
    rc = altar_buf_append_str(out, line);
  }
  return rc ? altar_error_set(err, ALTAR_ENOMEM, "import marker: out of memory") : ALTAR_OK;
}

void altar__import_marker_clear(altar__import_marker_t *m) {
  free(m->published);
  memset(m, 0, sizeof *m);
}

/* A word of at most max-1 bytes, no spaces, copied into out; *pp moves past it. */
static bool word(const char **pp, const char *end, char *out, size_t max) {
  const char *p = *pp, *s = p;
  while (p < end && *p != ' ' && *p != '\n') p++;
  if (p == s || (size_t)(p - s) >= max) return false;
  for (const char *q = s; q < p; q++)
    if ((unsigned char)*q < 0x21 || (unsigned char)*q > 0x7e) return false;
  memcpy(out, s, (size_t)(p - s));
  out[p - s] = 0;
  *pp = p;
  return true;
}

static bool number(const char **pp, const char *end, int64_t *pv) {
  char buf[24], *e = NULL;
  if (!word(pp, end, buf, sizeof buf)) return false;
  long long v = strtoll(buf, &e, 10);
  if (*e) return false;
  *pv = v;
  return true;
}

static bool sep(const char **pp, const char *end, char c) {
  if (*pp >= end || **pp != c) return false;
  (*pp)++;
  return true;
}

int altar__import_marker_decode(const void *v, size_t n, int32_t part, altar__import_marker_t *m, altar_error_t *err) {
  memset(m, 0, sizeof *m);
  m->part = part;
  m->until = -1;
  if (n > ALTAR__IMPORT_MARKER_MAX_BYTES)
    return altar_error_set(err, ALTAR_ELEDGER, "import marker of partition %d: %zu bytes (at most %u)", (int)part, n,
                           ALTAR__IMPORT_MARKER_MAX_BYTES);
  const char *p = v, *end = p + n;
  const char *field = "version";
  char tag[8];
  if (!word(&p, end, tag, sizeof tag) || strcmp(tag, "v1") || !sep(&p, end, '\n')) goto bad;
  field = "cp";
  if (!word(&p, end, tag, sizeof tag) || strcmp(tag, "cp") || !sep(&p, end, ' ') ||
      !word(&p, end, m->cp_id, sizeof m->cp_id) || !sep(&p, end, '\n'))
    goto bad;
  field = "until";
  if (!word(&p, end, tag, sizeof tag) || strcmp(tag, "until") || !sep(&p, end, ' ') || !number(&p, end, &m->until) ||
      m->until < 0 || !sep(&p, end, '\n'))
    goto bad;
  field = "end";
  while (p < end) {
    if (m->n_published == ALTAR__IMPORT_MARKER_MAX_ENDS) {
      altar__import_marker_clear(m);
      return altar_error_set(err, ALTAR_ELEDGER, "import marker of partition %d: more than %u ends", (int)part,
                             ALTAR__IMPORT_MARKER_MAX_ENDS);
    }
    altar_cp_pub_end_t e = {0};
    int64_t pp = -1;
    if (!word(&p, end, tag, sizeof tag) || strcmp(tag, "end") || !sep(&p, end, ' ') || !number(&p, end, &pp) ||
        pp < 0 || pp > INT32_MAX || !sep(&p, end, ' ') || !number(&p, end, &e.next) || e.next < 0 ||
        !sep(&p, end, ' ') || !word(&p, end, e.topic, sizeof e.topic) || !sep(&p, end, '\n'))
      goto bad;
    e.partition = (int32_t)pp;
    altar_cp_pub_end_t *nv = realloc(m->published, (m->n_published + 1) * sizeof *nv);
    if (!nv) {
      altar__import_marker_clear(m);
      return altar_error_set(err, ALTAR_ENOMEM, "import marker: out of memory");
    }
    m->published = nv;
    m->published[m->n_published++] = e;
  }
  return ALTAR_OK;
bad:
  altar__import_marker_clear(m);
  return altar_error_set(err, ALTAR_ELEDGER,
                         "import marker of partition %d: field %s is missing or malformed at byte %zu", (int)part,
                         field, (size_t)(p - (const char *)v));
}

typedef struct load_ctx {
  altar_ledger_t *l;
  altar__import_marker_t *v;
  size_t n, cap;
  altar_error_t *err;
} load_ctx_t;

static int visit_marker(void *vctx, const void *key, size_t klen, const void *val, size_t vlen) {
  load_ctx_t *c = vctx;
  (void)key;
  (void)klen;
  int32_t part = altar_ledger_visit_partition(c->l);
  if (part < 0) return ALTAR_OK; /* only a partition's state has one */
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 4;
    altar__import_marker_t *nv = realloc(c->v, cap * sizeof *nv);
    if (!nv) return altar_error_set(c->err, ALTAR_ENOMEM, "import markers: out of memory");
    c->v = nv;
    c->cap = cap;
  }
  int rc = altar__import_marker_decode(val, vlen, part, &c->v[c->n], c->err);
  if (!rc) c->n++;
  return rc;
}

int altar__import_markers_load(altar_ledger_t *l, altar__import_marker_t **pv, size_t *pn, altar_error_t *err) {
  *pv = NULL;
  *pn = 0;
  if (!(altar_ledger_caps(l) & ALTAR_LEDGER_CAP_PARTITIONS)) return ALTAR_OK; /* no import ever wrote one */
  load_ctx_t c = {.l = l, .err = err};
  int32_t was = altar_ledger_scope(l, ALTAR_LEDGER_SCOPE_NONE); /* every partition's */
  int rc = altar_ledger_aux_scan(l, ALTAR__IMPORT_MARKER_KEY, strlen(ALTAR__IMPORT_MARKER_KEY), visit_marker, &c, err);
  altar_ledger_scope(l, was);
  if (rc) {
    for (size_t i = 0; i < c.n; i++) altar__import_marker_clear(&c.v[i]);
    free(c.v);
    return rc;
  }
  *pv = c.v;
  *pn = c.n;
  return ALTAR_OK;
}

int altar__import_marker_drop(altar_ledger_t *l, int32_t part, altar_error_t *err) {
  int32_t was = altar_ledger_scope(l, part);
  int rc = altar_ledger_aux_del(l, ALTAR__IMPORT_MARKER_KEY, strlen(ALTAR__IMPORT_MARKER_KEY), err);
  altar_ledger_scope(l, was);
  return rc;
}
