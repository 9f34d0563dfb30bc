/* The metrics registry and its text exposition rendering. */
#include "altar/metrics.h"
#include "altar/fleet.h"
#include "altar/grow.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct altar_metric {
  altar_metric_type_t type;
  char *labels_text; /* "{a=\"x\",b=\"y\"}" escaped and sorted by name, or "" */
  /* A counter's count, or the bits of a gauge's double: one word either way,
   * so every update is a single atomic operation. */
  _Atomic uint64_t v;
  /* A histogram's: v is its count; buckets[i] counts observations in
   * (bounds[i-1], bounds[i]], buckets[n_bounds] those above the last
   * bound; sum holds the bits of the observations' sum. */
  size_t n_bounds;
  const double *bounds; /* the family's */
  _Atomic uint64_t *buckets;
  _Atomic uint64_t sum;
};

typedef struct family {
  char *name;
  char *help;
  altar_metric_type_t type;
  double *bounds; /* a histogram family's bucket bounds, shared by its series */
  size_t n_bounds;
  altar_metric_t **series;
  size_t n, cap;
} family_t;

struct altar_metrics {
  pthread_mutex_t mu; /* guards the families and their series arrays */
  family_t *fams;
  size_t n, cap;
};

altar_metrics_t *altar_metrics_new(void) {
  altar_metrics_t *reg = calloc(1, sizeof *reg);
  if (!reg) return NULL;
  if (pthread_mutex_init(&reg->mu, NULL) != 0) {
    free(reg);
    return NULL;
  }
  return reg;
}

void altar_metrics_free(altar_metrics_t *reg) {
  if (!reg) return;
  for (size_t i = 0; i < reg->n; i++) {
    family_t *f = &reg->fams[i];
    for (size_t j = 0; j < f->n; j++) {
      free(f->series[j]->labels_text);
      free(f->series[j]->buckets);
      free(f->series[j]);
    }
    free(f->series);
    free(f->bounds);
    free(f->name);
    free(f->help);
  }
  free(reg->fams);
  pthread_mutex_destroy(&reg->mu);
  free(reg);
}

/* ---- validation and escaping ---------------------------------------------- */

static bool name_ok(const char *s, bool colon) {
  if (!s || !*s || strlen(s) > ALTAR_METRIC_NAME_MAX) return false;
  for (const char *p = s; *p; p++) {
    char c = *p;
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
    if (!alpha && !(p > s && c >= '0' && c <= '9')) return false;
  }
  return true;
}

/* Appends s with the given characters escaped ('\\' always, '\n' always,
 * '"' when quote). */
static int append_escaped(altar_buf_t *b, const char *s, bool quote) {
  const char *run = s;
  for (const char *p = s;; p++) {
    const char *esc = NULL;
    if (*p == '\\') esc = "\\\\";
    else if (*p == '\n') esc = "\\n";
    else if (quote && *p == '"') esc = "\\\"";
    if (!esc && *p) continue;
    if (altar_buf_append(b, run, (size_t)(p - run))) return ALTAR_ENOMEM;
    if (!*p) return ALTAR_OK;
    if (altar_buf_append_str(b, esc)) return ALTAR_ENOMEM;
    run = p + 1;
  }
}

