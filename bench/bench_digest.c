/* Digest benchmark: streaming SHA-256 against coreutils sha256sum on the same
 * file (the baseline), and a record-accepted check against a full hash, in C
 * and in the sh verifier. Usage: bench_digest [MiB] (default 256). */
#include "altar/digest.h"
#include "core/unconst.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs argv with stdout to /dev/null; returns the exit status or -1. */
static int run(char *const argv[]) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, NULL);
  posix_spawn_file_actions_destroy(&fa);
  if (rc) return -1;
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char **argv) {
  char *end = NULL;
  long mib = argc > 1 ? strtol(argv[1], &end, 10) : 256;
  if (mib <= 0 || mib > 16384 || (end && *end)) {
    fprintf(stderr, "usage: bench_digest [MiB 1..16384]\n");
    return 2;
  }
  const char *tmpdir = getenv("TMPDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/altar-bench-digest-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
  int fd = mkstemp(path);
  if (fd < 0) {
    perror("mkstemp");
    return 1;
  }
  char *chunk = malloc(1 << 20);
  for (size_t i = 0; i < (1u << 20); i++) chunk[i] = (char)(i * 2654435761u >> 13);
  for (long i = 0; i < mib; i++) {
    chunk[0] = (char)i;
    if (write(fd, chunk, 1 << 20) != 1 << 20) {
      perror("write");
      return 1;
    }
  }
  close(fd);
  free(chunk);

  char digest[ALTAR_DIGEST_BUFSZ];
  altar_error_t err = {0};
  /* Warm the page cache so both sides read from memory. */
  altar_sha256_file(path, digest, &err);

  double t0 = now();
  if (altar_sha256_file(path, digest, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  double t_c = now() - t0;
  char *sargv[] = {"sha256sum", path, NULL};
  t0 = now();
  int src = run(sargv);
  double t_s = now() - t0;
  printf("file: %ld MiB\n", mib);
  printf("altar_sha256_file:   %8.3f s  %8.1f MiB/s\n", t_c, (double)mib / t_c);
  if (src == 0)
    printf("sha256sum (baseline): %7.3f s  %8.1f MiB/s   ratio baseline/altar = %.2f\n", t_s, (double)mib / t_s,
           t_s / t_c);
  else printf("sha256sum (baseline): not runnable (status %d)\n", src);

  /* Record-accepted check versus a hash, same process. */
  bool hashed;
  altar_verify_file_digest(path, digest, false, true, &hashed, &err); /* writes the record */
  int n = 2000;
  t0 = now();
  for (int i = 0; i < n; i++) {
    if (altar_verify_file_digest(path, digest, true, true, &hashed, &err) || hashed) {
      fprintf(stderr, "record not accepted: %s\n", err.msg);
      return 1;
    }
  }
  double t_rec = (now() - t0) / n;
  t0 = now();
  altar_verify_file_digest(path, digest, false, false, &hashed, &err);
  double t_hash = now() - t0;
  printf("verify via record:   %8.1f us/check\n", t_rec * 1e6);
  printf("verify by hashing:   %8.3f s/check    ratio hash/record = %.0f\n", t_hash, t_hash / t_rec);

  /* The sh verifier: trusting the record versus hashing. */
  char line[600];
  snprintf(line, sizeof line, "%s  %s", digest + 7, path);
  char *trust[] = {"sh", "-c", ALTAR__UNCONST(altar_digest_verifier_program(true)), "verify", line, NULL};
  char *hash[] = {"sh", "-c", ALTAR__UNCONST(altar_digest_verifier_program(false)), "verify", line, NULL};
  t0 = now();
  int r1 = run(trust);
  double t_sh_rec = now() - t0;
  t0 = now();
  int r2 = run(hash);
  double t_sh_hash = now() - t0;
  if (r1 == 0 && r2 == 0)
    printf("sh verifier: record %.3f s, hashing %.3f s   ratio hash/record = %.1f\n", t_sh_rec, t_sh_hash,
           t_sh_hash / t_sh_rec);
  else printf("sh verifier: failed (status %d, %d)\n", r1, r2);

  char *rec = altar_verification_record_path(path);
  unlink(rec);
  free(rec);
  unlink(path);
  return 0;
}
