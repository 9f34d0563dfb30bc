#include "altar/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *altar_err_name(int code) {
  switch (code) {
  case ALTAR_OK: return "OK";
#define ALTAR__ERR_NAME(name, c, msg)                                                                                  \
  case c: return #name;
    ALTAR_ERRNO_MAP(ALTAR__ERR_NAME)
#undef ALTAR__ERR_NAME
  default: return "UNKNOWN";
  }
}

const char *altar_strerror(int code) {
  switch (code) {
  case ALTAR_OK: return "success";
#define ALTAR__ERR_MSG(name, c, msg)                                                                                   \
  case c: return msg;
    ALTAR_ERRNO_MAP(ALTAR__ERR_MSG)
#undef ALTAR__ERR_MSG
  default: return "unknown error";
  }
}

__attribute__((format(printf, 4, 0))) static int error_vset(altar_error_t *err, int code, bool retriable,
                                                            const char *fmt, va_list ap) {
  if (!err) return code;
  err->code = code;
  err->retriable = retriable;
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  return code;
}

int altar_error_set(altar_error_t *err, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  error_vset(err, code, false, fmt, ap);
  va_end(ap);
  return code;
}

int altar_error_set_retriable(altar_error_t *err, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  error_vset(err, code, true, fmt, ap);
  va_end(ap);
  return code;
}

int altar_error_prefix(altar_error_t *err, const char *fmt, ...) {
  if (!err) return ALTAR_OK;
  char prefix[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  char old[ALTAR_ERRMSG_MAX];
  memcpy(old, err->msg, sizeof old);
  old[sizeof old - 1] = '\0';
  snprintf(err->msg, sizeof err->msg, "%s: %s", prefix, old);
  return err->code;
}

void altar_error_clear(altar_error_t *err) {
  if (!err) return;
  err->code = ALTAR_OK;
  err->retriable = false;
  err->msg[0] = '\0';
}
