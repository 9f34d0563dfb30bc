/* Object-storage benchmark: upload and download of one object (256 MiB by
 * default) through the gs:// adapter against fake-gcs-server, the s3://
 * adapter against MinIO, and the http adapter's download of the gs object,
 * each against the curl command doing the same transfer to the same server
 * in the same run (the baseline): one media upload or one PUT, and for the
 * gs resumable row curl driving the same session chunk by chunk. Both
 * sides download the object curl uploaded. Each figure is the median of 3.
 * Servers: scripts/services/fake-gcs.sh and minio.sh (STORAGE_EMULATOR_HOST,
 * ALTAR_MINIO_ENDPOINT as in the tests). Usage: bench_storage [MiB]. */
#include "altar/storage.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUNS 3

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int run(char *const argv[]) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  extern char **environ;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc) return -1;
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static double median3(double a[RUNS]) {
  for (int i = 0; i < RUNS; i++)
    for (int j = i + 1; j < RUNS; j++)
      if (a[j] < a[i]) {
        double t = a[i];
        a[i] = a[j];
        a[j] = t;
      }
  return a[RUNS / 2];
}

static long mib;
static char file[512], out[512];

static void report(const char *what, double ours, double theirs) {
  double size = (double)mib;
  printf("%-40s altar %7.1f MiB/s   curl %7.1f MiB/s   altar/curl %.2f\n", what, size / ours, size / theirs,
         theirs / ours);
}

static off_t size_of(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 ? st.st_size : -1;
}

/* One upload through s and one with curl_up; then both download the object
 * curl uploaded (down_uri for s), so the downloads read the very same bytes
 * the same way off the server. */
typedef double (*curl_upload_fn)(void);

static int bench_pair(const char *label, altar_storage_t *s, const char *uri, const char *down_uri,
                      char *const *curl_up, curl_upload_fn curl_up_fn, char *const *curl_down) {
  double up[RUNS], down[RUNS], cup[RUNS], cdown[RUNS];
  altar_error_t err = {0};
  for (int i = 0; i < RUNS; i++) {
    double t = now();
    if (altar_storage_upload(s, file, uri, &err)) {
      fprintf(stderr, "%s upload: %s\n", label, err.msg);
      return -1;
    }
    up[i] = now() - t;
    t = now();
    if (curl_up_fn) {
      cup[i] = curl_up_fn();
      if (cup[i] < 0) {
        fprintf(stderr, "%s: curl upload failed\n", label);
        return -1;
      }
    } else {
      if (run(curl_up) != 0) {
        fprintf(stderr, "%s: curl upload failed\n", label);
        return -1;
      }
      cup[i] = now() - t;
    }
    altar_local_file_t lf = {0};
    t = now();
    if (altar_storage_as_local_file(s, down_uri, &lf, &err)) {
      fprintf(stderr, "%s download: %s\n", label, err.msg);
      return -1;
    }
    down[i] = now() - t;
    if (size_of(lf.path) != mib << 20) {
      fprintf(stderr, "%s download: wrong size\n", label);
      return -1;
    }
    altar_local_file_release(&lf);
    t = now();
    if (run(curl_down) != 0 || size_of(out) != mib << 20) {
      fprintf(stderr, "%s: curl download failed\n", label);
      return -1;
    }
    cdown[i] = now() - t;
    unlink(out);
  }
  char what[96];
  snprintf(what, sizeof what, "%s upload", label);
  report(what, median3(up), median3(cup));
  snprintf(what, sizeof what, "%s download", label);
  report(what, median3(down), median3(cdown));
  return 0;
}

/* curl doing a resumable upload the way the adapter does: start a session,
 * then one PUT per 16 MiB chunk with its Content-Range. The chunks are cut
 * into files before the clock starts. */
static char gs_ep[256];
static char chunk_dir[512];
static long n_chunks;
#define CHUNK (16L << 20)

static int cut_chunks(void) {
  snprintf(chunk_dir, sizeof chunk_dir, "%s.chunks", file);
  mkdir(chunk_dir, 0700);
  int in = open(file, O_RDONLY);
  char *buf = malloc(CHUNK);
  n_chunks = 0;
  for (long off = 0; off < mib << 20; off += CHUNK, n_chunks++) {
    ssize_t n = pread(in, buf, CHUNK, off);
    char p[600];
    snprintf(p, sizeof p, "%s/%ld", chunk_dir, n_chunks);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (n <= 0 || fd < 0 || write(fd, buf, (size_t)n) != n) return -1;
    close(fd);
  }
  free(buf);
  close(in);
  return 0;
}

