/* altar digest: SHA-256 of a file, verification against a digest (with
 * verification records), and the sh verifier program. */
#include "cli/cli.h"

#include "altar/digest.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char usage_top[] = "usage: altar digest <sha256|verify|program> ...\n"
                                "\n"
                                "  sha256 FILE                    print the file's digest (sha256:<64 hex>)\n"
                                "  verify FILE DIGEST [--no-trust-record] [--no-record]\n"
                                "                                 check FILE against DIGEST\n"
                                "  program [--no-trust-records]   print the POSIX sh verifier program\n"
                                "\n"
                                "Run 'altar digest <sub> --help' for details.\n" ALTAR_CLI_EXIT_HELP;

static const char usage_sha256[] = "usage: altar digest sha256 FILE\n"
                                   "\n"
                                   "Prints sha256:<64 lowercase hex> of FILE, one regular file (symlinks are\n"
                                   "followed). Exit 0 on success, 1 when FILE is missing, a directory or\n"
                                   "unreadable, 2 on bad usage.\n";

static const char usage_verify[] = "usage: altar digest verify FILE DIGEST [--no-trust-record] [--no-record]\n"
                                   "\n"
                                   "Checks that FILE is a regular file whose SHA-256 is DIGEST\n"
                                   "(sha256:<64 lowercase hex>). By default a current verification record\n"
                                   "beside FILE (.<name>.altar-verified) accepts it without hashing, and a\n"
                                   "successful hash writes such a record.\n"
                                   "\n"
                                   "  --no-trust-record   always hash, even when a current record exists\n"
                                   "  --no-record         do not write a record after a successful hash\n"
                                   "\n"
                                   "Prints one line saying whether it hashed or a record accepted the file.\n"
                                   "Exit 0 on a match, 1 on a mismatch (or a missing, non-regular or\n"
                                   "unreadable file), 2 on bad usage or a malformed digest.\n";

static const char usage_program[] = "usage: altar digest program [--no-trust-records]\n"
                                    "\n"
                                    "Prints the POSIX sh program init containers run to verify staged inputs:\n"
                                    "  sh -c \"$PROGRAM\" verify \"<64 hex>  <path>\" ...\n"
                                    "With --no-trust-records the program hashes every file even when a\n"
                                    "current verification record exists.\n" ALTAR_CLI_EXIT_HELP;

static bool is_help(const char *a) { return !strcmp(a, "--help") || !strcmp(a, "-h"); }

static int cmd_sha256(int argc, char **argv) {
  if (argc == 2 && is_help(argv[1])) {
    fputs(usage_sha256, stdout);
    return 0;
  }
  if (argc != 2 || argv[1][0] == '-') {
    fputs(usage_sha256, stderr);
    return 2;
  }
  char d[ALTAR_DIGEST_BUFSZ];
  altar_error_t err = {0};
  int rc = altar_sha256_file(argv[1], d, &err);
  if (rc) {
    fprintf(stderr, "altar digest sha256: %s\n", err.msg);
    return rc == ALTAR_EINVAL ? 2 : 1;
  }
  printf("%s\n", d);
  return 0;
}

static int cmd_verify(int argc, char **argv) {
  const char *pos[2];
  size_t npos = 0;
  bool trust = true, record = true;
  for (int i = 1; i < argc; i++) {
    if (is_help(argv[i])) {
      fputs(usage_verify, stdout);
      return 0;
    } else if (!strcmp(argv[i], "--no-trust-record")) {
      trust = false;
    } else if (!strcmp(argv[i], "--no-record")) {
      record = false;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "altar digest verify: unknown option '%s'\n", argv[i]);
      fputs(usage_verify, stderr);
      return 2;
    } else if (npos < 2) {
      pos[npos++] = argv[i];
    } else {
      fprintf(stderr, "altar digest verify: too many arguments\n");
      fputs(usage_verify, stderr);
      return 2;
    }
  }
  if (npos != 2) {
    fprintf(stderr, "altar digest verify: want FILE and DIGEST\n");
    fputs(usage_verify, stderr);
    return 2;
  }
  altar_error_t err = {0};
  bool hashed = false;
  int rc = altar_verify_file_digest(pos[0], pos[1], trust, record, &hashed, &err);
  if (rc == ALTAR_OK) {
    printf("OK %s: %s\n", pos[0],
           hashed ? "hashed, digest matches" : "accepted by a current verification record (not hashed)");
    return 0;
  }
  if (rc == ALTAR_EINVAL) {
    fprintf(stderr, "altar digest verify: %s\n", err.msg);
    return 2;
  }
  fprintf(stderr, "altar digest verify: FAILED %s\n", err.msg);
  return 1;
}

static int cmd_program(int argc, char **argv) {
  bool trust = true;
  for (int i = 1; i < argc; i++) {
    if (is_help(argv[i])) {
      fputs(usage_program, stdout);
      return 0;
    } else if (!strcmp(argv[i], "--no-trust-records")) {
      trust = false;
    } else {
      fprintf(stderr, "altar digest program: unknown argument '%s'\n", argv[i]);
      fputs(usage_program, stderr);
      return 2;
    }
  }
  fputs(altar_digest_verifier_program(trust), stdout);
  return ferror(stdout) ? 1 : 0;
}

int altar_cmd_digest(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage_top, stderr);
    return 2;
  }
  if (is_help(argv[1]) || !strcmp(argv[1], "help")) {
    fputs(usage_top, stdout);
    return 0;
  }
  if (!strcmp(argv[1], "sha256")) return cmd_sha256(argc - 1, argv + 1);
  if (!strcmp(argv[1], "verify")) return cmd_verify(argc - 1, argv + 1);
  if (!strcmp(argv[1], "program")) return cmd_program(argc - 1, argv + 1);
  fprintf(stderr, "altar digest: unknown subcommand '%s'\n", argv[1]);
  fputs(usage_top, stderr);
  return 2;
}