/* The canonical label text of a series: sorted by label name, escaped. */
static int labels_text(const altar_metric_label_t *labels, size_t n, const char *metric, char **pout,
                       altar_error_t *err) {
  *pout = NULL;
  if (n > ALTAR_METRIC_LABELS_MAX)
    return altar_error_set(err, ALTAR_EINVAL, "metric %s: more than %d labels", metric, ALTAR_METRIC_LABELS_MAX);
  const altar_metric_label_t *sorted[ALTAR_METRIC_LABELS_MAX];
  for (size_t i = 0; i < n; i++) {
    const altar_metric_label_t *l = &labels[i];
    if (!name_ok(l->name, false) || !strncmp(l->name, "__", 2))
      return altar_error_set(err, ALTAR_EINVAL, "metric %s: invalid label name '%.64s'", metric,
                             l->name ? l->name : "(null)");
    if (!l->value || strlen(l->value) > ALTAR_METRIC_LABEL_VALUE_MAX)
      return altar_error_set(err, ALTAR_EINVAL, "metric %s: label %s: value missing or longer than %d bytes", metric,
                             l->name, ALTAR_METRIC_LABEL_VALUE_MAX);
    size_t j = i;
    for (; j > 0 && strcmp(sorted[j - 1]->name, l->name) > 0; j--) sorted[j] = sorted[j - 1];
    sorted[j] = l;
  }
  for (size_t i = 1; i < n; i++)
    if (!strcmp(sorted[i - 1]->name, sorted[i]->name))
      return altar_error_set(err, ALTAR_EINVAL, "metric %s: label %s given twice", metric, sorted[i]->name);
  altar_buf_t b = {0};
  int rc = ALTAR_OK;
  for (size_t i = 0; i < n && !rc; i++) {
    rc = altar_buf_append_str(&b, i ? "," : "{");
    if (!rc) rc = altar_buf_append_str(&b, sorted[i]->name);
    if (!rc) rc = altar_buf_append_str(&b, "=\"");
    if (!rc) rc = append_escaped(&b, sorted[i]->value, true);
    if (!rc) rc = altar_buf_append_str(&b, "\"");
  }
  if (!rc && n) rc = altar_buf_append_str(&b, "}");
  char *s = rc ? NULL : altar_buf_detach(&b);
  altar_buf_free(&b);
  if (!s) return altar_error_set(err, ALTAR_ENOMEM, "metric %s: out of memory", metric);
  *pout = s;
  return ALTAR_OK;
}

/* ---- registration ------------------------------------------------------------ */

static family_t *find_family(altar_metrics_t *reg, const char *name) {
  for (size_t i = 0; i < reg->n; i++)
    if (!strcmp(reg->fams[i].name, name)) return &reg->fams[i];
  return NULL;
}

static family_t *add_family(altar_metrics_t *reg, altar_metric_type_t type, const char *name, const char *help) {
  if (ALTAR_GROW(reg->fams, reg->cap, reg->n + 1)) return NULL;
  family_t f = {.name = strdup(name), .help = strdup(help ? help : ""), .type = type};
  if (!f.name || !f.help) {
    free(f.name);
    free(f.help);
    return NULL;
  }
  reg->fams[reg->n] = f;
  return &reg->fams[reg->n++];
}

static const char *type_name(altar_metric_type_t t) {
  return t == ALTAR_METRIC_COUNTER ? "counter" : t == ALTAR_METRIC_GAUGE ? "gauge" : "histogram";
}

static bool same_bounds(const family_t *f, const double *bounds, size_t n) {
  return f->n_bounds == n && (!n || !memcmp(f->bounds, bounds, n * sizeof *bounds));
}

