/* altar — the subcommands of the one binary. Each lives in its own cli/cmd_*.c
 * and returns the process exit code. */
#ifndef ALTAR_CLI_H
#define ALTAR_CLI_H

#include "altar/config.h"
#include "altar/registry.h"

typedef int (*altar_cmd_fn)(int argc, char **argv);

/* The subcommand running ("status"), for error prefixes "altar status: ..."
 * in helpers shared by several commands. Set once by main. */
extern const char *altar__cli_cmd;

/* The exit-code rule every command follows, printed at the end of each
 * --help. A command's own codes (3, 4, ...) are listed in its help above it. */
#define ALTAR_CLI_EXIT_HELP                                                                                            \
  "\nexit status: 0 done; 1 failed while running (a log, ledger, backend or task failed);\n"                           \
  "  2 bad input, wherever it comes from: usage, a flag or --set, the config file, a spec\n"                           \
  "  (the error names the field, and FILE:LINE when it comes from a file).\n"

/* "1 shard", "2 shards": the noun with an s unless n is 1. */
#define ALTAR_CLI_PLURAL(n) ((n) == 1 ? "" : "s")

/* argv[0] is the subcommand name. */
int altar_cmd_codec(int argc, char **argv);
int altar_cmd_spec(int argc, char **argv);
int altar_cmd_digest(int argc, char **argv);
int altar_cmd_ledger(int argc, char **argv);
int altar_cmd_log(int argc, char **argv);
int altar_cmd_run(int argc, char **argv);
int altar_cmd_submit(int argc, char **argv);
int altar_cmd_cancel(int argc, char **argv);
int altar_cmd_worker(int argc, char **argv);
int altar_cmd_reconciler(int argc, char **argv);
int altar_cmd_status(int argc, char **argv);
int altar_cmd_group(int argc, char **argv);
int altar_cmd_logs(int argc, char **argv);
int altar_cmd_demo(int argc, char **argv);
int altar_cmd_jobs(int argc, char **argv);
int altar_cmd_workers(int argc, char **argv);
int altar_cmd_dashboard(int argc, char **argv);
/* `altar ledger retries`: the recorded due time of every retry (cli/cmd_ledger_retries.c). */
struct altar_ledger;
int altar__cmd_ledger_retries(struct altar_ledger *l);

/* Registers the built-in backends, storage adapters and transports by name.
 * The only place that knows every plug-in (cli/plugins.c). */
void altar_cli_register_plugins(void);

/* Loads the plug-ins ALTAR_PLUGIN_PATH names (after the built-ins, before
 * any name is resolved). 0, or -1 with the error printed. */
int altar_cli_load_env_plugins(void);

/* altar_config_load, then the plug-ins its `plugins:` list names, so the
 * config's backend, transport and storage names can be theirs. Errors name
 * FILE:LINE; the caller clears *cfg either way. */
int altar_cli_config_load(const char *path, altar_config_t *cfg, altar_error_t *err);

/* ALTAR_OK when name is registered as a kind; else ALTAR_ECONFIG with
 * "WHERE: KEY: unknown transport \"lcoal\" (did you mean \"local\"?); known: ..."
 * in err. WHERE is FILE:LINE or the flag that gave the name. */
int altar_cli_check_name(altar_registry_kind_t kind, const char *key, const char *name, const char *where,
                         altar_error_t *err);

#endif
