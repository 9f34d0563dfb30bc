/* See storage_contract.h. */
#include "storage_contract.h"

#include "altar/plugin/backend.h"
#include "altar/digest.h"
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static bool writable(const altar_storage_fixture_t *fx) {
  return (altar_storage_caps(fx->s) & ALTAR_STORAGE_CAP_WRITE) != 0;
}

static void uri_of(const altar_storage_fixture_t *fx, const char *key, char *out, size_t cap) {
  snprintf(out, cap, "%s%s", fx->root, key);
}

/* Stores bytes at root+key: through the adapter, or the fixture's seed. */
static int put(const altar_storage_fixture_t *fx, const char *key, const void *data, size_t len) {
  if (fx->seed) return fx->seed(fx->ud, key, data, len);
  char u[1024];
  uri_of(fx, key, u, sizeof u);
  altar_error_t err = {0};
  int rc = altar_storage_write_bytes(fx->s, u, data, len, &err);
  if (rc) fprintf(stderr, "[%s] write %s: %s\n", fx->label, u, err.msg);
  return rc;
}

int altar_storage_file_digest(const char *path, char out[72]) { return altar_sha256_file(path, out, NULL) ? -1 : 0; }

/* A file of n pseudo-random bytes (a fixed seed: runs are comparable). */
static char *make_big_file(size_t n) {
  char *dir = altar_test_tmpdir("contract-big");
  size_t pl = strlen(dir) + 16;
  char *path = malloc(pl);
  snprintf(path, pl, "%s/big.bin", dir);
  free(dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) abort();
  unsigned char *chunk = malloc(1 << 20);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (size_t off = 0; off < n;) {
    size_t len = n - off < (1u << 20) ? n - off : (1u << 20);
    for (size_t i = 0; i < len; i++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      chunk[i] = (unsigned char)x;
    }
    if (write(fd, chunk, len) != (ssize_t)len) abort();
    off += len;
  }
  free(chunk);
  close(fd);
  return path;
}

static void remove_big_file(char *path) {
  unlink(path);
  char *slash = strrchr(path, '/');
  *slash = '\0';
  rmdir(path);
  free(path);
}

typedef struct listing {
  char paths[16][512];
  unsigned long long sizes[16];
  int n;
  int stop_after; /* 0: never */
} listing_t;

static int on_entry(const altar_storage_entry_t *e, void *ud) {
  listing_t *l = ud;
  if (l->n < 16) {
    snprintf(l->paths[l->n], sizeof l->paths[l->n], "%s", e->path);
    l->sizes[l->n] = e->size;
  }
  l->n++;
  return l->stop_after && l->n >= l->stop_after ? 7 : 0;
}

/* ---- round trips --------------------------------------------------------------------- */

