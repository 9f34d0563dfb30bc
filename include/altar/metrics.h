/* altar — a small registry of Prometheus counters, gauges and histograms, rendered in the
 * text exposition format (0.0.4) and served over HTTP on GET /metrics.
 *
 * Registration takes the registry's lock; updating a metric is one atomic
 * operation and may happen on any thread, concurrently with rendering. */
#ifndef ALTAR_METRICS_H
#define ALTAR_METRICS_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/buf.h"
#include "altar/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct altar_metrics altar_metrics_t;               /* the registry */
typedef struct altar_metric altar_metric_t;                 /* one series */
typedef struct altar_metrics_server altar_metrics_server_t; /* an HTTP endpoint */

typedef enum altar_metric_type {
  ALTAR_METRIC_COUNTER,
  ALTAR_METRIC_GAUGE,
  ALTAR_METRIC_HISTOGRAM, /* registered with altar_metrics_histogram only */
} altar_metric_type_t;

/* A fixed label of a series, e.g. {"transport", "local"}. */
typedef struct altar_metric_label {
  const char *name;
  const char *value;
} altar_metric_label_t;

/* Bounds on what a registration accepts (names and values come from code and
 * config, so they are bounded like any other input). */
#define ALTAR_METRIC_NAME_MAX 128
#define ALTAR_METRIC_HELP_MAX 1024
#define ALTAR_METRIC_LABELS_MAX 8
#define ALTAR_METRIC_LABEL_VALUE_MAX 256
#define ALTAR_METRIC_BUCKETS_MAX 32

/* A new empty registry; NULL when out of memory. Free with altar_metrics_free
 * (after stopping every server that serves it). */
altar_metrics_t *altar_metrics_new(void);
/* Frees the registry and every metric it returned. NULL is fine. */
void altar_metrics_free(altar_metrics_t *reg);

/* Registers a series: name must match [a-zA-Z_:][a-zA-Z0-9_:]*, label names
 * [a-zA-Z_][a-zA-Z0-9_]* (not starting with "__", no duplicates). Series of
 * one name share its type and help (the first registration's help is kept).
 * Registering the same name and labels again returns the existing series;
 * the same name with another type is ALTAR_EEXIST. Strings are copied. The
 * series is owned by the registry and lives until altar_metrics_free.
 * Returns NULL on error (err names the metric). */
altar_metric_t *altar_metrics_register(altar_metrics_t *reg, altar_metric_type_t type, const char *name,
                                       const char *help, const altar_metric_label_t *labels, size_t n_labels,
                                       altar_error_t *err);
/* Shorthands for register without labels. */
altar_metric_t *altar_metrics_counter(altar_metrics_t *reg, const char *name, const char *help, altar_error_t *err);
altar_metric_t *altar_metrics_gauge(altar_metrics_t *reg, const char *name, const char *help, altar_error_t *err);

/* Registers a histogram series: n_bounds upper bucket bounds, strictly
 * increasing and finite (+Inf is implied), 1..ALTAR_METRIC_BUCKETS_MAX;
 * labels as for altar_metrics_register ("le" is the histogram's own).
 * Series of one name must share their bounds. NULL on error. */
altar_metric_t *altar_metrics_histogram(altar_metrics_t *reg, const char *name, const char *help,
                                        const altar_metric_label_t *labels, size_t n_labels, const double *bounds,
                                        size_t n_bounds, altar_error_t *err);

/* Registers altar_build_info{component, version} = 1: which program and
 * release a scrape came from. */
int altar_metrics_build_info(altar_metrics_t *reg, const char *component, altar_error_t *err);

/* A table of label-less series registered at once, each stored as an
 * altar_metric_t * at byte offset `off` of the caller's struct `base`. On
 * error every pointer of the table is left NULL and err names the metric. */
typedef struct altar_metric_def {
  size_t off;
  altar_metric_type_t type;
  const char *name, *help;
} altar_metric_def_t;
int altar_metrics_register_table(altar_metrics_t *reg, const altar_metric_def_t *defs, size_t n, void *base,
                                 altar_error_t *err);

/* Mirrors a cumulative count kept elsewhere (a daemon's stats) into counter
 * m: adds what `now` grew since *plast, then remembers it. */
void altar_metric_add_since(altar_metric_t *m, uint64_t now, uint64_t *plast);

/* Updates; any thread. A NULL metric is ignored (so code can keep its metrics
 * optional), as is the wrong kind of update for the metric's type. */
void altar_metric_inc(altar_metric_t *m);                 /* counter += 1 */
void altar_metric_add(altar_metric_t *m, uint64_t n);     /* counter += n */
void altar_metric_set(altar_metric_t *m, double v);       /* gauge = v */
void altar_metric_gauge_add(altar_metric_t *m, double d); /* gauge += d */
void altar_metric_observe(altar_metric_t *m, double v);   /* histogram: one observation (NaN ignored) */
/* Current values (0 for NULL or the other type); a histogram's count. */
uint64_t altar_metric_counter_value(const altar_metric_t *m);
double altar_metric_gauge_value(const altar_metric_t *m);

/* Appends the registry in the text exposition format to out: per name a
 * "# HELP" and a "# TYPE" line, then one line per series, in registration
 * order. Help escapes '\' and newline; label values escape '\', '"' and
 * newline. 0 or ALTAR_ENOMEM. Any thread. */
int altar_metrics_render(altar_metrics_t *reg, altar_buf_t *out, altar_error_t *err);

/* Content-Type of what altar_metrics_render produces. */
#define ALTAR_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Starts an HTTP server thread (libmicrohttpd) bound to addr ("host:port",
 * host an IPv4 or bracketed IPv6 literal or a name; port 0 picks a free one)
 * that answers GET /metrics with the rendered registry and 404 elsewhere.
 * reg is borrowed and must outlive the server. Returns NULL on error: a
 * malformed addr is ALTAR_ECONFIG naming metrics.addr, a failed bind
 * ALTAR_EIO. Stop (and free) with altar_metrics_stop. */
altar_metrics_server_t *altar_metrics_serve(altar_metrics_t *reg, const char *addr, altar_error_t *err);
/* Everything the server does not answer itself (any path but /metrics) may
 * go to a handler: it reads the request through altar_http_request_get and
 * fills reply (body appended to reply->body, freed by the server). Runs on
 * the server's thread, one request at a time. Only GET and HEAD reach it. */
typedef struct altar_http_request altar_http_request_t;
typedef struct altar_http_reply {
  unsigned status;          /* 200 unless set */
  const char *content_type; /* a static string; text/plain unless set */
  altar_buf_t body;
} altar_http_reply_t;
typedef void (*altar_http_handler_fn)(void *ctx, const char *path, const altar_http_request_t *rq,
                                      altar_http_reply_t *reply);
/* A query argument (header false) or a request header (header true) of rq,
 * or NULL. Valid during the handler's call. */
const char *altar_http_request_get(const altar_http_request_t *rq, bool header, const char *name);
/* As altar_metrics_serve, with handler answering every other path (NULL:
 * 404 there). ctx is borrowed and must outlive the server. */
altar_metrics_server_t *altar_metrics_serve_with(altar_metrics_t *reg, const char *addr, altar_http_handler_fn handler,
                                                 void *ctx, altar_error_t *err);

/* The port the server listens on (useful after port 0). */
int altar_metrics_server_port(const altar_metrics_server_t *srv);
/* Stops the server thread, closes its socket and frees it. NULL is fine. */
void altar_metrics_stop(altar_metrics_server_t *srv);

ALTAR_API_END

#endif
