/* Readiness predicates: when a group of succeeded shards has fanned in. */
#include "altar/groups.h"
#include "altar/spec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a rule may ask for, and a count label may say: a group's event has
 * no width limit of its own (a wide one goes out in pages), so the bound is
 * the default most a group may hold (groups.KIND.max_width); it keeps a
 * hostile count label from making a group wait on billions of folds. */
#define MAX_COUNT ((int64_t)ALTAR_GROUP_MAX_WIDTH_DEFAULT)
#define MAX_FOLDS MAX_COUNT

int altar_predicate_single(altar_predicate_t *p) {
  memset(p, 0, sizeof *p);
  p->rule = ALTAR_READY_SINGLE;
  p->n = 1;
  return ALTAR_OK;
}

int altar_predicate_count_at_least(altar_predicate_t *p, int64_t n, altar_error_t *err) {
  memset(p, 0, sizeof *p);
  if (n < 1 || n > MAX_FOLDS)
    return altar_error_set(err, ALTAR_EINVAL, "count_at_least: n must be in 1..%" PRId64 ", got %" PRId64, MAX_FOLDS,
                           n);
  p->rule = ALTAR_READY_COUNT_AT_LEAST;
  p->n = n;
  return ALTAR_OK;
}

int altar_predicate_all_folds(altar_predicate_t *p, int64_t n, altar_error_t *err) {
  memset(p, 0, sizeof *p);
  if (n < 1 || n > MAX_FOLDS)
    return altar_error_set(err, ALTAR_EINVAL, "all_folds: n must be in 1..%" PRId64 ", got %" PRId64, MAX_FOLDS, n);
  p->rule = ALTAR_READY_ALL_FOLDS;
  p->n = n;
  if (!(p->label = strdup("fold"))) return altar_error_set(err, ALTAR_ENOMEM, "all_folds: out of memory");
  return ALTAR_OK;
}

int altar_predicate_all_label_values(altar_predicate_t *p, const char *label, const char *const *values, size_t n,
                                     altar_error_t *err) {
  memset(p, 0, sizeof *p);
  if (!label || !*label) return altar_error_set(err, ALTAR_EINVAL, "all_label_values: label must not be empty");
  if (n == 0) return altar_error_set(err, ALTAR_EINVAL, "all_label_values: values must not be empty");
  p->rule = ALTAR_READY_ALL_LABEL_VALUES;
  if (!(p->label = strdup(label)) || !(p->values = calloc(n, sizeof *p->values))) goto oom;
  for (size_t i = 0; i < n; i++) {
    if (!values[i]) {
      altar_predicate_clear(p);
      return altar_error_set(err, ALTAR_EINVAL, "all_label_values: values[%zu] is null", i);
    }
    if (!(p->values[i] = strdup(values[i]))) goto oom;
    p->n_values = i + 1;
  }
  return ALTAR_OK;
oom:
  altar_predicate_clear(p);
  return altar_error_set(err, ALTAR_ENOMEM, "all_label_values: out of memory");
}

int altar_predicate_all_expected_folds(altar_predicate_t *p, const char *label, const char *count_label,
                                       const int64_t *default_count, altar_error_t *err) {
  memset(p, 0, sizeof *p);
  if (!label || !*label) return altar_error_set(err, ALTAR_EINVAL, "all_expected_folds: label must not be empty");
  if (!count_label || !*count_label)
    return altar_error_set(err, ALTAR_EINVAL, "all_expected_folds: count_label must not be empty");
  if (default_count && (*default_count < 1 || *default_count > MAX_FOLDS))
    return altar_error_set(err, ALTAR_EINVAL, "all_expected_folds: default must be in 1..%" PRId64 ", got %" PRId64,
                           MAX_FOLDS, *default_count);
  p->rule = ALTAR_READY_ALL_EXPECTED_FOLDS;
  if (default_count) p->default_count = (altar_opt_i64_t){true, *default_count};
  if (!(p->label = strdup(label)) || !(p->count_label = strdup(count_label))) {
    altar_predicate_clear(p);
    return altar_error_set(err, ALTAR_ENOMEM, "all_expected_folds: out of memory");
  }
  return ALTAR_OK;
}

