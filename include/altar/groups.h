/* altar — how shards of one kind group and when a group is complete:
 * GroupSpec, group_by and the readiness predicates, and their YAML form. */
#ifndef ALTAR_GROUPS_H
#define ALTAR_GROUPS_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/error.h"
#include "altar/task.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- predicates ---- */

typedef enum altar_ready_rule {
  ALTAR_READY_SINGLE = 0,         /* one shard succeeded (same as count_at_least(1)) */
  ALTAR_READY_COUNT_AT_LEAST,     /* at least n shards */
  ALTAR_READY_ALL_FOLDS,          /* label values "0".."n-1" all present */
  ALTAR_READY_ALL_LABEL_VALUES,   /* label values cover `values` */
  ALTAR_READY_ALL_EXPECTED_FOLDS, /* folds 0..N-1, N read from count_label */
  ALTAR_READY_CUSTOM,             /* a caller's function */
} altar_ready_rule_t;

/* Custom readiness: set *pready; return 0 or a negative code (which
 * propagates out of reconcile_once before anything fires). */
typedef int (*altar_ready_fn)(void *ctx, const altar_handle_t *const *shards, size_t n, bool *pready,
                              altar_error_t *err);

typedef struct altar_predicate {
  altar_ready_rule_t rule;
  int64_t n;     /* count_at_least, all_folds */
  char *label;   /* all_folds ("fold" when NULL), all_label_values, all_expected_folds */
  char **values; /* all_label_values */
  size_t n_values;
  char *count_label;             /* all_expected_folds */
  altar_opt_i64_t default_count; /* all_expected_folds: used when no shard has a valid count */
  altar_ready_fn fn;             /* custom */
  void *fn_ctx;
} altar_predicate_t;

/* Constructors fill *p (which the caller clears with altar_predicate_clear).
 * They copy their strings. 0, ALTAR_EINVAL (naming the bad argument) or ALTAR_ENOMEM. */
int altar_predicate_single(altar_predicate_t *p);
int altar_predicate_count_at_least(altar_predicate_t *p, int64_t n, altar_error_t *err);
int altar_predicate_all_folds(altar_predicate_t *p, int64_t n, altar_error_t *err);
int altar_predicate_all_label_values(altar_predicate_t *p, const char *label, const char *const *values, size_t n,
                                     altar_error_t *err);
/* default_count NULL = no default: an unlabelled group is an error, never pending. */
int altar_predicate_all_expected_folds(altar_predicate_t *p, const char *label, const char *count_label,
                                       const int64_t *default_count, altar_error_t *err);
int altar_predicate_custom(altar_predicate_t *p, altar_ready_fn fn, void *ctx);
void altar_predicate_clear(altar_predicate_t *p);
int altar_predicate_copy(altar_predicate_t *dst, const altar_predicate_t *src);

/* Checks that a shard with labels gives p what it reads: the fold label of
 * all_folds and all_expected_folds, the latter's count label (a count in
 * 1..max) unless a default is set, all_label_values' label. 0, or
 * ALTAR_EINVAL with err naming the label ("labels.<name>: ...") and the
 * rule; single, count_at_least and custom rules need no label. */
int altar_predicate_check_labels(const altar_predicate_t *p, const altar_strmap_t *labels, altar_error_t *err);

/* Evaluates p over a group's succeeded shards. 0 with *pready set, or
 * ALTAR_EPREDICATE naming the rule and the group's problem (e.g. no shard
 * carries the count label and there is no default). */
int altar_predicate_eval(const altar_predicate_t *p, const altar_handle_t *const *shards, size_t n, bool *pready,
                         altar_error_t *err);
/* A lower bound on the succeeded shards p needs, given one succeeded member
 * (NULL if none is known): fewer can never make the group ready. At least 1. */
size_t altar_predicate_min_succeeded(const altar_predicate_t *p, const altar_handle_t *member);

/* ---- group keys ---- */

/* group_by(l1, l2, …): label values joined by ':'; a missing label gives an
 * empty segment. */
typedef struct altar_group_by {
  char **labels;
  size_t n;
} altar_group_by_t;

int altar_group_by_init(altar_group_by_t *g, const char *const *labels, size_t n);
void altar_group_by_clear(altar_group_by_t *g);
/* The group key of a handle: malloc'd string (caller frees), NULL on ENOMEM. */
char *altar_group_by_key(const altar_group_by_t *g, const altar_handle_t *h);
/* The same into buf, NUL-terminated when it fits (the return value is less
 * than size); returns the key's length either way, as snprintf does. */
size_t altar_group_by_key_into(const altar_group_by_t *g, const altar_handle_t *h, char *buf, size_t size);

/* ---- GroupSpec ---- */

/* Called once per fired group with its succeeded shards. A non-zero return
 * leaves the group unconsumed (it fires again on a later tick) and stops the tick. */
