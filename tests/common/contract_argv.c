/* The argv fixture hooks (contract_argv.h). */
#include "contract_argv.h"

#include <stdio.h>
#include <stdlib.h>

int altar_contract_set_argv(altar_spec_t *s, const char *const *argv) {
  for (size_t i = 0; i < s->n_command; i++) free(s->command[i]);
  free(s->command);
  s->command = NULL;
  s->n_command = 0;
  for (size_t i = 0; argv[i]; i++)
    if (altar_spec_add_arg(s, argv[i]) < 0) return -1;
  return 0;
}

int altar_contract_argv_exit(void *ctx, altar_spec_t *s, int code) {
  (void)ctx;
  char script[32];
  snprintf(script, sizeof script, "exit %d", code);
  const char *argv[] = {"sh", "-c", script, NULL};
  return altar_contract_set_argv(s, argv);
}

int altar_contract_argv_sleep(void *ctx, altar_spec_t *s, int seconds) {
  (void)ctx;
  char secs[16];
  snprintf(secs, sizeof secs, "%d", seconds);
  const char *argv[] = {"sleep", secs, NULL};
  return altar_contract_set_argv(s, argv);
}

int altar_contract_argv_oom(void *ctx, altar_spec_t *s) {
  (void)ctx;
  /* Grows without end, so it can only stop by being killed. */
  const char *argv[] = {"perl", "-e", "my @a; while (1) { push @a, 'x' x 1048576 }", NULL};
  s->resources.memory_mb = (altar_opt_i64_t){true, 64};
  return altar_contract_set_argv(s, argv);
}

int altar_contract_argv_read_input(void *ctx, altar_spec_t *s, const char *path) {
  (void)ctx;
  const char *argv[] = {"cat", path, NULL};
  return altar_contract_set_argv(s, argv);
}