static double curl_resumable(void) {
  char url[600], hdrs[600], len[64];
  snprintf(url, sizeof url, "%s/upload/storage/v1/b/altar-bench/o?uploadType=resumable&name=curl-object", gs_ep);
  snprintf(hdrs, sizeof hdrs, "%s/headers", chunk_dir);
  snprintf(len, sizeof len, "X-Upload-Content-Length: %ld", mib << 20);
  double t = now();
  char *start[] = {"curl",   "-sSf",
                   "-o",     "/dev/null",
                   "-D",     hdrs,
                   "-X",     "POST",
                   "-H",     "Content-Type: application/json",
                   "-H",     len,
                   "--data", "{\"name\":\"curl-object\"}",
                   url,      NULL};
  if (run(start) != 0) return -1;
  char session[2048] = "";
  FILE *f = fopen(hdrs, "r");
  char line[2048];
  while (f && fgets(line, sizeof line, f))
    if (!strncasecmp(line, "location:", 9)) sscanf(line + 9, " %2047s", session);
  if (f) fclose(f);
  if (!*session) return -1;
  for (long i = 0; i < n_chunks; i++) {
    long off = i * CHUNK, end = off + CHUNK > (mib << 20) ? (mib << 20) - 1 : off + CHUNK - 1;
    char range[128], data[700];
    snprintf(range, sizeof range, "Content-Range: bytes %ld-%ld/%ld", off, end, mib << 20);
    snprintf(data, sizeof data, "@%s/%ld", chunk_dir, i);
    char *put[] = {"curl", "-s", "-o",      "/dev/null",     "-X", "PUT",   "-H",
                   range,  "-H", "Expect:", "--data-binary", data, session, NULL};
    if (run(put) != 0) return -1;
  }
  return now() - t;
}

static void remove_chunks(void) {
  char p[600];
  for (long i = 0; i < n_chunks; i++) {
    snprintf(p, sizeof p, "%s/%ld", chunk_dir, i);
    unlink(p);
  }
  snprintf(p, sizeof p, "%s/headers", chunk_dir);
  unlink(p);
  rmdir(chunk_dir);
}

/* The http adapter only reads: its download against curl's, same URL. */
static int bench_http(const char *url, char *const *curl_down) {
  altar_storage_t *s;
  altar_error_t err = {0};
  if (altar_storage_open("http", NULL, &s, &err)) return -1;
  double down[RUNS], cdown[RUNS];
  for (int i = 0; i < RUNS; i++) {
    altar_local_file_t lf = {0};
    double t = now();
    if (altar_storage_as_local_file(s, url, &lf, &err) || size_of(lf.path) != mib << 20) {
      fprintf(stderr, "http download: %s\n", err.msg);
      return -1;
    }
    down[i] = now() - t;
    altar_local_file_release(&lf);
    t = now();
    if (run(curl_down) != 0) return -1;
    cdown[i] = now() - t;
    unlink(out);
  }
  report("http download (fake-gcs object)", median3(down), median3(cdown));
  altar_storage_close(s);
  return 0;
}