void altar_storage_contract_roundtrip(const altar_storage_fixture_t *fx) {
  altar_error_t err = {0};
  char u[1024];
  /* text */
  CU_ASSERT_EQUAL_FATAL(put(fx, "c/hello.txt", "hello\nstorage\n", 14), 0);
  uri_of(fx, "c/hello.txt", u, sizeof u);
  char *text = NULL;
  size_t len = 0;
  CU_ASSERT_EQUAL(altar_storage_read_text(fx->s, u, &text, &len, &err), 0);
  CU_ASSERT(text && len == 14 && !strcmp(text, "hello\nstorage\n"));
  free(text);
  bool ex = false;
  CU_ASSERT_EQUAL(altar_storage_exists(fx->s, u, &ex, &err), 0);
  CU_ASSERT_TRUE(ex);
  uri_of(fx, "c/missing.txt", u, sizeof u);
  ex = true;
  CU_ASSERT_EQUAL(altar_storage_exists(fx->s, u, &ex, &err), 0);
  CU_ASSERT_FALSE(ex);

  /* binary bytes, replaced */
  static const unsigned char bin[] = {0, 1, 2, 0xff, 0, 'x', '\r', '\n'};
  CU_ASSERT_EQUAL(put(fx, "c/bin.dat", "old", 3), 0);
  CU_ASSERT_EQUAL(put(fx, "c/bin.dat", bin, sizeof bin), 0);
  uri_of(fx, "c/bin.dat", u, sizeof u);
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL(altar_storage_read_bytes(fx->s, u, &b, &err), 0);
  CU_ASSERT(b.len == sizeof bin && !memcmp(b.data, bin, sizeof bin));
  altar_buf_free(&b);
  CU_ASSERT_EQUAL(altar_storage_read_text(fx->s, u, &text, NULL, &err), ALTAR_EDECODE);

  /* an empty file */
  CU_ASSERT_EQUAL(put(fx, "c/empty", "", 0), 0);
  uri_of(fx, "c/empty", u, sizeof u);
  CU_ASSERT_EQUAL(altar_storage_read_bytes(fx->s, u, &b, &err), 0);
  CU_ASSERT_EQUAL(b.len, 0);
  altar_buf_free(&b);

  /* missing */
  uri_of(fx, "c/missing.txt", u, sizeof u);
  altar_error_clear(&err);
  CU_ASSERT_EQUAL(altar_storage_read_bytes(fx->s, u, &b, &err), ALTAR_ENOTFOUND);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "missing.txt"));
  CU_ASSERT_EQUAL(b.len, 0);
  altar_local_file_t lf = {0};
  CU_ASSERT_EQUAL(altar_storage_as_local_file(fx->s, u, &lf, &err), ALTAR_ENOTFOUND);
  CU_ASSERT_PTR_NULL(lf.path);

  /* CSV through the defaults; writes, mkdirs, upload */
  uri_of(fx, "c/rows.tsv", u, sizeof u);
  altar_strmap_t row = {0};
  altar_strmap_set(&row, "id", "1");
  altar_strmap_set(&row, "note", "tab\there");
  if (writable(fx)) {
    CU_ASSERT_EQUAL(altar_storage_write_csv(fx->s, u, &row, 1, '\t', NULL, 0, &err), 0);
    altar_csv_t csv;
    CU_ASSERT_EQUAL_FATAL(altar_storage_read_csv(fx->s, u, '\t', NULL, 0, &csv, &err), 0);
    CU_ASSERT(csv.n_rows == 1 && altar_strmap_equal(&csv.rows[0], &row));
    altar_csv_clear(&csv);
    uri_of(fx, "c/dir/sub", u, sizeof u);
    CU_ASSERT_EQUAL(altar_storage_mkdirs(fx->s, u, &err), 0);
  } else {
    CU_ASSERT_EQUAL(altar_storage_write_csv(fx->s, u, &row, 1, '\t', NULL, 0, &err), ALTAR_ENOTSUP);
    CU_ASSERT_EQUAL(altar_storage_write_bytes(fx->s, u, "x", 1, &err), ALTAR_ENOTSUP);
    CU_ASSERT_EQUAL(altar_storage_mkdirs(fx->s, u, &err), ALTAR_ENOTSUP);
    CU_ASSERT_EQUAL(altar_storage_upload(fx->s, "/etc/hostname", u, &err), ALTAR_ENOTSUP);
  }
  altar_strmap_clear(&row);

  /* a large file, streamed both ways, compared by digest */
  char *big = make_big_file(fx->big_size);
  char want[72], got[72];
  CU_ASSERT_EQUAL_FATAL(altar_storage_file_digest(big, want), 0);
  uri_of(fx, "c/big.bin", u, sizeof u);
  if (writable(fx)) {
    int rc = altar_storage_upload(fx->s, big, u, &err);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc) fprintf(stderr, "[%s] upload: %s\n", fx->label, err.msg);
  } else {
    size_t n = 0;
    char *data = altar_test_read_file(big, &n);
    CU_ASSERT_EQUAL(put(fx, "c/big.bin", data, n), 0);
    free(data);
  }
  CU_ASSERT_EQUAL(altar_storage_as_local_file(fx->s, u, &lf, &err), 0);
  if (lf.path) {
    CU_ASSERT_EQUAL(altar_storage_file_digest(lf.path, got), 0);
    CU_ASSERT_STRING_EQUAL(got, want);
    char *keep = strdup(lf.path);
    altar_local_file_release(&lf);
    struct stat st;
    if (altar_storage_caps(fx->s) & ALTAR_STORAGE_CAP_LOCAL) {
      CU_ASSERT_EQUAL(stat(keep, &st), 0); /* the file itself, never deleted */
    } else {
      CU_ASSERT_NOT_EQUAL(stat(keep, &st), 0); /* the temp copy is gone */
    }
    free(keep);
  }
  CU_ASSERT_EQUAL(altar_storage_read_bytes(fx->s, u, &b, &err), 0);
  CU_ASSERT_EQUAL(b.len, fx->big_size);
  if (b.len == fx->big_size) {
    altar_sha256_bytes(b.data, b.len, got, NULL);
    CU_ASSERT_STRING_EQUAL(got, want);
  }
  altar_buf_free(&b);
  remove_big_file(big);

  /* listing, page after page */
  listing_t l = {0};
  uri_of(fx, "l/", u, sizeof u);
  if (altar_storage_caps(fx->s) & ALTAR_STORAGE_CAP_LIST) {
    const char *names[] = {"l/a", "l/b/c", "l/d", "l/e", "l/f"};
    for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(put(fx, names[i], "12345", (size_t)i), 0);
    CU_ASSERT_EQUAL(put(fx, "lx", "not under l/", 12), 0);
    CU_ASSERT_EQUAL(altar_storage_list(fx->s, u, on_entry, &l, &err), 0);
    CU_ASSERT_EQUAL(l.n, 5);
    for (int i = 0; i < 5 && i < l.n; i++) {
      char w[1024];
      uri_of(fx, names[i], w, sizeof w);
      CU_ASSERT_STRING_EQUAL(l.paths[i], w);
      CU_ASSERT_EQUAL(l.sizes[i], (unsigned long long)i);
    }
    listing_t stop = {.stop_after = 2};
    CU_ASSERT_EQUAL(altar_storage_list(fx->s, u, on_entry, &stop, &err), 7);
    CU_ASSERT_EQUAL(stop.n, 2);
    listing_t none = {0};
    uri_of(fx, "nothing-here/", u, sizeof u);
    CU_ASSERT_EQUAL(altar_storage_list(fx->s, u, on_entry, &none, &err), 0);
    CU_ASSERT_EQUAL(none.n, 0);
  } else {
    CU_ASSERT_EQUAL(altar_storage_list(fx->s, u, on_entry, &l, &err), ALTAR_ENOTSUP);
    CU_ASSERT_EQUAL(l.n, 0);
  }

  /* deleting: gone afterwards, and deleting what is gone is no error */
  uri_of(fx, "del/one", u, sizeof u);
  if (altar_storage_caps(fx->s) & ALTAR_STORAGE_CAP_DELETE) {
    bool there = true;
    CU_ASSERT_EQUAL(put(fx, "del/one", "bye", 3), 0);
    CU_ASSERT_EQUAL(put(fx, "del/two", "stay", 4), 0);
    CU_ASSERT_EQUAL(altar_storage_delete(fx->s, u, &err), 0);
    CU_ASSERT_EQUAL(altar_storage_exists(fx->s, u, &there, &err), 0);
    CU_ASSERT_FALSE(there);
    CU_ASSERT_EQUAL(altar_storage_delete(fx->s, u, &err), 0);
    uri_of(fx, "del/two", u, sizeof u);
    CU_ASSERT_EQUAL(altar_storage_exists(fx->s, u, &there, &err), 0);
    CU_ASSERT_TRUE(there); /* only the file named */
  } else {
    CU_ASSERT_EQUAL(altar_storage_delete(fx->s, u, &err), ALTAR_ENOTSUP);
  }
}