typedef int (*altar_on_ready_fn)(void *ctx, const char *kind, const char *group_key, const altar_handle_t *shards,
                                 size_t n, altar_error_t *err);
/* Called for a group blocked by a failed shard. *pdead_lettered true: the
 * group is consumed (dead-lettered); false: it is deferred, left untouched. */
typedef int (*altar_on_failed_fn)(void *ctx, const char *kind, const char *group_key, const altar_handle_t *failed,
                                  size_t n, bool *pdead_lettered, altar_error_t *err);

/* What the fleet does with a blocked group (from configuration). */
typedef enum altar_failed_policy {
  ALTAR_ON_FAILED_NONE = 0,    /* report it stalled */
  ALTAR_ON_FAILED_DEAD_LETTER, /* consume it and publish a dead_lettered group event */
  ALTAR_ON_FAILED_RETRY,       /* run failed shards again up to max_restarts, then dead-letter */
  ALTAR_ON_FAILED_DEFER,       /* leave it for later */
} altar_failed_policy_t;

const char *altar_failed_policy_name(altar_failed_policy_t p);

/* When a retried shard runs again (on_failed: retry; reconciler/retry_backoff.c).
 * Attempt k (k >= 1) is due delay(k) = min(max_s, initial_s * factor^(k-1))
 * after the failure that asked for it, shortened by up to `jitter` of itself
 * by a fraction derived from the task key and k (so a replay decides alike).
 * initial_s 0: no backoff (republished at once). */
typedef struct altar_retry_backoff {
  double initial_s;
  double factor;
  double max_s;
  double jitter; /* 0..1 */
} altar_retry_backoff_t;

typedef struct altar_group_spec {
  char *kind;
  altar_group_by_t group_by;
  altar_predicate_t ready_when;
  /* reconcile_once callbacks; on_failed NULL means "no handler": stalled. */
  altar_on_ready_fn on_ready;
  void *on_ready_ctx;
  altar_on_failed_fn on_failed;
  void *on_failed_ctx;
  /* Fleet policy (configuration; read by the status-event applier). */
  altar_failed_policy_t failed_policy;
  int64_t max_restarts;
  altar_retry_backoff_t retry_backoff;
  char *ready_topic; /* NULL = the fleet's default ready topic */
  char *dead_topic;  /* NULL = the fleet's default dead topic */
  int config_line;   /* line of the kind's entry in its file, 0 if not from a file */
  /* The next stage (altar/followup.h): submitted when a group fires
   * (then) or is dead-lettered (then_dead); NULL = none. Owned. */
  struct altar_followup *then;
  struct altar_followup *then_dead;
  bool event_outputs; /* fired events list the members' outputs (always with a then/then_dead) */
  /* Runs of one shard kept as attempts (altar/attempts.h); 0 = the default. */
  int64_t attempts_keep;
  /* Most shards one group of this kind may have (`max_width`); submit
   * refuses a job with a wider group. 0 = ALTAR_GROUP_MAX_WIDTH_DEFAULT. A
   * group's event has no width limit of its own (it is paged): this bound
   * keeps one submit's and one decision's memory in reason. */
  int64_t max_width;
} altar_group_spec_t;

#define ALTAR_GROUP_MAX_WIDTH_DEFAULT 1000000
#define ALTAR_GROUP_MAX_WIDTH_MAX 100000000

void altar_group_spec_clear(altar_group_spec_t *g);

/* A set of GroupSpecs, one per kind. */
typedef struct altar_group_specs {
  altar_group_spec_t *v;
  size_t n;
} altar_group_specs_t;

/* Adds a spec, taking ownership of *g's members (g is zeroed). ALTAR_EEXIST
 * when the kind is already present. */
int altar_group_specs_add(altar_group_specs_t *s, altar_group_spec_t *g, altar_error_t *err);
const altar_group_spec_t *altar_group_specs_find(const altar_group_specs_t *s, const char *kind);
/* Same, mutable, e.g. to attach callbacks to specs loaded from a file. */
altar_group_spec_t *altar_group_specs_find_mut(altar_group_specs_t *s, const char *kind);
void altar_group_specs_clear(altar_group_specs_t *s);

/* Loads group specs from YAML: either a whole altar config (its `groups:`
 * key) or a bare mapping kind → spec. See docs/ledger.md for the shape.
 * Errors are ALTAR_ECONFIG with "FILE:LINE: groups.KIND.KEY: problem". *pout
 * must be zeroed; the caller clears it (also after an error). */
int altar_group_specs_load_file(const char *path, altar_group_specs_t *pout, altar_error_t *err);
/* Same from text; `name` stands in for the file name in errors. */
int altar_group_specs_load_string(const char *text, size_t len, const char *name, altar_group_specs_t *pout,
                                  altar_error_t *err);

ALTAR_API_END

#endif
