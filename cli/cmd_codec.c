/* `altar codec encode|decode --type T`: JSON on stdin → msgpack on stdout,
 * and back. Exit 0 on success, 1 on bad input (one line naming the field),
 * 2 on bad usage. */
#include "altar/codec.h"
#include "altar/file_read.h"
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void codec_usage(FILE *out) {
  fprintf(out, "usage: altar codec encode --type TYPE   (JSON on stdin -> msgpack on stdout)\n"
               "       altar codec decode --type TYPE   (msgpack on stdin -> one JSON line on stdout)\n"
               "\n"
               "TYPE is one of: spec, job, status, group, record, control, group_page.\n"
               "The wire schema and every field are described in schemas/README.md.\n"
               "Exit status: 0 ok, 1 invalid input (the message names the field), 2 bad usage.\n");
  fputs(ALTAR_CLI_EXIT_HELP, out);
}

int altar_cmd_codec(int argc, char **argv) {
  const char *op = NULL, *type = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      codec_usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--type") && i + 1 < argc) {
      type = argv[++i];
    } else if (!strncmp(argv[i], "--type=", 7)) {
      type = argv[i] + 7;
    } else if (!op && (!strcmp(argv[i], "encode") || !strcmp(argv[i], "decode"))) {
      op = argv[i];
    } else {
      fprintf(stderr, "altar codec: unexpected argument '%s'\n", argv[i]);
      codec_usage(stderr);
      return 2;
    }
  }
  altar_msg_type_t t;
  if (!op || !type) {
    fprintf(stderr, "altar codec: %s\n", !op ? "missing encode or decode" : "missing --type");
    codec_usage(stderr);
    return 2;
  }
  if (altar_msg_type_parse(type, &t)) {
    fprintf(stderr, "altar codec: --type: unknown type '%s' (spec, job, status, group, record)\n", type);
    return 2;
  }

  bool encode = !strcmp(op, "encode");
  size_t len = 0;
  /* JSON may be larger than its msgpack form; both are bounded before parsing. */
  altar_error_t err = {0};
  char *in = altar_file_read("-", "stdin", encode ? (size_t)ALTAR_MAX_MESSAGE * 4 : ALTAR_MAX_MESSAGE, &len, &err);
  if (!in) {
    fprintf(stderr, "altar codec: %s\n", err.msg);
    return 1;
  }
  int status = 0;
  if (encode) {
    altar_buf_t out = {0};
    if (altar_codec_json_to_msgpack(t, in, len, &out, &err)) {
      fprintf(stderr, "altar codec encode: %s\n", err.msg);
      status = 1;
    } else if (fwrite(out.data, 1, out.len, stdout) != out.len || fflush(stdout)) {
      fprintf(stderr, "altar codec encode: stdout: write error\n");
      status = 1;
    }
    altar_buf_free(&out);
  } else {
    char *json = altar_codec_msgpack_to_json(t, in, len, &err);
    if (!json) {
      fprintf(stderr, "altar codec decode: %s\n", err.msg);
      status = 1;
    } else if (printf("%s\n", json) < 0 || fflush(stdout)) {
      fprintf(stderr, "altar codec decode: stdout: write error\n");
      status = 1;
    }
    free(json);
  }
  free(in);
  return status;
}