int altar_predicate_custom(altar_predicate_t *p, altar_ready_fn fn, void *ctx) {
  memset(p, 0, sizeof *p);
  if (!fn) return ALTAR_EINVAL;
  p->rule = ALTAR_READY_CUSTOM;
  p->fn = fn;
  p->fn_ctx = ctx;
  return ALTAR_OK;
}

void altar_predicate_clear(altar_predicate_t *p) {
  if (!p) return;
  free(p->label);
  free(p->count_label);
  for (size_t i = 0; i < p->n_values; i++) free(p->values[i]);
  free(p->values);
  memset(p, 0, sizeof *p);
}

int altar_predicate_copy(altar_predicate_t *dst, const altar_predicate_t *src) {
  *dst = *src;
  dst->label = dst->count_label = NULL;
  dst->values = NULL;
  dst->n_values = 0;
  if ((src->label && !(dst->label = strdup(src->label))) ||
      (src->count_label && !(dst->count_label = strdup(src->count_label))))
    goto oom;
  if (src->n_values) {
    if (!(dst->values = calloc(src->n_values, sizeof *dst->values))) goto oom;
    for (size_t i = 0; i < src->n_values; i++) {
      if (!(dst->values[i] = strdup(src->values[i]))) goto oom;
      dst->n_values = i + 1;
    }
  }
  return ALTAR_OK;
oom:
  altar_predicate_clear(dst);
  return ALTAR_ENOMEM;
}

/* Whether some shard carries label = value. */
static bool has_value(const altar_handle_t *const *shards, size_t n, const char *label, const char *value) {
  for (size_t i = 0; i < n; i++) {
    const char *v = altar_strmap_get(&shards[i]->labels, label);
    if (v && !strcmp(v, value)) return true;
  }
  return false;
}

/* The fold a label value names when it is one of "0".."folds-1" written as
 * a plain decimal (no sign, no leading zero), the form the folds are named in. */
static bool fold_index(const char *v, int64_t folds, int64_t *pf) {
  if (!v || !*v || (v[0] == '0' && v[1])) return false;
  int64_t f = 0;
  for (const char *c = v; *c; c++) {
    if (*c < '0' || *c > '9') return false;
    f = f * 10 + (*c - '0');
    if (f >= folds) return false; /* also keeps f from overflowing */
  }
  *pf = f;
  return true;
}

/* Folds "0".."folds-1" all present among the shards' `label` values: one
 * pass over the shards marking what each names. */
static bool folds_present(const altar_handle_t *const *shards, size_t n, const char *label, int64_t folds) {
  if (folds < 1 || folds > MAX_COUNT || (size_t)folds > n) return false; /* each shard covers at most one fold */
  unsigned char stack[512],
      *seen = (size_t)(folds + 7) / 8 <= sizeof stack ? stack : calloc((size_t)(folds + 7) / 8, 1);
  if (!seen) return false; /* out of memory: not ready yet, decided again at its next event */
  if (seen == stack) memset(seen, 0, (size_t)(folds + 7) / 8);
  int64_t missing = folds;
  for (size_t i = 0; i < n && missing; i++) {
    int64_t f;
    if (!fold_index(altar_strmap_get(&shards[i]->labels, label), folds, &f)) continue;
    unsigned char bit = (unsigned char)(1u << (f & 7));
    if (seen[f >> 3] & bit) continue;
    seen[f >> 3] |= bit;
    missing--;
  }
  if (seen != stack) free(seen);
  return missing == 0;
}

/* A count label is valid when it is a plain decimal integer in 1..MAX_COUNT. */
static bool parse_count(const char *s, int64_t *pv) {
  if (!s || !*s || *s == '-' || *s == '+' || *s == ' ') return false;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end || v < 1 || v > MAX_COUNT) return false;
  *pv = v;
  return true;
}