/* ---- bad input -------------------------------------------------------------------------- */

/* Every operation on uri fails with code and a message holding needle. */
static void refused_everywhere(const altar_storage_fixture_t *fx, const char *uri, int code, const char *needle) {
  altar_error_t err = {0};
  altar_buf_t b = {0};
  bool ex = false;
  altar_local_file_t lf = {0};
  CU_ASSERT_EQUAL(altar_storage_read_bytes(fx->s, uri, &b, &err), code);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, needle));
  CU_ASSERT_EQUAL(altar_storage_exists(fx->s, uri, &ex, &err), code);
  CU_ASSERT_FALSE(ex);
  CU_ASSERT_EQUAL(altar_storage_as_local_file(fx->s, uri, &lf, &err), code);
  CU_ASSERT_PTR_NULL(lf.path);
  if (writable(fx)) {
    CU_ASSERT_EQUAL(altar_storage_write_bytes(fx->s, uri, "x", 1, &err), code);
    CU_ASSERT_EQUAL(altar_storage_upload(fx->s, "/etc/hostname", uri, &err), code);
  }
  CU_ASSERT_EQUAL(b.len, 0);
  altar_buf_free(&b);
}

void altar_storage_contract_bad_input(const altar_storage_fixture_t *fx) {
  altar_error_t err = {0};
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL(altar_storage_read_bytes(fx->s, "", &b, &err), ALTAR_EINVAL);
  if (fx->wrong_scheme_uri) refused_everywhere(fx, fx->wrong_scheme_uri, ALTAR_EINVAL, "");
  if (fx->no_bucket_uri) refused_everywhere(fx, fx->no_bucket_uri, ALTAR_EINVAL, "bucket");
  if (fx->escaping_uri) refused_everywhere(fx, fx->escaping_uri, ALTAR_EPATH, "");
  if (writable(fx)) {
    char u[1024];
    uri_of(fx, "c/from-nowhere", u, sizeof u);
    CU_ASSERT_EQUAL(altar_storage_upload(fx->s, "/nonexistent/altar/file", u, &err), ALTAR_ENOTFOUND);
    bool ex = true;
    CU_ASSERT_EQUAL(altar_storage_exists(fx->s, u, &ex, &err), 0);
    CU_ASSERT_FALSE(ex); /* nothing was created */
  }
  altar_buf_free(&b);
}

