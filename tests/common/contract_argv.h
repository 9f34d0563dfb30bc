/* Contract-suite hooks for backends whose tasks run the spec's argv on this
 * host (process, the example Python backend, plug-ins built for tests): one
 * copy of the commands that exit with n, sleep, outgrow their memory limit
 * or read an input. Each fits altar_contract_fixture_t's hook of its name. */
#ifndef ALTAR_CONTRACT_ARGV_H
#define ALTAR_CONTRACT_ARGV_H

#include "altar/spec.h"

/* Replaces spec's command with argv (NULL-terminated); 0 or -1. */
int altar_contract_set_argv(altar_spec_t *s, const char *const *argv);
int altar_contract_argv_exit(void *ctx, altar_spec_t *s, int code);     /* sh -c 'exit n' */
int altar_contract_argv_sleep(void *ctx, altar_spec_t *s, int seconds); /* sleep n */
int altar_contract_argv_oom(void *ctx, altar_spec_t *s);                /* perl growing without end, 64 MB limit */
int altar_contract_argv_read_input(void *ctx, altar_spec_t *s, const char *path); /* cat path */

#endif
