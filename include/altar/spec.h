/* altar — what to run: ContainerTaskSpec and its parts, independent of any backend. */
#ifndef ALTAR_SPEC_H
#define ALTAR_SPEC_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/error.h"
#include "altar/strmap.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An optional integer: `set` false means absent (nil/null on the wire). */
typedef struct altar_opt_i64 {
  bool set;
  int64_t v;
} altar_opt_i64_t;

/* Agreed GPU pool names. ResourceRequest.gpu is an open string: a backend may
 * define more. NULL gpu means CPU-only, which is not the same as the "gpu" pool. */
#define ALTAR_GPU_POOL_NORMAL "gpu"
#define ALTAR_GPU_POOL_A100 "a100"
/* The pool key a CPU-only request reads in a Capacity report. */
#define ALTAR_POOL_CPU "normal"

/* A file moved between platform storage (uri) and the task's filesystem
 * (logical_path). Direction comes from which spec list holds it. */
typedef struct altar_transfer {
  char *uri;          /* required */
  char *logical_path; /* required; relative, never escaping the root */
  char *locality_key; /* optional co-scheduling hint, NULL if absent */
  char *digest;       /* optional "sha256:<64 lowercase hex>", NULL if absent */
} altar_transfer_t;

/* The compute one task needs. */
typedef struct altar_resources {
  char *gpu;                 /* pool name, NULL = CPU only */
  int64_t count;             /* devices of that pool, >= 1; ignored for CPU-only */
  altar_opt_i64_t memory_mb; /* memory limit in MiB, absent = backend default */
} altar_resources_t;

typedef struct altar_spec {
  char *kind;  /* deployment-owned task kind; required */
  char *image; /* container image; required (recorded, unused, by `process`) */
  char **command;
  size_t n_command; /* argv, at least one element */
  altar_strmap_t labels;
  altar_transfer_t *inputs;
  size_t n_inputs;
  altar_transfer_t *outputs;
  size_t n_outputs;
  altar_resources_t resources;
  altar_opt_i64_t timeout_s; /* wall-clock limit from start; absent = no limit */
  char **avoid_hosts;        /* placement only: not identity, not in spec_to_dict */
  size_t n_avoid_hosts;
  altar_strmap_t *plugin_identity; /* PluginRunIdentity; NULL if absent */
} altar_spec_t;

/* Bounds every decoder and validator enforces on untrusted input. */
#define ALTAR_MAX_STRING 65536u      /* bytes in one string field */
#define ALTAR_MAX_ARRAY 4096u        /* elements in one array (command, inputs, …) */
#define ALTAR_MAX_MAP 1024u          /* entries in one map (labels, …) */
#define ALTAR_MAX_DEPTH 16u          /* nesting of maps and arrays */
#define ALTAR_MAX_MESSAGE (4u << 20) /* bytes in one encoded message */

/* Constructors return NULL on allocation failure. Free with altar_spec_free. */
altar_spec_t *altar_spec_new(const char *kind, const char *image);
void altar_spec_free(altar_spec_t *spec);
/* Frees the members and zeroes *spec, for a spec embedded in another struct. */
void altar_spec_clear(altar_spec_t *spec);
/* Deep copy; NULL on allocation failure. Caller frees with altar_spec_free. */
altar_spec_t *altar_spec_dup(const altar_spec_t *spec);
int altar_spec_copy(altar_spec_t *dst, const altar_spec_t *src);
/* Equal in every field, avoid_hosts included. */
bool altar_spec_equal(const altar_spec_t *a, const altar_spec_t *b);
/* Equal in identity: every field but avoid_hosts. */
bool altar_spec_same_identity(const altar_spec_t *a, const altar_spec_t *b);

/* Builders (copy their arguments). Return 0 or ALTAR_ENOMEM. */
int altar_spec_add_arg(altar_spec_t *spec, const char *arg);
int altar_spec_set_label(altar_spec_t *spec, const char *key, const char *val);
int altar_spec_add_input(altar_spec_t *spec, const char *uri, const char *logical_path, const char *locality_key,
                         const char *digest);
int altar_spec_add_output(altar_spec_t *spec, const char *uri, const char *logical_path);
int altar_spec_add_avoid_host(altar_spec_t *spec, const char *host);
int altar_spec_set_gpu(altar_spec_t *spec, const char *pool, int64_t count);

void altar_transfer_clear(altar_transfer_t *t);
int altar_transfer_copy(altar_transfer_t *dst, const altar_transfer_t *src);
bool altar_transfer_equal(const altar_transfer_t *a, const altar_transfer_t *b);

/* Checks a spec before anything runs: non-empty kind, image and command;
 * logical paths that stay inside the root; well-formed digests; a timeout
 * > 0 when set; count >= 1; memory > 0 when set; every string bounded.
 * On failure returns ALTAR_EINVAL with err->msg naming the field,
 * e.g. "inputs[2].logical_path: escapes the root". */
int altar_spec_validate(const altar_spec_t *spec, altar_error_t *err);

ALTAR_API_END

#endif
