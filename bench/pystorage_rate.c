/* Python storage adapters' cost, measured in one run against altar's C
 * `local` adapter (run by bench_pystorage.sh, which supplies the
 * interpreter). Both store files on the same disk, so what differs is the
 * bridge:
 *
 *   1. per call: exists() on a present file, M times, through the bridge to
 *      the example adapter (examples/python_storage, "dirstore") and on
 *      `local`;
 *   2. staging and collection: a file of S MiB fetched with as_local_file
 *      (what input staging does) and put back with upload (what output
 *      collection does), MiB/s, median of 3.
 *
 *   pystorage_rate [M [S]]   (default 2000 calls, 64 MiB) */
#include "altar/storage.h"

#include "util/bench_util.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what, const altar_error_t *err) { bench_die("pystorage_rate", what, err); }

static double per_call_us(altar_storage_t *s, const char *uri, int m) {
  altar_error_t err = {0};
  double t0 = bench_now_s();
  for (int i = 0; i < m; i++) {
    bool ex = false;
    if (altar_storage_exists(s, uri, &ex, &err) || !ex) die("exists", &err);
  }
  return (bench_now_s() - t0) * 1e6 / m;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* MiB/s of one as_local_file (+ a read of every byte, as a copy into the
 * data root would) or one upload of a local file of mib MiB; median of 3. */
static double mibs(altar_storage_t *s, const char *uri, const char *local, int mib, bool up) {
  double r[3];
  char buf[1 << 16];
  for (int k = 0; k < 3; k++) {
    altar_error_t err = {0};
    double t0 = bench_now_s();
    if (up) {
      if (altar_storage_upload(s, local, uri, &err)) die("upload", &err);
    } else {
      altar_local_file_t lf = {0};
      if (altar_storage_as_local_file(s, uri, &lf, &err)) die("as_local_file", &err);
      int fd = open(lf.path, O_RDONLY);
      while (fd >= 0 && read(fd, buf, sizeof buf) > 0) {}
      if (fd >= 0) close(fd);
      altar_local_file_release(&lf);
    }
    r[k] = mib / (bench_now_s() - t0);
  }
  qsort(r, 3, sizeof r[0], cmp);
  return r[1];
}

int main(int argc, char **argv) {
  int m = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 2000;
  int mib = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 64;
  const char *py = getenv("ALTAR_BENCH_PYTHON");
  if (m < 1 || mib < 1 || !py || !*py) {
    fprintf(stderr, "usage: ALTAR_BENCH_PYTHON=<venv python> pystorage_rate [M [MiB]] (see bench_pystorage.sh)\n");
    return 2;
  }
  char root[] = "/tmp/altar-bench-pystorage.XXXXXX";
  if (!mkdtemp(root)) return perror("mkdtemp"), 1;
  altar_error_t err = {0};
  if (altar_storage_register_builtin()) return 1;
  char cfg[1024];
  snprintf(cfg, sizeof cfg,
           "{\"python\": \"%s\", \"schemes\": [{\"scheme\": \"vault\", \"adapter\": \"dirstore\", \"options\": "
           "{\"root\": \"%s/vault\"}, \"line\": 0}]}",
           py, root);
  if (altar_storage_python_configure(cfg, NULL, &err) || altar_storage_python_start(&err)) die("configure", &err);
  altar_storage_t *vault = NULL, *local = NULL;
  if (altar_storage_open("vault", NULL, &vault, &err) || altar_storage_open("local", NULL, &local, &err))
    die("open", &err);

  /* The source file, written once; each adapter stores its own copy. */
  char src[128], lpath[128];
  snprintf(src, sizeof src, "%s/src.bin", root);
  snprintf(lpath, sizeof lpath, "%s/local/big.bin", root);
  FILE *f = fopen(src, "wb");
  char *chunk = malloc(1 << 20);
  for (int i = 0; i < (1 << 20); i++) chunk[i] = (char)(i * 131 + 7);
  for (int i = 0; f && i < mib; i++) fwrite(chunk, 1, 1 << 20, f);
  if (f) fclose(f);
  free(chunk);
  char ldir[128];
  snprintf(ldir, sizeof ldir, "%s/local", root);
  if (altar_storage_mkdirs(local, ldir, &err)) die("mkdirs", &err);
  if (altar_storage_upload(vault, src, "vault://b/big.bin", &err) || altar_storage_upload(local, src, lpath, &err))
    die("seed", &err);

  double c_py = per_call_us(vault, "vault://b/big.bin", m), c_local = per_call_us(local, lpath, m);
  double in_py = mibs(vault, "vault://b/big.bin", NULL, mib, false), in_local = mibs(local, lpath, NULL, mib, false);
  double out_py = mibs(vault, "vault://b/big.bin", src, mib, true), out_local = mibs(local, lpath, src, mib, true);

  printf("per call (exists), %d calls:\n", m);
  printf("  python dirstore, through the bridge   %8.1f us\n", c_py);
  printf("  local                                 %8.1f us   (bridge overhead %.1f us per call)\n", c_local,
         c_py - c_local);
  printf("%d MiB, median of 3, MiB/s:            python     local\n", mib);
  printf("  as_local_file + read (staging)        %8.0f  %8.0f\n", in_py, in_local);
  printf("  upload (output collection)            %8.0f  %8.0f\n", out_py, out_local);

  altar_storage_close(vault);
  altar_storage_close(local);
  altar_storage_python_configure(NULL, NULL, &err);
  bench_rm_tree(root);
  return 0;
}
