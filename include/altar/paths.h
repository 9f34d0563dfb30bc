/* altar — PathResolver: logical paths (jobs/<id>/..., models/<id>/...) to the
 * physical paths a backend's container reads and writes.
 *
 * A logical path is relative and stays inside its root. The resolver prefixes
 * the backend's mount root and normalizes the result ("." segments and
 * repeated slashes collapse; ".." that stays inside is resolved). An empty
 * root is the identity, so a URI such as "gs://bucket/x" passes through
 * unchanged. A logical path that is absolute, contains a NUL byte, or whose
 * ".." segments climb above the root is rejected with ALTAR_EPATH and never
 * resolved. */
#ifndef ALTAR_PATHS_H
#define ALTAR_PATHS_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/error.h"

#include <stddef.h>

/* Longest logical or resolved path accepted (bytes, without NUL). */
#define ALTAR_PATH_MAX 4096u

/* Checks a logical path on its own: non-empty, relative, no NUL in its len
 * bytes, no ".." escaping, at most ALTAR_PATH_MAX bytes. 0 or ALTAR_EPATH
 * (ALTAR_ETOOBIG when too long) with a message saying why. */
int altar_logical_path_checkn(const char *logical, size_t len, altar_error_t *err);
/* Same for a NUL-terminated string. */
int altar_logical_path_check(const char *logical, altar_error_t *err);

/* Resolves the len bytes at logical under root (NULL or "" = identity).
 * On success *pout is a new string the caller frees; on error *pout is NULL.
 * Errors: ALTAR_EPATH (escape, absolute, NUL, empty), ALTAR_ETOOBIG,
 * ALTAR_ENOMEM. With an empty root only NUL bytes are rejected. */
int altar_path_resolven(const char *root, const char *logical, size_t len, char **pout, altar_error_t *err);
/* Same for a NUL-terminated logical path. */
int altar_path_resolve(const char *root, const char *logical, char **pout, altar_error_t *err);

/* The contract's PathResolver as a value: a backend returns one from its
 * path_resolver method. mount_root is borrowed (NULL or "" = identity). */
typedef struct altar_path_resolver {
  const char *mount_root;
} altar_path_resolver_t;

static inline int altar_path_resolver_resolve(const altar_path_resolver_t *r, const char *logical, char **pout,
                                              altar_error_t *err) {
  return altar_path_resolve(r ? r->mount_root : NULL, logical, pout, err);
}

ALTAR_API_END

#endif