/* ---- faults ------------------------------------------------------------------------------- */

void altar_storage_fault_handler(int fd, const altar_test_req_t *rq, void *ud) {
  (void)ud;
  const char *t = rq->target;
  bool head = !strcmp(rq->method, "HEAD");
  if (strstr(t, "fdrop")) return; /* closed with no answer */
  if (strstr(t, "f403")) {
    static const char body[] = "<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code><Message>Access "
                               "Denied.</Message></Error>";
    altar_test_mock_respond(fd, 403, NULL, body, head ? 0 : sizeof body - 1);
    return;
  }
  if (strstr(t, "ftrunc")) {
    static const char hdr[] = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n";
    char half[500];
    memset(half, 'z', sizeof half);
    altar_test_mock_send(fd, hdr, sizeof hdr - 1);
    if (!head) altar_test_mock_send(fd, half, sizeof half);
    return;
  }
  if (strstr(t, "fbadsum")) {
    altar_test_mock_respond(fd, 200,
                            "X-Goog-Hash: crc32c=AAAAAA==,md5=AAAAAAAAAAAAAAAAAAAAAA==\r\n"
                            "ETag: \"00000000000000000000000000000000\"\r\n",
                            "hello world", head ? 0 : 11);
    return;
  }
  altar_test_mock_respond(fd, 404, NULL, "", 0);
}

void altar_storage_contract_faults(const altar_storage_fixture_t *fx) {
  CU_ASSERT_PTR_NOT_NULL_FATAL(fx->faulty);
  altar_storage_t *s = fx->faulty;
  altar_error_t err = {0};
  altar_buf_t b = {0};
  altar_local_file_t lf = {0};
  bool ex = true;
  char u[1024];

  snprintf(u, sizeof u, "%sf404", fx->fault_root);
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s, u, &b, &err), ALTAR_ENOTFOUND);
  CU_ASSERT_EQUAL(altar_storage_exists(s, u, &ex, &err), 0);
  CU_ASSERT_FALSE(ex);

  snprintf(u, sizeof u, "%sf403", fx->fault_root);
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s, u, &b, &err), ALTAR_ESTORAGE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "403"));
  CU_ASSERT_FALSE(err.retriable);
  ex = true;
  CU_ASSERT_EQUAL(altar_storage_exists(s, u, &ex, &err), ALTAR_ESTORAGE); /* denied is not "missing" */
  CU_ASSERT_FALSE(ex);

  snprintf(u, sizeof u, "%sftrunc", fx->fault_root);
  altar_error_clear(&err);
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s, u, &b, &err), ALTAR_ESTORAGE);
  CU_ASSERT_TRUE(err.retriable);
  CU_ASSERT_EQUAL(b.len, 0); /* half a file never reaches the caller */
  CU_ASSERT_EQUAL(altar_storage_as_local_file(s, u, &lf, &err), ALTAR_ESTORAGE);
  CU_ASSERT_PTR_NULL(lf.path);

  snprintf(u, sizeof u, "%sfdrop", fx->fault_root);
  altar_error_clear(&err);
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s, u, &b, &err), ALTAR_ESTORAGE);
  CU_ASSERT_TRUE(err.retriable);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "127.0.0.1"));
  altar_error_clear(&err);
  CU_ASSERT_EQUAL(altar_storage_exists(s, u, &ex, &err), ALTAR_ESTORAGE);
  CU_ASSERT_TRUE(err.retriable);
  if (writable(fx)) {
    altar_error_clear(&err);
    CU_ASSERT_NOT_EQUAL(altar_storage_write_bytes(s, u, "payload", 7, &err), 0);
    CU_ASSERT_TRUE(err.retriable);
    if (!err.retriable) fprintf(stderr, "[%s] write to a dropping server: %s\n", fx->label, err.msg);
  }

  snprintf(u, sizeof u, "%sfbadsum", fx->fault_root);
  int rc = altar_storage_read_bytes(s, u, &b, &err);
  if (fx->checks_sums) {
    CU_ASSERT_EQUAL(rc, ALTAR_EINTEGRITY);
    CU_ASSERT_EQUAL(b.len, 0);
    CU_ASSERT_EQUAL(altar_storage_as_local_file(s, u, &lf, &err), ALTAR_EINTEGRITY);
    CU_ASSERT_PTR_NULL(lf.path);
  } else {
    CU_ASSERT_EQUAL(rc, 0); /* no checksum to compare: the bytes as sent */
    CU_ASSERT_EQUAL(b.len, 11);
  }
  altar_buf_free(&b);
}

