/* altar — entry point: dispatches to a subcommand. */
#include "cli.h"

#include "altar/suggest.h"
#include "altar/version.h"

#include <stdio.h>
#include <string.h>

const char *altar__cli_cmd = "altar";

static const struct {
  const char *name;
  altar_cmd_fn fn;
  const char *summary;
} commands[] = {
    {"codec", altar_cmd_codec, "encode and decode wire messages (JSON <-> msgpack)"},
    {"spec", altar_cmd_spec, "identity hash and Kubernetes job name of a spec"},
    {"digest", altar_cmd_digest, "SHA-256 digests, verification records, the sh verifier"},
    {"ledger", altar_cmd_ledger, "apply status events, inspect and checksum the ledger"},
    {"log", altar_cmd_log, "produce, consume and inspect topics on any transport"},
    {"run", altar_cmd_run, "run one spec to completion on a backend"},
    {"submit", altar_cmd_submit, "publish specs to the jobs topic"},
    {"cancel", altar_cmd_cancel, "stop a job (or one group of it) everywhere"},
    {"worker", altar_cmd_worker, "consume jobs and drive a backend"},
    {"reconciler", altar_cmd_reconciler, "fold status events into the ledger, publish groups"},
    {"status", altar_cmd_status, "show the progress of a job"},
    {"group", altar_cmd_group, "the whole member list and outputs of a group event"},
    {"logs", altar_cmd_logs, "print a task's output (or a job's failed shards')"},
    {"jobs", altar_cmd_jobs, "list jobs: shards by state, groups, outputs"},
    {"workers", altar_cmd_workers, "list workers from their heartbeats"},
    {"dashboard", altar_cmd_dashboard, "serve the read-only web dashboard"},
    {"demo", altar_cmd_demo, "run a reconciler, two workers and a job on one machine"},
};

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out) {
  fprintf(out, "usage: altar <command> [options]\n"
               "       altar help <command>\n\n"
               "altar is a worker fleet for container tasks.\n\ncommands:\n");
  for (size_t i = 0; i < N_COMMANDS; i++) fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].summary);
  fprintf(out,
          "\nRun 'altar <command> --help' (or 'altar help <command>') for a command's options.\n"
          "%s",
          ALTAR_CLI_EXIT_HELP);
}

static int find_command(const char *name) {
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (!strcmp(name, commands[i].name)) return (int)i;
  return -1;
}

/* "altar: unknown command 'submti' (did you mean 'submit'?)": one line and a
 * pointer to the list, not the whole usage. Exit 2, bad input. */
static int unknown_command(const char *name) {
  const char *known[N_COMMANDS + 2];
  for (size_t i = 0; i < N_COMMANDS; i++) known[i] = commands[i].name;
  known[N_COMMANDS] = "help";
  known[N_COMMANDS + 1] = NULL;
  const char *s = altar_suggest(name, known);
  if (s) fprintf(stderr, "altar: unknown command '%s' (did you mean '%s'?)\n", name, s);
  else fprintf(stderr, "altar: unknown command '%s'\n", name);
  fprintf(stderr, "Run 'altar help' for the list of commands.\n");
  return 2;
}

static int run_command(int i, int argc, char **argv) {
  altar__cli_cmd = commands[i].name;
  altar_cli_register_plugins();
  if (altar_cli_load_env_plugins() < 0) return 2;
  return commands[i].fn(argc, argv);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || (!strcmp(argv[1], "help") && argc == 2)) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("altar %s\n", ALTAR_VERSION);
    return 0;
  }
  if (!strcmp(argv[1], "help")) {
    /* altar help CMD [SUB]: the same text as altar CMD [SUB] --help. */
    if (argc > 4) {
      fprintf(stderr, "altar help: one command at a time (altar help <command> [subcommand])\n");
      return 2;
    }
    if (!strcmp(argv[2], "help")) {
      usage(stdout);
      return 0;
    }
    int i = find_command(argv[2]);
    if (i < 0) return unknown_command(argv[2]);
    char *args[4] = {argv[2], argc > 3 ? argv[3] : "--help", argc > 3 ? "--help" : NULL, NULL};
    return run_command(i, argc > 3 ? 3 : 2, args);
  }
  int i = find_command(argv[1]);
  if (i < 0) return unknown_command(argv[1]);
  return run_command(i, argc - 1, argv + 1);
}