int main(int argc, char **argv) {
  char *end = NULL;
  mib = argc > 1 ? strtol(argv[1], &end, 10) : 256;
  if (mib <= 0 || mib > 4096 || (end && *end)) {
    fprintf(stderr, "usage: bench_storage [MiB 1..4096]\n");
    return 2;
  }
  setenv("no_proxy", "127.0.0.1,localhost", 1);
  const char *tmp = getenv("TMPDIR");
  tmp = tmp && *tmp ? tmp : "/tmp";
  snprintf(file, sizeof file, "%s/altar-bench-storage-%ld.bin", tmp, (long)getpid());
  snprintf(out, sizeof out, "%s/altar-bench-storage-%ld.out", tmp, (long)getpid());
  int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  char *chunk = malloc(1 << 20);
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < (1u << 20); i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    chunk[i] = (char)x;
  }
  for (long i = 0; i < mib; i++) {
    chunk[0] = (char)i;
    if (write(fd, chunk, 1 << 20) != 1 << 20) return 1;
  }
  close(fd);
  free(chunk);
  altar_storage_register_builtin();
  printf("bench_storage: %ld MiB object, median of %d runs, servers on 127.0.0.1\n", mib, RUNS);
  int rc = 0;

  /* gs:// against fake-gcs-server; curl does one media upload. */
  const char *emu = getenv("STORAGE_EMULATOR_HOST");
  char ep[256];
  snprintf(ep, sizeof ep, "%s", emu && *emu ? emu : "http://127.0.0.1:17310");
  setenv("STORAGE_EMULATOR_HOST", ep, 1);
  altar_storage_t *gs;
  altar_error_t err = {0};
  if (altar_storage_open("gs", NULL, &gs, &err)) {
    fprintf(stderr, "gs: %s\n", err.msg);
    return 1;
  }
  char up_url[512], down_url[512], data_arg[600];
  snprintf(up_url, sizeof up_url, "%s/upload/storage/v1/b/altar-bench/o?uploadType=media&name=curl-object", ep);
  snprintf(down_url, sizeof down_url, "%s/storage/v1/b/altar-bench/o/curl-object?alt=media", ep);
  snprintf(data_arg, sizeof data_arg, "@%s", file);
  char *gs_up[] = {"curl",    "-sSf",          "-X",     "POST", "-H", "Content-Type: application/octet-stream", "-H",
                   "Expect:", "--data-binary", data_arg, up_url, NULL};
  char *gs_down[] = {"curl", "-sSf", "-o", out, down_url, NULL};
  /* Resumable in 16 MiB chunks (the default above 8 MiB), against curl doing the same session. */
  snprintf(gs_ep, sizeof gs_ep, "%s", ep);
  if (cut_chunks()) return 1;
  if (bench_pair("gs resumable (fake-gcs-server)", gs, "gs://altar-bench/altar-object", "gs://altar-bench/curl-object",
                 NULL, curl_resumable, gs_down))
    rc = 1;
  remove_chunks();
  altar_storage_close(gs);
  /* The same transfer as curl's: one media upload (threshold above the size). */
  altar_strmap_t go = {0};
  altar_strmap_set(&go, "resumable_threshold", "5368709120");
  if (altar_storage_open("gs", &go, &gs, &err)) return 1;
  altar_strmap_clear(&go);
  if (!rc && bench_pair("gs media (fake-gcs-server)", gs, "gs://altar-bench/altar-object",
                        "gs://altar-bench/curl-object", gs_up, NULL, gs_down))
    rc = 1;
  altar_storage_close(gs);
  char http_url[512];
  snprintf(http_url, sizeof http_url, "%s/storage/v1/b/altar-bench/o/altar-object?alt=media", ep);
  char *http_down[] = {"curl", "-sSf", "-o", out, http_url, NULL};
  if (!rc && bench_http(http_url, http_down)) rc = 1;

  /* s3:// against MinIO; curl signs with --aws-sigv4 and sends one unsigned-payload PUT
   * (an "Expect:" header would be signed too, with a value curl never sends). */
  const char *mep = getenv("ALTAR_MINIO_ENDPOINT");
  const char *key = getenv("ALTAR_MINIO_ACCESS_KEY"), *sec = getenv("ALTAR_MINIO_SECRET_KEY");
  snprintf(ep, sizeof ep, "%s", mep && *mep ? mep : "http://127.0.0.1:17320");
  char user[300];
  snprintf(user, sizeof user, "%s:%s", key && *key ? key : "altar-test-key",
           sec && *sec ? sec : "altar-test-secret-0123456789");
  char *colon = strchr(user, ':');
  *colon = '\0';
  altar_strmap_t o = {0};
  altar_strmap_set(&o, "endpoint", ep);
  altar_strmap_set(&o, "access_key_id", user);
  altar_strmap_set(&o, "secret_access_key", colon + 1);
  *colon = ':';
  altar_storage_t *s3;
  if (altar_storage_open("s3", &o, &s3, &err)) {
    fprintf(stderr, "s3: %s\n", err.msg);
    return 1;
  }
  altar_strmap_clear(&o);
  char obj_url[512];
  snprintf(obj_url, sizeof obj_url, "%s/altar-bench/curl-object", ep);
  char *s3_up[] = {"curl",   "-sSf", "--aws-sigv4", "aws:amz:us-east-1:s3",
                   "--user", user,   "-H",          "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                   "-T",     file,   obj_url,       NULL};
  char *s3_down[] = {"curl",   "-sSf", "--aws-sigv4", "aws:amz:us-east-1:s3",
                     "--user", user,   "-H",          "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                     "-o",     out,    obj_url,       NULL};
  if (bench_pair("s3 (MinIO)", s3, "s3://altar-bench/altar-object", "s3://altar-bench/curl-object", s3_up, NULL,
                 s3_down))
    rc = 1;
  altar_storage_close(s3);
  /* What the download's MD5 check costs: the same without it. */
  altar_strmap_set(&o, "endpoint", ep);
  *colon = '\0';
  altar_strmap_set(&o, "access_key_id", user);
  altar_strmap_set(&o, "secret_access_key", colon + 1);
  *colon = ':';
  altar_strmap_set(&o, "checksum", "none");
  if (altar_storage_open("s3", &o, &s3, &err)) return 1;
  altar_strmap_clear(&o);
  if (!rc && bench_pair("s3 checksum=none (MinIO)", s3, "s3://altar-bench/altar-object", "s3://altar-bench/curl-object",
                        s3_up, NULL, s3_down))
    rc = 1;
  altar_storage_close(s3);
  unlink(file);
  unlink(out);
  return rc;
}