/* ---- through a backend ------------------------------------------------------------------------- */

void altar_storage_contract_staging(const altar_storage_fixture_t *fx) {
  char *root = altar_test_tmpdir("contract-stage");
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "data_root", root);
  altar_error_t berr = {0};
  altar_backend_t *be = altar_backend_open(&altar_backend_process_ops, &cfg, &berr);
  altar_strmap_clear(&cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_error_t err = {0};

  /* An input: 3 MiB and a bit, so it is streamed in more than one piece. */
  size_t n = 3 * 1024 * 1024 + 17;
  unsigned char *data = malloc(n);
  for (size_t i = 0; i < n; i++) data[i] = (unsigned char)(i * 31 + i / 4096);
  char digest[72];
  altar_sha256_bytes(data, n, digest, NULL);
  CU_ASSERT_EQUAL_FATAL(put(fx, "stage/in.bin", data, n), 0);
  char u[1024];
  uri_of(fx, "stage/in.bin", u, sizeof u);
  altar_transfer_t in = {.uri = u, .logical_path = "models/m1/in.bin", .digest = digest};
  int rc = altar_backend_stage_inputs(be, &in, 1, &err);
  CU_ASSERT_EQUAL(rc, 0);
  if (rc) fprintf(stderr, "[%s] stage: %s\n", fx->label, err.msg);
  char dst[1200], got[72] = "";
  snprintf(dst, sizeof dst, "%s/models/m1/in.bin", root);
  CU_ASSERT_EQUAL(altar_storage_file_digest(dst, got), 0);
  CU_ASSERT_STRING_EQUAL(got, digest);

  /* A digest the bytes do not have: refused, and no copy is left to read. */
  char wrong[72];
  altar_sha256_bytes("something else", 14, wrong, NULL);
  altar_transfer_t bad = {.uri = u, .logical_path = "models/m1/bad.bin", .digest = wrong};
  CU_ASSERT_EQUAL(altar_backend_stage_inputs(be, &bad, 1, &err), ALTAR_EINTEGRITY);
  snprintf(dst, sizeof dst, "%s/models/m1/bad.bin", root);
  struct stat st;
  CU_ASSERT_NOT_EQUAL(stat(dst, &st), 0);

  /* A missing input names itself. */
  uri_of(fx, "stage/absent.bin", u, sizeof u);
  altar_transfer_t gone = {.uri = u, .logical_path = "models/m1/absent.bin"};
  CU_ASSERT_EQUAL(altar_backend_stage_inputs(be, &gone, 1, &err), ALTAR_ENOTFOUND);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "inputs[0]"));

  /* An output the task wrote goes back to storage, byte for byte. */
  snprintf(dst, sizeof dst, "%s/jobs/j1/out.bin", root);
  char jdir[1200];
  snprintf(jdir, sizeof jdir, "%s/jobs", root);
  mkdir(jdir, 0755);
  snprintf(jdir, sizeof jdir, "%s/jobs/j1", root);
  mkdir(jdir, 0755);
  altar_test_write_file(dst, data + 5, n - 5);
  char out_digest[72];
  altar_sha256_bytes(data + 5, n - 5, out_digest, NULL);
  uri_of(fx, "stage/out.bin", u, sizeof u);
  altar_transfer_t out = {.uri = u, .logical_path = "jobs/j1/out.bin"};
  if (writable(fx)) {
    rc = altar_backend_collect_outputs(be, &out, 1, &err);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc) fprintf(stderr, "[%s] collect: %s\n", fx->label, err.msg);
    altar_buf_t back = {0};
    CU_ASSERT_EQUAL(altar_storage_read_bytes(fx->s, u, &back, &err), 0);
    char back_digest[72] = "";
    if (back.len) altar_sha256_bytes(back.data, back.len, back_digest, NULL);
    CU_ASSERT_STRING_EQUAL(back_digest, out_digest);
    altar_buf_free(&back);
  } else {
    CU_ASSERT_EQUAL(altar_backend_collect_outputs(be, &out, 1, &err), ALTAR_ENOTSUP);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "outputs[0]"));
  }
  free(data);
  altar_backend_close(be);
  altar_test_rmtree(root);
  free(root);
}

