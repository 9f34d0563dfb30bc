/* The cost (CPU time, user and system: the machine may be shared) of
 * bounding kept task output as the amount kept grows. For K
 * kept task directories (1000, 10000, 100000 by default) it times:
 *   scan   one read of the whole logs directory (what every prune cost
 *          before the index, once a minute; now at open and hourly);
 *   keep   a task's output kept and the oldest pushed out by the count
 *          bound (what each reclaimed run costs now), per task.
 * and prints each keep figure as a ratio to the smallest K's: flat means
 * the per-task cost does not grow with what is kept.
 *
 *   bench_log_retention [K...]
 */
#include "backends/log_retention.h"
#include "util/bench_util.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KEEPS 2000

/* logs/<key of i> with a 100-byte stderr. */
static void make_dir(const char *logs, long i, char key[65]) {
  char path[4200];
  snprintf(key, 65, "%064lx", (unsigned long)i);
  snprintf(path, sizeof path, "%s/%s", logs, key);
  if (mkdir(path, 0755) < 0 && errno != EEXIST) {
    perror(path);
    exit(1);
  }
  snprintf(path, sizeof path, "%s/%s/stderr", logs, key);
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    exit(1);
  }
  for (int k = 0; k < 100; k++) fputc('x', f);
  fclose(f);
}

int main(int argc, char **argv) {
  long ks[8] = {1000, 10000, 100000};
  int nk = 3;
  if (argc > 1) {
    nk = 0;
    for (int i = 1; i < argc && nk < 8; i++) ks[nk++] = strtol(argv[i], NULL, 10);
  }
  const char *tmp = getenv("TMPDIR");
  char root[4096];
  snprintf(root, sizeof root, "%s/altar-bench-retention-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(root)) {
    perror("mkdtemp");
    return 1;
  }
  double base = 0;
  printf("%10s %12s %14s %8s %12s\n", "kept", "scan ms", "keep us/task", "ratio", "index KiB");
  for (int j = 0; j < nk; j++) {
    char logs[4200];
    snprintf(logs, sizeof logs, "%s/logs-%ld", root, ks[j]);
    mkdir(logs, 0755);
    char key[65];
    for (long i = 0; i < ks[j]; i++) make_dir(logs, i, key);
    altar_log_retention_t r = {
        .keep_bytes = 1ull << 50, .keep_count = (size_t)ks[j], .max_age_s = 0, .last_prune = -1, .last_scan = -1};
    altar_logs_prune_facts_t f;
    double t0 = bench_cpu_s();
    altar__logs_prune(logs, &r, 0, (double)time(NULL), NULL, NULL, &f);
    double scan = bench_cpu_s() - t0;
    if (f.dirs_scanned != (size_t)ks[j]) fprintf(stderr, "scanned %zu of %ld\n", f.dirs_scanned, ks[j]);
    /* Each keep: one new directory made (not timed), kept, the oldest removed. */
    double keep = 0;
    for (long i = 0; i < KEEPS; i++) {
      make_dir(logs, ks[j] + i, key);
      t0 = bench_cpu_s();
      altar__logs_keep(logs, &r, key, (double)time(NULL), NULL, NULL, &f);
      keep += bench_cpu_s() - t0;
      if (f.dirs_removed != 1) fprintf(stderr, "keep %ld removed %zu\n", i, f.dirs_removed);
    }
    keep /= KEEPS;
    if (!j) base = keep;
    printf("%10ld %12.1f %14.1f %8.2f %12.1f\n", ks[j], scan * 1e3, keep * 1e6, keep / base,
           altar__logs_index_footprint(&r) / 1024.0);
    altar__log_retention_clear(&r);
    bench_rm_tree(logs);
  }
  rmdir(root);
  return 0;
}
