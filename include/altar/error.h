/* altar — error codes and the error object every fallible call fills. */
#ifndef ALTAR_ERROR_H
#define ALTAR_ERROR_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include <stdbool.h>
#include <stddef.h>

/* One list generates the enum, the name table and the message table. */
#define ALTAR_ERRNO_MAP(X)                                                                                             \
  X(EINVAL, -1, "invalid argument")                                                                                    \
  X(ENOMEM, -2, "out of memory")                                                                                       \
  X(EIO, -3, "input/output error")                                                                                     \
  X(ENOTFOUND, -4, "not found")                                                                                        \
  X(EEXIST, -5, "already exists")                                                                                      \
  X(EDECODE, -6, "malformed message")                                                                                  \
  X(ETOOBIG, -7, "value exceeds a size bound")                                                                         \
  X(EINTEGRITY, -8, "content does not match its digest")                                                               \
  X(ENOTSUP, -9, "capability not supported")                                                                           \
  X(ETIMEOUT, -10, "timed out")                                                                                        \
  X(ESTALLED, -11, "reconciliation stalled on a failed group")                                                         \
  X(EBACKEND, -12, "execution backend error")                                                                          \
  X(ETRANSPORT, -13, "log transport error")                                                                            \
  X(EJOBEXISTS, -14, "a job with that name already exists")                                                            \
  X(ECONFIG, -15, "configuration error")                                                                               \
  X(EAGAIN, -16, "try again")                                                                                          \
  X(ESTORAGE, -17, "storage error")                                                                                    \
  X(EPATH, -18, "path escapes its root")                                                                               \
  X(ELEDGER, -19, "ledger error")                                                                                      \
  X(EPREDICATE, -20, "readiness predicate failed")                                                                     \
  X(ECANCELED, -21, "canceled")                                                                                        \
  X(ESTATE, -22, "invalid state for this operation")

typedef enum altar_errno {
  ALTAR_OK = 0,
#define ALTAR__ERR_ENUM(name, code, msg) ALTAR_##name = code,
  ALTAR_ERRNO_MAP(ALTAR__ERR_ENUM)
#undef ALTAR__ERR_ENUM
} altar_errno_t;

#define ALTAR_ERRMSG_MAX 512

/* Filled by a call that fails. `msg` names the field or resource at fault.
 * `retriable` says whether repeating the same call may succeed. */
typedef struct altar_error {
  int code;
  bool retriable;
  char msg[ALTAR_ERRMSG_MAX];
} altar_error_t;

/* "EINVAL" for ALTAR_EINVAL; "UNKNOWN" for codes not in the list. */
const char *altar_err_name(int code);
/* Generic message for a code. */
const char *altar_strerror(int code);

/* Sets err (which may be NULL) and returns code, so callers write
 * `return altar_error_set(err, ALTAR_EINVAL, "spec.kind: must not be empty");` */
int altar_error_set(altar_error_t *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Same, marking the error as worth a retry. */
int altar_error_set_retriable(altar_error_t *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prefixes the existing message with "prefix: " (for adding context on the way up). */
int altar_error_prefix(altar_error_t *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void altar_error_clear(altar_error_t *err);

ALTAR_API_END

#endif