/* ---- what the object-store tests share ------------------------------------------------- */

void altar_storage_fixture_object_store(altar_storage_fixture_t *fx, const char *scheme, const char *other_scheme,
                                        altar_storage_t *s, altar_storage_t *faulty, const char *server,
                                        const char *address, const char *variable, const char *script) {
  fx->label = scheme;
  fx->s = s;
  snprintf(fx->root, sizeof fx->root, "%s://altar-test/run-%ld-%ld/", scheme, (long)getpid(), (long)time(NULL));
  static char no_bucket[32], escaping[64], wrong_scheme[64];
  snprintf(no_bucket, sizeof no_bucket, "%s:///key", scheme);
  snprintf(escaping, sizeof escaping, "%s://altar-test/a/../other", scheme);
  snprintf(wrong_scheme, sizeof wrong_scheme, "%s://altar-test/x", other_scheme);
  fx->no_bucket_uri = no_bucket;
  fx->escaping_uri = escaping;
  fx->wrong_scheme_uri = wrong_scheme;
  fx->faulty = faulty;
  snprintf(fx->fault_root, sizeof fx->fault_root, "%s://altar-test/", scheme);
  fx->checks_sums = true;
  fx->server = server;
  char probe[64];
  snprintf(probe, sizeof probe, "%s://altar-test/probe", scheme);
  altar_error_t err = {0};
  bool ex;
  fx->server_ok = altar_storage_exists(s, probe, &ex, &err) == 0;
  if (!fx->server_ok)
    fprintf(stderr, "FAIL: %s does not answer at %s (%s); start it with %s start: %s\n", server, address, variable,
            script, err.msg);
}

void altar_storage_need_server(const altar_storage_fixture_t *fx, const char *file, unsigned line) {
  if (fx->server_ok) return;
  char msg[200];
  snprintf(msg, sizeof msg, "%s unreachable (see the message above)", fx->server ? fx->server : "the server");
  CU_assertImplementation(CU_FALSE, line, msg, file, "", CU_TRUE);
}

/* CUnit tests take no arguments: the one fixture of this test program. */
static const altar_storage_fixture_t *contract_fx;

static void contract_roundtrip(void) {
  ALTAR_STORAGE_NEED_SERVER(contract_fx);
  altar_storage_contract_roundtrip(contract_fx);
}
static void contract_bad_input(void) {
  ALTAR_STORAGE_NEED_SERVER(contract_fx);
  altar_storage_contract_bad_input(contract_fx);
}
static void contract_faults(void) { altar_storage_contract_faults(contract_fx); }
static void contract_staging(void) {
  ALTAR_STORAGE_NEED_SERVER(contract_fx);
  altar_storage_contract_staging(contract_fx);
}

void altar_storage_contract_add(CU_pSuite suite, const altar_storage_fixture_t *fx) {
  contract_fx = fx;
  CU_add_test(suite, "test_contract_roundtrip", contract_roundtrip);
  CU_add_test(suite, "test_contract_bad_input", contract_bad_input);
  CU_add_test(suite, "test_contract_faults", contract_faults);
  CU_add_test(suite, "test_contract_staging", contract_staging);
}