static altar_metric_t *register_series(altar_metrics_t *reg, altar_metric_type_t type, const char *name,
                                       const char *help, const altar_metric_label_t *labels, size_t n_labels,
                                       const double *bounds, size_t n_bounds, altar_error_t *err) {
  if (!name_ok(name, true)) {
    altar_error_set(err, ALTAR_EINVAL, "metric name '%.64s': must match [a-zA-Z_:][a-zA-Z0-9_:]* (at most %d bytes)",
                    name ? name : "(null)", ALTAR_METRIC_NAME_MAX);
    return NULL;
  }
  if (help && strlen(help) > ALTAR_METRIC_HELP_MAX) {
    altar_error_set(err, ALTAR_EINVAL, "metric %s: help longer than %d bytes", name, ALTAR_METRIC_HELP_MAX);
    return NULL;
  }
  for (size_t i = 0; type == ALTAR_METRIC_HISTOGRAM && i < n_labels; i++) {
    if (labels[i].name && !strcmp(labels[i].name, "le")) {
      altar_error_set(err, ALTAR_EINVAL, "metric %s: label le is the histogram's own", name);
      return NULL;
    }
  }
  char *lt;
  if (labels_text(labels, n_labels, name, &lt, err)) return NULL;
  altar_metric_t *m = NULL;
  pthread_mutex_lock(&reg->mu);
  family_t *f = find_family(reg, name);
  if (f && f->type != type) {
    altar_error_set(err, ALTAR_EEXIST, "metric %s: already registered as a %s", name, type_name(f->type));
    goto out;
  }
  if (f && !same_bounds(f, bounds, n_bounds)) {
    altar_error_set(err, ALTAR_EEXIST, "metric %s: already registered with other bucket bounds", name);
    goto out;
  }
  for (size_t i = 0; f && i < f->n; i++) {
    if (!strcmp(f->series[i]->labels_text, lt)) {
      m = f->series[i];
      goto out;
    }
  }
  if (!f) {
    if (!(f = add_family(reg, type, name, help))) goto oom;
    if (n_bounds) {
      if (!(f->bounds = malloc(n_bounds * sizeof *bounds))) goto oom;
      memcpy(f->bounds, bounds, n_bounds * sizeof *bounds);
      f->n_bounds = n_bounds;
    }
  }
  if (ALTAR_GROW(f->series, f->cap, f->n + 1)) goto oom;
  if (!(m = calloc(1, sizeof *m))) goto oom;
  if (type == ALTAR_METRIC_HISTOGRAM && !(m->buckets = calloc(n_bounds + 1, sizeof *m->buckets))) {
    free(m);
    m = NULL;
    goto oom;
  }
  m->type = type;
  m->labels_text = lt;
  m->n_bounds = f->n_bounds;
  m->bounds = f->bounds;
  lt = NULL;
  atomic_init(&m->v, 0); /* 0 is both the counter 0 and the double +0.0 */
  atomic_init(&m->sum, 0);
  f->series[f->n++] = m;
  goto out;
oom:
  altar_error_set(err, ALTAR_ENOMEM, "metric %s: out of memory", name);
out:
  pthread_mutex_unlock(&reg->mu);
  free(lt);
  return m;
}

altar_metric_t *altar_metrics_register(altar_metrics_t *reg, altar_metric_type_t type, const char *name,
                                       const char *help, const altar_metric_label_t *labels, size_t n_labels,
                                       altar_error_t *err) {
  if (!reg || (type != ALTAR_METRIC_COUNTER && type != ALTAR_METRIC_GAUGE)) {
    altar_error_set(err, ALTAR_EINVAL, "metrics: a registry and a counter or gauge type are required");
    return NULL;
  }
  return register_series(reg, type, name, help, labels, n_labels, NULL, 0, err);
}

altar_metric_t *altar_metrics_histogram(altar_metrics_t *reg, const char *name, const char *help,
                                        const altar_metric_label_t *labels, size_t n_labels, const double *bounds,
                                        size_t n_bounds, altar_error_t *err) {
  if (!reg || !bounds || n_bounds < 1 || n_bounds > ALTAR_METRIC_BUCKETS_MAX) {
    altar_error_set(err, ALTAR_EINVAL, "metric %s: a registry and 1..%d bucket bounds are required",
                    name ? name : "(null)", ALTAR_METRIC_BUCKETS_MAX);
    return NULL;
  }
  for (size_t i = 0; i < n_bounds; i++) {
    if (!isfinite(bounds[i]) || (i && bounds[i] <= bounds[i - 1])) {
      altar_error_set(err, ALTAR_EINVAL, "metric %s: bucket bounds must be finite and strictly increasing",
                      name ? name : "(null)");
      return NULL;
    }
  }
  return register_series(reg, ALTAR_METRIC_HISTOGRAM, name, help, labels, n_labels, bounds, n_bounds, err);
}

altar_metric_t *altar_metrics_counter(altar_metrics_t *reg, const char *name, const char *help, altar_error_t *err) {
  return altar_metrics_register(reg, ALTAR_METRIC_COUNTER, name, help, NULL, 0, err);
}

altar_metric_t *altar_metrics_gauge(altar_metrics_t *reg, const char *name, const char *help, altar_error_t *err) {
  return altar_metrics_register(reg, ALTAR_METRIC_GAUGE, name, help, NULL, 0, err);
}

/* ---- updates ----------------------------------------------------------------- */

static uint64_t dbits(double d) {
  uint64_t u;
  memcpy(&u, &d, sizeof u);
  return u;
}

