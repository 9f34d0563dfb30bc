/* `altar spec id FILE.json [--json]`: the task key (identity hash) and the
 * Kubernetes Job name of a spec. Exit 0 ok, 1 invalid spec, 2 bad usage. */
#include "altar/codec.h"
#include "altar/spec_keys.h"
#include "altar/file_read.h"
#include "cli.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void spec_usage(FILE *out) {
  fprintf(out, "usage: altar spec id FILE.json [--json]\n"
               "\n"
               "Prints the spec's task key (lowercase hex SHA-256 of its canonical msgpack\n"
               "encoding, avoid_hosts left out) and its Kubernetes Job name, one per line,\n"
               "or as one JSON object {\"job_name\": ..., \"task_key\": ...} with --json.\n"
               "FILE may be '-' for stdin. See schemas/README.md for the derivations.\n"
               "Exit status: 0 ok, 1 invalid spec (the message names the field), 2 bad usage.\n");
  fputs(ALTAR_CLI_EXIT_HELP, out);
}

static int spec_id(int argc, char **argv) {
  const char *file = NULL;
  bool as_json = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      spec_usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--json")) {
      as_json = true;
    } else if (!file && (argv[i][0] != '-' || !strcmp(argv[i], "-"))) {
      file = argv[i];
    } else {
      fprintf(stderr, "altar spec id: unexpected argument '%s'\n", argv[i]);
      spec_usage(stderr);
      return 2;
    }
  }
  if (!file) {
    fprintf(stderr, "altar spec id: missing FILE\n");
    spec_usage(stderr);
    return 2;
  }
  size_t len = 0;
  altar_error_t err = {0};
  char *text = altar_file_read(file, NULL, (size_t)ALTAR_MAX_MESSAGE * 4, &len, &err);
  if (!text) {
    fprintf(stderr, "altar spec id: %s\n", err.msg);
    return 1;
  }
  altar_spec_t spec;
  char key[ALTAR_TASK_KEY_LEN + 1], name[ALTAR_JOB_NAME_MAX + 1];
  int rc = altar_spec_json_check_keys(text, len, file, 1, &err);
  if (!rc) rc = altar_spec_from_json(text, len, &spec, &err);
  else memset(&spec, 0, sizeof spec);
  if (!rc) rc = altar_spec_identity(&spec, key, &err);
  if (!rc) rc = altar_spec_job_name(&spec, name, &err);
  altar_spec_clear(&spec);
  free(text);
  if (rc) {
    fprintf(stderr, "altar spec id: %s\n", err.msg);
    return 1;
  }
  if (as_json) {
    json_t *j = json_pack("{s:s, s:s}", "job_name", name, "task_key", key);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    if (!s) {
      fprintf(stderr, "altar spec id: out of memory\n");
      return 1;
    }
    printf("%s\n", s);
    free(s);
  } else {
    printf("%s\n%s\n", key, name);
  }
  return fflush(stdout) ? 1 : 0;
}

int altar_cmd_spec(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    spec_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "id")) return spec_id(argc - 1, argv + 1);
  fprintf(stderr, "altar spec: unknown subcommand '%s'\n", argv[1]);
  spec_usage(stderr);
  return 2;
}
