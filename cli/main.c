/* altar — entry point: dispatches to a subcommand. */
#include "cli.h"

#include "altar/version.h"

#include <stdio.h>
#include <string.h>

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
    {"logs", altar_cmd_logs, "print a task's output (or a job's failed shards')"},
    {"jobs", altar_cmd_jobs, "list jobs: shards by state, groups, outputs"},
    {"workers", altar_cmd_workers, "list workers from their heartbeats"},
    {"dashboard", altar_cmd_dashboard, "serve the read-only web dashboard"},
    {"demo", altar_cmd_demo, "run a reconciler, two workers and a job on one machine"},
};

static void usage(FILE *out) {
  fprintf(out, "usage: altar <command> [options]\n\n"
               "altar is a worker fleet for container tasks.\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].summary);
  fprintf(out, "\nRun 'altar <command> --help' for a command's options.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("altar %s\n", ALTAR_VERSION);
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    if (!strcmp(argv[1], commands[i].name)) {
      altar_cli_register_plugins();
      if (altar_cli_load_env_plugins() < 0) return 2;
      return commands[i].fn(argc - 1, argv + 1);
    }
  }
  fprintf(stderr, "altar: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