static double bitsd(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

void altar_metric_inc(altar_metric_t *m) { altar_metric_add(m, 1); }

void altar_metric_add(altar_metric_t *m, uint64_t n) {
  if (m && m->type == ALTAR_METRIC_COUNTER) atomic_fetch_add_explicit(&m->v, n, memory_order_relaxed);
}

void altar_metric_set(altar_metric_t *m, double v) {
  if (m && m->type == ALTAR_METRIC_GAUGE) atomic_store_explicit(&m->v, dbits(v), memory_order_relaxed);
}

static void add_double(_Atomic uint64_t *bits, double d);

void altar_metric_gauge_add(altar_metric_t *m, double d) {
  if (m && m->type == ALTAR_METRIC_GAUGE) add_double(&m->v, d);
}

static void add_double(_Atomic uint64_t *bits, double d) {
  uint64_t old = atomic_load_explicit(bits, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(bits, &old, dbits(bitsd(old) + d), memory_order_relaxed,
                                                memory_order_relaxed)) {}
}

void altar_metric_observe(altar_metric_t *m, double v) {
  if (!m || m->type != ALTAR_METRIC_HISTOGRAM || isnan(v)) return;
  size_t i = 0;
  while (i < m->n_bounds && v > m->bounds[i]) i++;
  atomic_fetch_add_explicit(&m->buckets[i], 1, memory_order_relaxed);
  add_double(&m->sum, v);
  atomic_fetch_add_explicit(&m->v, 1, memory_order_relaxed);
}

uint64_t altar_metric_counter_value(const altar_metric_t *m) {
  if (!m || m->type == ALTAR_METRIC_GAUGE) return 0;
  return atomic_load_explicit(&m->v, memory_order_relaxed);
}

double altar_metric_gauge_value(const altar_metric_t *m) {
  if (!m || m->type != ALTAR_METRIC_GAUGE) return 0;
  return bitsd(atomic_load_explicit(&m->v, memory_order_relaxed));
}

/* ---- rendering --------------------------------------------------------------- */

/* Prometheus spells the special values NaN, +Inf and -Inf; whole numbers
 * print without an exponent so they read like counts. */
static void format_double(double d, char *out, size_t outsz) {
  if (isnan(d)) snprintf(out, outsz, "NaN");
  else if (isinf(d)) snprintf(out, outsz, "%s", d > 0 ? "+Inf" : "-Inf");
  else if (d == floor(d) && fabs(d) < 9007199254740992.0) snprintf(out, outsz, "%.0f", d);
  else snprintf(out, outsz, "%.17g", d);
}

/* One line "<name><suffix><labels> <value>", le (when given) added to the labels. */
static int render_line(altar_buf_t *out, const char *name, const char *suffix, const char *labels, const char *le,
                       const char *val) {
  int rc = altar_buf_append_str(out, name);
  if (!rc) rc = altar_buf_append_str(out, suffix);
  if (!rc && le) {
    size_t n = strlen(labels);
    rc = n ? altar_buf_append(out, labels, n - 1) || altar_buf_append_str(out, ",") : altar_buf_append_str(out, "{");
    if (!rc) rc = altar_buf_append_str(out, "le=\"");
    if (!rc) rc = altar_buf_append_str(out, le);
    if (!rc) rc = altar_buf_append_str(out, "\"}");
  } else if (!rc) {
    rc = altar_buf_append_str(out, labels);
  }
  if (!rc) rc = altar_buf_append_str(out, " ");
  if (!rc) rc = altar_buf_append_str(out, val);
  if (!rc) rc = altar_buf_append_str(out, "\n");
  return rc ? ALTAR_ENOMEM : ALTAR_OK;
}

/* Cumulative buckets, then _sum and _count. Read while observations go on,
 * a bucket may be a little ahead of _count; scrapers accept that. */
static int render_histogram(altar_buf_t *out, const char *name, const altar_metric_t *m) {
  uint64_t cum = 0;
  int rc = ALTAR_OK;
  char le[64], val[64];
  for (size_t i = 0; i <= m->n_bounds && !rc; i++) {
    cum += atomic_load_explicit(&m->buckets[i], memory_order_relaxed);
    if (i < m->n_bounds) snprintf(le, sizeof le, "%g", m->bounds[i]);
    else snprintf(le, sizeof le, "+Inf");
    snprintf(val, sizeof val, "%" PRIu64, cum);
    rc = render_line(out, name, "_bucket", m->labels_text, le, val);
  }
  format_double(bitsd(atomic_load_explicit(&m->sum, memory_order_relaxed)), val, sizeof val);
  if (!rc) rc = render_line(out, name, "_sum", m->labels_text, NULL, val);
  snprintf(val, sizeof val, "%" PRIu64, cum);
  if (!rc) rc = render_line(out, name, "_count", m->labels_text, NULL, val);
  return rc;
}

int altar_metrics_render(altar_metrics_t *reg, altar_buf_t *out, altar_error_t *err) {
  if (!reg || !out) return altar_error_set(err, ALTAR_EINVAL, "metrics: a registry and a buffer are required");
  int rc = ALTAR_OK;
  pthread_mutex_lock(&reg->mu);
  for (size_t i = 0; i < reg->n && !rc; i++) {
    const family_t *f = &reg->fams[i];
    if (*f->help) {
      rc = altar_buf_append_str(out, "# HELP ");
      if (!rc) rc = altar_buf_append_str(out, f->name);
      if (!rc) rc = altar_buf_append_str(out, " ");
      if (!rc) rc = append_escaped(out, f->help, false);
      if (!rc) rc = altar_buf_append_str(out, "\n");
    }
    if (!rc) rc = altar_buf_append_str(out, "# TYPE ");
    if (!rc) rc = altar_buf_append_str(out, f->name);
    if (!rc) rc = altar_buf_append_str(out, " ");
    if (!rc) rc = altar_buf_append_str(out, type_name(f->type));
    if (!rc) rc = altar_buf_append_str(out, "\n");
    for (size_t j = 0; j < f->n && !rc; j++) {
      const altar_metric_t *m = f->series[j];
      if (m->type == ALTAR_METRIC_HISTOGRAM) {
        rc = render_histogram(out, f->name, m);
        continue;
      }
      char val[64];
      if (m->type == ALTAR_METRIC_COUNTER) snprintf(val, sizeof val, "%" PRIu64, altar_metric_counter_value(m));
      else format_double(altar_metric_gauge_value(m), val, sizeof val);
      rc = altar_buf_append_str(out, f->name);
      if (!rc) rc = altar_buf_append_str(out, m->labels_text);
      if (!rc) rc = altar_buf_append_str(out, " ");
      if (!rc) rc = altar_buf_append_str(out, val);
      if (!rc) rc = altar_buf_append_str(out, "\n");
    }
  }
  pthread_mutex_unlock(&reg->mu);
  if (rc) return altar_error_set(err, ALTAR_ENOMEM, "metrics: out of memory rendering");
  return ALTAR_OK;
}

int altar_metrics_register_table(altar_metrics_t *reg, const altar_metric_def_t *defs, size_t n, void *base,
                                 altar_error_t *err) {
  for (size_t i = 0; i < n; i++) {
    altar_metric_t *m = altar_metrics_register(reg, defs[i].type, defs[i].name, defs[i].help, NULL, 0, err);
    if (!m) {
      altar_metric_t *none = NULL;
      for (size_t j = 0; j < n; j++) memcpy((char *)base + defs[j].off, &none, sizeof none);
      return err && err->code ? err->code : ALTAR_EINVAL;
    }
    memcpy((char *)base + defs[i].off, &m, sizeof m);
  }
  return ALTAR_OK;
}

void altar_metric_add_since(altar_metric_t *m, uint64_t now, uint64_t *plast) {
  if (now > *plast) altar_metric_add(m, now - *plast);
  *plast = now;
}

int altar_metrics_build_info(altar_metrics_t *reg, const char *component, altar_error_t *err) {
  altar_metric_label_t l[] = {{"component", component}, {"version", ALTAR_VERSION}};
  altar_metric_t *m = altar_metrics_register(reg, ALTAR_METRIC_GAUGE, "altar_build_info",
                                             "Always 1: the program and release this scrape came from.", l, 2, err);
  if (!m) return err && err->code ? err->code : ALTAR_EINVAL;
  altar_metric_set(m, 1);
  return ALTAR_OK;
}
