/* Settings shared by the fleet's subcommands: --config and the flags that
 * override single keys, and building a transport or backend from them. */
#ifndef ALTAR_CLI_FLEET_COMMON_H
#define ALTAR_CLI_FLEET_COMMON_H

#include "altar/backend.h"
#include "altar/config.h"
#include "altar/groups.h"
#include "altar/registry.h"
#include "altar/transport.h"

#include <signal.h>
#include <stdio.h>
#include <stdbool.h>

/* Consumes the common flags from argv (in place, returning the new argc):
 *   --config FILE, --transport NAME, --brokers HOST:PORT, --log-dir DIR,
 *   --backend NAME, --data-root DIR, --slots N, --ledger DIR, --partitions N,
 *   --set KEY=VALUE.
 * Loads the config first. On error prints it and returns -1. */
int altar_cli_fleet_config(int argc, char **argv, altar_config_t *cfg);
/* The start every fleet command shares: --help/-h prints usage to stdout
 * (*pexit 0); otherwise loads the config and consumes the common flags.
 * Returns the new argc, or -1 with *pexit set (0 after help, 2 on error;
 * cfg is then cleared). */
int altar_cli_fleet_begin(int argc, char **argv, void (*usage)(FILE *), altar_config_t *cfg, int *pexit);
/* Commands that publish to or serve the fleet's log (submit and the daemons)
 * call this after the flags: without a config file, --log-dir, --brokers or
 * --set naming the log's location it prints why and returns -1 (exit 2). */
int altar_cli_require_log_location(const altar_config_t *cfg, const char *cmd);
/* Commands that only read the log (status, jobs, workers, log topics, ...)
 * call this before opening it: opening the local log creates its
 * directories, and a command that reads must create nothing. 0 when the
 * log is not local or its directory holds a log; otherwise prints why and
 * returns the exit code: 2 when nothing named the log's location (no
 * config file, no flag), 1 when the named directory holds no log. */
int altar_cli_require_existing_log(const altar_config_t *cfg, const char *cmd);
/* The arguments of a command that reads one thing from the log (status,
 * group): one ID and the flags --json and --outputs, after the common flags
 * (argc as altar_cli_fleet_config returned it), then the log must exist.
 * Returns 0, or the exit code after printing why (usage on stderr when the
 * ID is missing); cfg is then cleared. */
int altar_cli_id_and_view_flags(int argc, char **argv, const char *cmd, void (*usage)(FILE *), altar_config_t *cfg,
                                const char **pid, bool *pjson, bool *poutputs);
/* altar_cli_fleet_begin then altar_cli_require_log_location: the start of
 * the commands that publish to or serve the log (submit, the daemons, the
 * dashboard). Returns the new argc, or -1 with *pexit set and cfg cleared. */
int altar_cli_fleet_begin_on_log(int argc, char **argv, void (*usage)(FILE *), altar_config_t *cfg, int *pexit);
/* The integer value s of flag in [min, max] into *pv, or -1 after printing
 * "altar CMD: FLAG: expected ..." naming the range and what was given. */
int altar_cli_parse_int(const char *cmd, const char *flag, const char *s, long long min, long long max, long long *pv);
/* Help text for the common flags a command honours: the log's always, the
 * others by ALTAR_CLI_FLAGS_* bits; plug-in names come from the registries.
 * Returns a static buffer, valid until the next call (main thread only). */
#define ALTAR_CLI_FLAGS_BACKEND 1u    /* --backend, --data-root, --slots */
#define ALTAR_CLI_FLAGS_LEDGER 2u     /* --ledger */
#define ALTAR_CLI_FLAGS_PARTITIONS 4u /* --partitions */
#define ALTAR_CLI_FLAGS_ALL 7u
#define ALTAR_CLI_FLAGS_NO_LOG 8u     /* not --transport, --brokers, --log-dir (reads no log) */
#define ALTAR_CLI_FLAGS_DATA_ROOT 16u /* --data-root alone (reads the backend's files, runs none) */
/* Call before altar_cli_fleet_begin: the common flags outside which (the
 * ALTAR_CLI_FLAGS_* bits its --help was printed with) are refused as
 * unknown options, exit 2. Without it every common flag is taken. */
void altar_cli_fleet_only(unsigned which);
const char *altar_cli_fleet_flags(unsigned which);
/* Every common flag (for commands that have not said which they honour). */
#define altar_cli_fleet_flags_help altar_cli_fleet_flags(ALTAR_CLI_FLAGS_ALL)
/* "a | b | c": the registered names of a plug-in kind. */
void altar_cli_registry_names(altar_registry_kind_t kind, char *out, size_t size);

/* A transport from the config. NULL after printing the error. */
altar_transport_t *altar_cli_open_transport(const altar_config_t *cfg, const altar_transport_opts_t *opts);
/* A backend from the config. NULL after printing the error. */
altar_backend_t *altar_cli_open_backend(const altar_config_t *cfg);
/* Group specs from the config file's `groups:` (empty without a file). */
int altar_cli_load_groups(const altar_config_t *cfg, altar_group_specs_t *groups);
/* Creates the fleet's topics if missing, with cfg->topic_partitions each. */
int altar_cli_ensure_topics(altar_transport_t *t, const altar_config_t *cfg);

/* SIGINT/SIGTERM set *flag to 1, a second one to 2. */
void altar_cli_install_stop_signals(volatile sig_atomic_t *flag);

#endif