int altar_predicate_check_labels(const altar_predicate_t *p, const altar_strmap_t *labels, altar_error_t *err) {
  int64_t c;
  switch (p->rule) {
  case ALTAR_READY_ALL_FOLDS: {
    const char *l = p->label ? p->label : "fold";
    if (!altar_strmap_get(labels, l))
      return altar_error_set(err, ALTAR_EINVAL,
                             "labels.%s: missing; all_folds(%" PRId64 ") reads each shard's fold from it", l, p->n);
    return ALTAR_OK;
  }
  case ALTAR_READY_ALL_LABEL_VALUES:
    if (!altar_strmap_get(labels, p->label))
      return altar_error_set(err, ALTAR_EINVAL, "labels.%s: missing; all_label_values reads it from each shard",
                             p->label);
    return ALTAR_OK;
  case ALTAR_READY_ALL_EXPECTED_FOLDS:
    if (!altar_strmap_get(labels, p->label))
      return altar_error_set(err, ALTAR_EINVAL,
                             "labels.%s: missing; all_expected_folds reads each shard's fold from it", p->label);
    if (p->default_count.set && !altar_strmap_get(labels, p->count_label)) return ALTAR_OK;
    if (!parse_count(altar_strmap_get(labels, p->count_label), &c))
      return altar_error_set(err, ALTAR_EINVAL,
                             "labels.%s: %s; all_expected_folds reads the fold count from it (a whole number in "
                             "1..%" PRId64 ")%s",
                             p->count_label, altar_strmap_get(labels, p->count_label) ? "not a fold count" : "missing",
                             (int64_t)MAX_COUNT, p->default_count.set ? "" : " and the kind sets no default");
    return ALTAR_OK;
  default: return ALTAR_OK;
  }
}

size_t altar_predicate_min_succeeded(const altar_predicate_t *p, const altar_handle_t *member) {
  switch (p->rule) {
  case ALTAR_READY_COUNT_AT_LEAST:
  case ALTAR_READY_ALL_FOLDS: return p->n > 1 ? (size_t)p->n : 1;
  case ALTAR_READY_ALL_EXPECTED_FOLDS: {
    /* The widest count wins, so the group needs at least this member's. */
    int64_t c;
    if (member && parse_count(altar_strmap_get(&member->labels, p->count_label), &c)) return (size_t)c;
    return 1;
  }
  default: /* single, label values, custom: no cheaper bound than one */ return 1;
  }
}

int altar_predicate_eval(const altar_predicate_t *p, const altar_handle_t *const *shards, size_t n, bool *pready,
                         altar_error_t *err) {
  *pready = false;
  switch (p->rule) {
  case ALTAR_READY_SINGLE: *pready = n >= 1; return ALTAR_OK;
  case ALTAR_READY_COUNT_AT_LEAST: *pready = (int64_t)n >= p->n; return ALTAR_OK;
  case ALTAR_READY_ALL_FOLDS: *pready = folds_present(shards, n, p->label ? p->label : "fold", p->n); return ALTAR_OK;
  case ALTAR_READY_ALL_LABEL_VALUES:
    for (size_t i = 0; i < p->n_values; i++)
      if (!has_value(shards, n, p->label, p->values[i])) return ALTAR_OK;
    *pready = true;
    return ALTAR_OK;
  case ALTAR_READY_ALL_EXPECTED_FOLDS: {
    /* The widest count any shard reports wins, so a partly labelled group
     * still waits for its full width. */
    int64_t want = 0;
    for (size_t i = 0; i < n; i++) {
      int64_t c;
      if (parse_count(altar_strmap_get(&shards[i]->labels, p->count_label), &c) && c > want) want = c;
    }
    if (!want && p->default_count.set) want = p->default_count.v;
    if (!want)
      return altar_error_set(err, ALTAR_EPREDICATE,
                             "all_expected_folds: no shard carries a valid '%s' label and no default "
                             "is configured",
                             p->count_label);
    *pready = folds_present(shards, n, p->label, want);
    return ALTAR_OK;
  }
  case ALTAR_READY_CUSTOM: {
    int rc = p->fn(p->fn_ctx, shards, n, pready, err);
    if (rc) {
      *pready = false;
      if (err && !err->code) altar_error_set(err, rc, "custom predicate failed");
    }
    return rc;
  }
  }
  return altar_error_set(err, ALTAR_EPREDICATE, "unknown readiness rule %d", (int)p->rule);
}
