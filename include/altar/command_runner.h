/* altar — CommandRunner: runs one external command given as an argv (never a
 * shell string), captures its stdout and stderr up to a bound, and reports how
 * it ended. Backends that drive a CLI (the docker backend) take one, so tests
 * can inject a scripted runner that records argv and returns programmed output. */
#ifndef ALTAR_COMMAND_RUNNER_H
#define ALTAR_COMMAND_RUNNER_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include <stdbool.h>
#include <stddef.h>

#include "altar/error.h"

/* Bytes kept per stream when altar_cmd_opts_t.max_output is 0. */
#define ALTAR_CMD_DEFAULT_MAX_OUTPUT ((size_t)4 << 20)

typedef struct altar_cmd_opts {
  double timeout_s;  /* wall-clock limit; <= 0 means none */
  size_t max_output; /* bytes kept per stream (the rest is read and dropped); 0 = default */
} altar_cmd_opts_t;

/* How a command ended and what it printed. out and err are NUL-terminated
 * (the NUL is not counted in the lengths) and owned by the result. */
typedef struct altar_cmd_result {
  int exit_code;   /* the exit status; -1 when the command did not exit normally */
  int term_signal; /* the signal that ended it, 0 if it exited */
  bool timed_out;  /* killed because timeout_s passed */
  char *out;
  size_t out_len;
  bool out_truncated;
  char *err;
  size_t err_len;
  bool err_truncated;
} altar_cmd_result_t;

/* A runner is a const table of operations plus an opaque impl. */
typedef struct altar_command_runner_ops {
  const char *name;
  /* Runs argv[0] (looked up in PATH when it has no '/') with argv[] (NULL-
   * terminated), stdin from /dev/null. Returns 0 once the command ran to its
   * end, whatever its exit status (read pres->exit_code); ALTAR_ETIMEOUT when
   * it was killed at timeout_s (pres is filled, timed_out set); ALTAR_ENOTFOUND
   * when argv[0] cannot be executed; ALTAR_EIO/ENOMEM/EINVAL otherwise.
   * *pres is always initialised: free it with altar_cmd_result_clear whatever
   * the return. opts may be NULL (no timeout, default bound). Thread-safe for
   * the real runner. */
  int (*run)(void *impl, const char *const argv[], const altar_cmd_opts_t *opts, altar_cmd_result_t *pres,
             altar_error_t *err);
} altar_command_runner_ops_t;

typedef struct altar_command_runner {
  const altar_command_runner_ops_t *ops;
  void *impl;
} altar_command_runner_t;

/* The real runner (posix_spawn + pipes + poll, timeout kills the command's
 * process group). A static instance: never free it. */
const altar_command_runner_t *altar_command_runner_default(void);

static inline int altar_command_run(const altar_command_runner_t *runner, const char *const argv[],
                                    const altar_cmd_opts_t *opts, altar_cmd_result_t *pres, altar_error_t *err) {
  if (!runner) runner = altar_command_runner_default();
  return runner->ops->run(runner->impl, argv, opts, pres, err);
}

/* Frees out and err and zeroes the result. Safe on a zeroed result. */
void altar_cmd_result_clear(altar_cmd_result_t *res);

/* Fills res with copies of out/err (either may be NULL for empty) and the
 * exit code — for scripted runners in tests. 0 or ALTAR_ENOMEM. */
int altar_cmd_result_set(altar_cmd_result_t *res, int exit_code, const char *out, const char *err);

/* Renders argv for messages, words separated by spaces and cut at cap bytes
 * (with "..."). Never for execution. Returns buf. */
char *altar_cmd_argv_render(const char *const argv[], char *buf, size_t cap);

ALTAR_API_END

#endif
