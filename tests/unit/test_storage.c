/* Storage: the local adapter (every method), CSV, the text reader/writer, the
 * defaults a minimal adapter gets at open, and the http adapter against a
 * real HTTP server on 127.0.0.1. */
#include "altar/registry.h"
#include "altar/plugin/storage.h"
#include "httpd.h"
#include "storage_contract.h"
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *dir;
static altar_storage_t *local;

static char *pathf(const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (!p) abort();
  snprintf(p, n, "%s/%s", dir, name);
  return p;
}

static int setup(void) {
  dir = altar_test_tmpdir("storage");
  if (altar_storage_register_builtin()) return -1;
  altar_error_t err = {0};
  if (altar_storage_open("local", NULL, &local, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return -1;
  }
  return 0;
}

static int teardown(void) {
  altar_storage_close(local);
  altar_test_rmtree(dir);
  free(dir);
  return 0;
}

/* ---- local -------------------------------------------------------------------- */

static void test_local_text_bytes(void) {
  altar_error_t err = {0};
  char *p = pathf("deep/er/a.txt"); /* parents are created */
  CU_ASSERT_EQUAL(altar_storage_write_text(local, p, "hello\nworld\n", &err), 0);
  char *text = NULL;
  size_t len = 0;
  CU_ASSERT_EQUAL(altar_storage_read_text(local, p, &text, &len, &err), 0);
  CU_ASSERT_STRING_EQUAL(text, "hello\nworld\n");
  CU_ASSERT_EQUAL(len, 12);
  free(text);
  /* Replacing leaves no temp files behind. */
  CU_ASSERT_EQUAL(altar_storage_write_text(local, p, "v2", &err), 0);
  char *dd = pathf("deep/er");
  DIR *dp = opendir(dd);
  CU_ASSERT_PTR_NOT_NULL_FATAL(dp);
  size_t entries = 0;
  for (struct dirent *de; (de = readdir(dp));) entries += de->d_name[0] != '.' || strlen(de->d_name) > 2;
  closedir(dp);
  CU_ASSERT_EQUAL(entries, 1);
  free(dd);

  static const unsigned char bin[] = {0, 1, 2, 0xff, 0, 'x'};
  char *b = pathf("bin.dat");
  CU_ASSERT_EQUAL(altar_storage_write_bytes(local, b, bin, sizeof bin, &err), 0);
  altar_buf_t buf = {0};
  CU_ASSERT_EQUAL(altar_storage_read_bytes(local, b, &buf, &err), 0);
  CU_ASSERT_EQUAL(buf.len, sizeof bin);
  CU_ASSERT(buf.len == sizeof bin && memcmp(buf.data, bin, sizeof bin) == 0);
  altar_buf_free(&buf);
  CU_ASSERT_EQUAL(altar_storage_read_text(local, b, &text, NULL, &err), ALTAR_EDECODE);
  CU_ASSERT_PTR_NULL(text);

  char *m = pathf("missing.txt");
  CU_ASSERT_EQUAL(altar_storage_read_bytes(local, m, &buf, &err), ALTAR_ENOTFOUND);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "missing.txt"));
  CU_ASSERT_EQUAL(altar_storage_read_bytes(local, dir, &buf, &err), ALTAR_EINVAL);
  altar_buf_free(&buf);
  free(m);
  free(b);
  free(p);
}

static void test_local_uris_exists_mkdirs(void) {
  altar_error_t err = {0};
  char *p = pathf("sp ace.txt");
  altar_test_write_file(p, "x", 1);
  char uri[4200];
  snprintf(uri, sizeof uri, "file://%s", p);
  char *sp = strstr(uri, " ");
  CU_ASSERT_FATAL(sp != NULL);
  /* file:// with the space escaped as %20 */
  char esc[4300];
  snprintf(esc, sizeof esc, "%.*s%%20%s", (int)(sp - uri), uri, sp + 1);
  bool ex = false;
  CU_ASSERT_EQUAL(altar_storage_exists(local, esc, &ex, &err), 0);
  CU_ASSERT_TRUE(ex);
  snprintf(uri, sizeof uri, "file://localhost%s", p);
  CU_ASSERT_EQUAL(altar_storage_exists(local, uri, &ex, &err), 0);
  CU_ASSERT_TRUE(ex);
  CU_ASSERT_EQUAL(altar_storage_exists(local, p, &ex, &err), 0);
  CU_ASSERT_TRUE(ex);
  char *m = pathf("nope");
  CU_ASSERT_EQUAL(altar_storage_exists(local, m, &ex, &err), 0);
  CU_ASSERT_FALSE(ex);
  CU_ASSERT_EQUAL(altar_storage_exists(local, "file://otherhost/x", &ex, &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_storage_exists(local, "gs://bucket/x", &ex, &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_storage_exists(local, "file:///a%2", &ex, &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_storage_exists(local, "file:///a%00b", &ex, &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_storage_exists(local, "", &ex, &err), ALTAR_EINVAL);

  char *d = pathf("m1/m2/m3");
  CU_ASSERT_EQUAL(altar_storage_mkdirs(local, d, &err), 0);
  CU_ASSERT_EQUAL(altar_storage_mkdirs(local, d, &err), 0); /* exists: fine */
  struct stat st;
  CU_ASSERT(stat(d, &st) == 0 && S_ISDIR(st.st_mode));
  CU_ASSERT_EQUAL(altar_storage_mkdirs(local, p, &err), ALTAR_EEXIST); /* a file is in the way */
  free(d);
  free(m);
  free(p);
}

static void test_local_upload(void) {
  altar_error_t err = {0};
  /* Bigger than one copy chunk. */
  size_t n = 300000;
  char *data = malloc(n);
  for (size_t i = 0; i < n; i++) data[i] = (char)(i % 251);
  char *src = pathf("up-src.bin");
  altar_test_write_file(src, data, n);
  chmod(src, 0640);
  char *dst = pathf("up/dst.bin");
  CU_ASSERT_EQUAL(altar_storage_upload(local, src, dst, &err), 0);
  size_t got = 0;
  char *back = altar_test_read_file(dst, &got);
  CU_ASSERT_EQUAL(got, n);
  CU_ASSERT(back && got == n && memcmp(back, data, n) == 0);
  free(back);
  struct stat ss, ds;
  stat(src, &ss);
  stat(dst, &ds);
  CU_ASSERT_EQUAL(ds.st_mode & 0777, 0640);
  CU_ASSERT_EQUAL(ds.st_mtim.tv_sec, ss.st_mtim.tv_sec); /* times kept, like cp -p */

  /* Into a directory: under the source's name. */
  char *updir = pathf("up");
  CU_ASSERT_EQUAL(altar_storage_copy_from_local(local, src, updir, &err), 0);
  char *named = pathf("up/up-src.bin");
  CU_ASSERT_EQUAL(access(named, F_OK), 0);

  /* Same file: nothing happens (no error, no rewrite: the inode stays). */
  struct stat before, after;
  stat(src, &before);
  CU_ASSERT_EQUAL(altar_storage_copy_from_local(local, src, src, &err), 0);
  CU_ASSERT_EQUAL(altar_storage_upload(local, src, src, &err), 0);
  stat(src, &after);
  CU_ASSERT_EQUAL(before.st_ino, after.st_ino);
  CU_ASSERT_EQUAL(before.st_ctim.tv_nsec, after.st_ctim.tv_nsec);
  /* ...also through a symlink and a hard link to it. */
  char *ln = pathf("up-link");
  CU_ASSERT_EQUAL(symlink(src, ln), 0);
  CU_ASSERT_EQUAL(altar_storage_copy_from_local(local, src, ln, &err), 0);
  struct stat lst;
  CU_ASSERT_EQUAL(lstat(ln, &lst), 0);
  CU_ASSERT(S_ISLNK(lst.st_mode)); /* not replaced by a copy */
  char *hl = pathf("up-hard");
  CU_ASSERT_EQUAL(link(src, hl), 0);
  CU_ASSERT_EQUAL(altar_storage_copy_from_local(local, hl, src, &err), 0);
  stat(src, &after);
  CU_ASSERT_EQUAL(before.st_ino, after.st_ino);
  back = altar_test_read_file(src, &got);
  CU_ASSERT(back && got == n && memcmp(back, data, n) == 0);
  free(back);

  char *m = pathf("no-such-src");
  CU_ASSERT_EQUAL(altar_storage_upload(local, m, dst, &err), ALTAR_ENOTFOUND);
  CU_ASSERT_EQUAL(altar_storage_upload(local, dir, dst, &err), ALTAR_EINVAL);
  free(m);
  free(hl);
  free(ln);
  free(named);
  free(updir);
  free(dst);
  free(src);
  free(data);
}

static void test_local_as_local_file(void) {
  altar_error_t err = {0};
  char *p = pathf("alf.txt");
  altar_test_write_file(p, "abc", 3);
  altar_local_file_t lf = {0};
  CU_ASSERT_EQUAL(altar_storage_as_local_file(local, p, &lf, &err), 0);
  CU_ASSERT_STRING_EQUAL(lf.path, p); /* unchanged */
  altar_local_file_release(&lf);
  CU_ASSERT_PTR_NULL(lf.path);
  CU_ASSERT_EQUAL(access(p, F_OK), 0); /* never deleted */
  altar_local_file_release(&lf);       /* twice is fine */
  char uri[4200];
  snprintf(uri, sizeof uri, "file://%s", p);
  CU_ASSERT_EQUAL(altar_storage_as_local_file(local, uri, &lf, &err), 0);
  CU_ASSERT_STRING_EQUAL(lf.path, p);
  altar_local_file_release(&lf);
  char *m = pathf("alf-missing");
  CU_ASSERT_EQUAL(altar_storage_as_local_file(local, m, &lf, &err), ALTAR_ENOTFOUND);
  free(m);
  free(p);
}

/* ---- CSV ------------------------------------------------------------------------ */

static void csv_roundtrip(char delim, const char *name) {
  altar_error_t err = {0};
  altar_strmap_t rows[3] = {0};
  altar_strmap_set(&rows[0], "id", "1");
  altar_strmap_set(&rows[0], "name", "plain");
  altar_strmap_set(&rows[0], "note", "has,comma");
  altar_strmap_set(&rows[1], "id", "2");
  altar_strmap_set(&rows[1], "name", "tab\there");
  altar_strmap_set(&rows[1], "note", "say \"hi\"\nnext line");
  altar_strmap_set(&rows[2], "id", "3");
  altar_strmap_set(&rows[2], "name", ""); /* note missing: written empty */
  const char *cols[] = {"id", "name", "note"};
  char *p = pathf(name);
  CU_ASSERT_EQUAL(altar_storage_write_csv(local, p, rows, 3, delim, cols, 3, &err), 0);
  altar_csv_t csv;
  CU_ASSERT_EQUAL_FATAL(altar_storage_read_csv(local, p, delim, NULL, 0, &csv, &err), 0);
  CU_ASSERT_EQUAL(csv.n_fields, 3);
  CU_ASSERT_STRING_EQUAL(csv.fields[2], "note");
  CU_ASSERT_EQUAL_FATAL(csv.n_rows, 3);
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&csv.rows[0], "note"), "has,comma");
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&csv.rows[1], "name"), "tab\there");
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&csv.rows[1], "note"), "say \"hi\"\nnext line");
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&csv.rows[2], "note"), "");
  CU_ASSERT_TRUE(altar_strmap_equal(&csv.rows[0], &rows[0]));
  altar_csv_clear(&csv);
  for (int i = 0; i < 3; i++) altar_strmap_clear(&rows[i]);
  free(p);
}

static void test_csv_delimiters(void) {
  csv_roundtrip('\t', "t.tsv");
  csv_roundtrip(',', "t.csv");
  /* The exact bytes: only fields that need it are quoted. */
  altar_strmap_t row = {0};
  altar_strmap_set(&row, "a", "x,y");
  altar_strmap_set(&row, "b", "q\"");
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL(altar_csv_format(&row, 1, ',', NULL, 0, &b, NULL), 0);
  altar_buf_append(&b, "", 1);
  CU_ASSERT_STRING_EQUAL((char *)b.data, "a,b\n\"x,y\",\"q\"\"\"\n");
  altar_buf_reset(&b);
  CU_ASSERT_EQUAL(altar_csv_format(&row, 1, '\t', NULL, 0, &b, NULL), 0);
  altar_buf_append(&b, "", 1);
  CU_ASSERT_STRING_EQUAL((char *)b.data, "a\tb\nx,y\t\"q\"\"\"\n");
  altar_buf_free(&b);
  /* A key that is not a column is refused. */
  const char *only_a[] = {"a"};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_csv_format(&row, 1, ',', only_a, 1, &b, &err), ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "'b'"));
  altar_buf_free(&b);
  altar_strmap_clear(&row);
}

static void test_csv_parse_cases(void) {
  altar_error_t err = {0};
  altar_csv_t csv;
  /* CRLF, blank lines, fewer fields than columns. */
  const char *t = "x,y\r\n1,2\r\n\r\n3\r\n";
  CU_ASSERT_EQUAL_FATAL(altar_csv_parse(t, strlen(t), ',', NULL, 0, &csv, &err), 0);
  CU_ASSERT_EQUAL_FATAL(csv.n_rows, 2);
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&csv.rows[0], "y"), "2");
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&csv.rows[1], "x"), "3");
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&csv.rows[1], "y"), "");
  altar_csv_clear(&csv);
  /* Explicit fieldnames: the first row is data. */
  const char *names[] = {"k", "v"};
  t = "a\tb\nc\td";
  CU_ASSERT_EQUAL_FATAL(altar_csv_parse(t, strlen(t), '\t', names, 2, &csv, &err), 0);
  CU_ASSERT_EQUAL_FATAL(csv.n_rows, 2);
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&csv.rows[0], "k"), "a");
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&csv.rows[1], "v"), "d");
  altar_csv_clear(&csv);
  /* Too many fields names the line. */
  t = "a,b\n1,2\n1,2,3\n";
  CU_ASSERT_EQUAL(altar_csv_parse(t, strlen(t), ',', NULL, 0, &csv, &err), ALTAR_EDECODE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "line 3"));
  /* An unclosed quote. */
  t = "a\n\"open\n";
  CU_ASSERT_EQUAL(altar_csv_parse(t, strlen(t), ',', NULL, 0, &csv, &err), ALTAR_EDECODE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not closed"));
  /* Header only; empty input. */
  CU_ASSERT_EQUAL(altar_csv_parse("a,b\n", 4, ',', NULL, 0, &csv, &err), 0);
  CU_ASSERT_EQUAL(csv.n_rows, 0);
  CU_ASSERT_EQUAL(csv.n_fields, 2);
  altar_csv_clear(&csv);
  CU_ASSERT_EQUAL(altar_csv_parse("", 0, ',', NULL, 0, &csv, &err), 0);
  CU_ASSERT_EQUAL(csv.n_rows, 0);
  altar_csv_clear(&csv);
  /* One column holding an empty value survives the round trip. */
  altar_strmap_t row = {0};
  altar_strmap_set(&row, "only", "");
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL(altar_csv_format(&row, 1, ',', NULL, 0, &b, NULL), 0);
  CU_ASSERT_EQUAL(altar_csv_parse((char *)b.data, b.len, ',', NULL, 0, &csv, &err), 0);
  CU_ASSERT_EQUAL(csv.n_rows, 1);
  altar_csv_clear(&csv);
  altar_buf_free(&b);
  altar_strmap_clear(&row);
  CU_ASSERT_EQUAL(altar_csv_parse("a", 1, '"', NULL, 0, &csv, &err), ALTAR_EINVAL);
}

/* ---- text reader and writer --------------------------------------------------------- */

static void test_text_reader_writer(void) {
  altar_error_t err = {0};
  char *p = pathf("tw.txt");
  altar_text_writer_t *w = altar_storage_open_text_writer(local, p, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  CU_ASSERT_EQUAL(altar_text_writer_write(w, "one\r\n", 5), 0);
  CU_ASSERT_EQUAL(altar_text_writer_printf(w, "%s %d\n", "two", 2), 0);
  CU_ASSERT_EQUAL(altar_text_writer_write(w, "three", 5), 0);
  CU_ASSERT_EQUAL(access(p, F_OK), -1); /* nothing until close */
  CU_ASSERT_EQUAL(altar_text_writer_close(w, &err), 0);

  altar_text_reader_t *r;
  CU_ASSERT_EQUAL_FATAL(altar_storage_open_text(local, p, &r, &err), 0);
  const char *line;
  size_t len;
  CU_ASSERT_EQUAL(altar_text_reader_next_line(r, &line, &len), 1);
  CU_ASSERT(len == 3 && memcmp(line, "one", 3) == 0);
  CU_ASSERT_EQUAL(altar_text_reader_next_line(r, &line, &len), 1);
  CU_ASSERT(len == 5 && memcmp(line, "two 2", 5) == 0);
  CU_ASSERT_EQUAL(altar_text_reader_next_line(r, &line, &len), 1);
  CU_ASSERT(len == 5 && memcmp(line, "three", 5) == 0);
  CU_ASSERT_EQUAL(altar_text_reader_next_line(r, &line, &len), 0);
  size_t tl;
  CU_ASSERT_STRING_EQUAL(altar_text_reader_text(r, &tl), "one\r\ntwo 2\nthree");
  altar_text_reader_close(r);

  /* An aborted writer leaves the old file alone. */
  w = altar_storage_open_text_writer(local, p, &err);
  altar_text_writer_write(w, "lost", 4);
  altar_text_writer_abort(w);
  char *back = altar_test_read_file(p, NULL);
  CU_ASSERT_STRING_EQUAL(back, "one\r\ntwo 2\nthree");
  free(back);
  free(p);
}

static void test_open_for_uri(void) {
  altar_error_t err = {0};
  altar_storage_t *s = NULL;
  CU_ASSERT_EQUAL(altar_storage_open_for_uri("file:///tmp/x", NULL, &s, &err), 0);
  CU_ASSERT_STRING_EQUAL(altar_storage_name(s), "local");
  altar_storage_close(s);
  CU_ASSERT_EQUAL(altar_storage_open_for_uri("relative/path", NULL, &s, &err), 0);
  CU_ASSERT_STRING_EQUAL(altar_storage_name(s), "local");
  altar_storage_close(s);
  CU_ASSERT_EQUAL(altar_storage_open_for_uri("HTTPS://example.invalid/x", NULL, &s, &err), 0);
  CU_ASSERT_STRING_EQUAL(altar_storage_name(s), "http");
  altar_storage_close(s);
  CU_ASSERT_EQUAL(altar_storage_open_for_uri("nope://bucket/x", NULL, &s, &err), ALTAR_ENOTFOUND);
  CU_ASSERT_PTR_NULL(s);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "storage 'nope' is not registered"));
  /* The object stores are registered by their schemes. */
  setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9", 1);
  CU_ASSERT_EQUAL(altar_storage_open_for_uri("gs://bucket/x", NULL, &s, &err), 0);
  CU_ASSERT_STRING_EQUAL(altar_storage_name(s), "gs");
  altar_storage_close(s);
  unsetenv("STORAGE_EMULATOR_HOST");
  setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
  CU_ASSERT_EQUAL(altar_storage_open_for_uri("s3://bucket/x", NULL, &s, &err), 0);
  CU_ASSERT_STRING_EQUAL(altar_storage_name(s), "s3");
  altar_storage_close(s);
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  CU_ASSERT_EQUAL(altar_storage_open_for_uri("b@d://x", NULL, &s, &err), ALTAR_EINVAL);
  /* An unknown option names itself and every key the adapter knows. */
  altar_strmap_t opts = {0};
  altar_strmap_set(&opts, "colour", "blue");
  CU_ASSERT_EQUAL(altar_storage_open("gs", &opts, &s, &err), ALTAR_ECONFIG);
  CU_ASSERT_STRING_EQUAL(err.msg,
                         "storage.colour: unknown key for the gs storage (known: endpoint, auth, bearer_token, "
                         "credentials_file, metadata_host, scope, checksum, timeout_s, connect_timeout_s, max_bytes, "
                         "resumable_threshold, chunk_size, page_size)");
  CU_ASSERT_EQUAL(altar_storage_open("s3", &opts, &s, &err), ALTAR_ECONFIG);
  CU_ASSERT_STRING_EQUAL(err.msg,
                         "storage.colour: unknown key for the s3 storage (known: endpoint, region, addressing_style, "
                         "access_key_id, secret_access_key, session_token, profile, credentials_file, "
                         "checksum, timeout_s, connect_timeout_s, max_bytes, multipart_threshold, "
                         "part_size, page_size, time_offset_s)");
  /* A near miss is named, as for every plug-in kind. */
  altar_strmap_t near = {0};
  altar_strmap_set(&near, "regoin", "eu");
  CU_ASSERT_EQUAL(altar_storage_open("s3", &near, &s, &err), ALTAR_ECONFIG);
  CU_ASSERT_STRING_EQUAL(err.msg, "storage.regoin: unknown key for the s3 storage (did you mean \"region\"?)");
  altar_strmap_clear(&near);
  /* An adapter that reads no option refuses any. */
  CU_ASSERT_EQUAL(altar_storage_open("local", &opts, &s, &err), ALTAR_ECONFIG);
  CU_ASSERT_STRING_EQUAL(err.msg, "storage.colour: unknown key for the local storage (it takes none)");
  altar_strmap_clear(&opts);
}

/* ---- http against a real server ------------------------------------------------------- */

static altar_test_httpd_t *httpd;
static char *webroot;

static void url(char *buf, size_t n, const char *path) {
  snprintf(buf, n, "http://127.0.0.1:%d/%s", altar_test_httpd_port(httpd), path);
}

static int http_setup(void) {
  if (!dir) return -1;
  /* The server is on loopback: a proxy from the environment must not intercept. */
  setenv("no_proxy", "127.0.0.1,localhost", 1);
  setenv("NO_PROXY", "127.0.0.1,localhost", 1);
  webroot = pathf("web");
  mkdir(webroot, 0755);
  char *p = pathf("web/hello.txt");
  altar_test_write_file(p, "hello over http\n", 16);
  free(p);
  p = pathf("web/table.tsv");
  altar_test_write_file(p, "a\tb\n1\t2\n", 8);
  free(p);
  p = pathf("web/big.bin");
  size_t n = 1 << 20;
  char *data = malloc(n);
  for (size_t i = 0; i < n; i++) data[i] = (char)(i * 7);
  altar_test_write_file(p, data, n);
  free(data);
  free(p);
  httpd = altar_test_httpd_start(webroot);
  return httpd ? 0 : -1;
}

/* The last suite: also removes what the local suite set up. */
static int http_teardown(void) {
  altar_test_httpd_stop(httpd);
  free(webroot);
  return teardown();
}

static void test_http_read(void) {
  altar_error_t err = {0};
  altar_storage_t *s;
  CU_ASSERT_EQUAL_FATAL(altar_storage_open("http", NULL, &s, &err), 0);
  char u[256];
  url(u, sizeof u, "hello.txt");
  char *text = NULL;
  size_t len;
  CU_ASSERT_EQUAL(altar_storage_read_text(s, u, &text, &len, &err), 0);
  CU_ASSERT_STRING_EQUAL(text, "hello over http\n");
  free(text);
  url(u, sizeof u, "big.bin");
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s, u, &b, &err), 0);
  CU_ASSERT_EQUAL(b.len, 1u << 20);
  CU_ASSERT(b.len == (1u << 20) && (unsigned char)b.data[12345] == (unsigned char)(12345 * 7));
  altar_buf_free(&b);
  /* Redirects are followed. */
  url(u, sizeof u, "redirect/hello.txt");
  CU_ASSERT_EQUAL(altar_storage_read_text(s, u, &text, &len, &err), 0);
  CU_ASSERT_STRING_EQUAL(text, "hello over http\n");
  free(text);
  /* CSV through the default operation. */
  url(u, sizeof u, "table.tsv");
  altar_csv_t csv;
  CU_ASSERT_EQUAL(altar_storage_read_csv(s, u, '\t', NULL, 0, &csv, &err), 0);
  CU_ASSERT_EQUAL(csv.n_rows, 1);
  if (csv.n_rows == 1) CU_ASSERT_STRING_EQUAL(altar_strmap_get(&csv.rows[0], "b"), "2");
  altar_csv_clear(&csv);
  altar_storage_close(s);
}

static void test_http_errors(void) {
  altar_error_t err = {0};
  altar_storage_t *s;
  CU_ASSERT_EQUAL_FATAL(altar_storage_open("https", NULL, &s, &err), 0);
  char u[256];
  altar_buf_t b = {0};
  url(u, sizeof u, "nope.txt");
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s, u, &b, &err), ALTAR_ENOTFOUND);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "HTTP 404"));
  CU_ASSERT_EQUAL(b.len, 0);
  url(u, sizeof u, "status/500");
  altar_error_clear(&err);
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s, u, &b, &err), ALTAR_ESTORAGE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "HTTP 500"));
  CU_ASSERT_TRUE(err.retriable);
  url(u, sizeof u, "status/403");
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s, u, &b, &err), ALTAR_ESTORAGE);
  CU_ASSERT_FALSE(err.retriable);
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s, "ftp://127.0.0.1/x", &b, &err), ALTAR_EINVAL);
  /* Writes are not supported, and say so. */
  url(u, sizeof u, "new.txt");
  CU_ASSERT_EQUAL(altar_storage_write_text(s, u, "x", &err), ALTAR_ENOTSUP);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "storage 'http'"));
  CU_ASSERT_EQUAL(altar_storage_write_bytes(s, u, "x", 1, &err), ALTAR_ENOTSUP);
  CU_ASSERT_EQUAL(altar_storage_mkdirs(s, u, &err), ALTAR_ENOTSUP);
  CU_ASSERT_EQUAL(altar_storage_upload(s, "/etc/hostname", u, &err), ALTAR_ENOTSUP);
  CU_ASSERT_EQUAL(altar_storage_copy_from_local(s, "/etc/hostname", u, &err), ALTAR_ENOTSUP);
  altar_strmap_t row = {0};
  altar_strmap_set(&row, "a", "1");
  CU_ASSERT_EQUAL(altar_storage_write_csv(s, u, &row, 1, ',', NULL, 0, &err), ALTAR_ENOTSUP);
  altar_strmap_clear(&row);
  altar_buf_free(&b);
  altar_storage_close(s);
}

static void test_http_exists_and_local_file(void) {
  altar_error_t err = {0};
  altar_storage_t *s;
  CU_ASSERT_EQUAL_FATAL(altar_storage_open("http", NULL, &s, &err), 0);
  char u[256];
  bool ex = false;
  unsigned before = altar_test_httpd_requests(httpd);
  url(u, sizeof u, "hello.txt");
  CU_ASSERT_EQUAL(altar_storage_exists(s, u, &ex, &err), 0);
  CU_ASSERT_TRUE(ex);
  CU_ASSERT(altar_test_httpd_requests(httpd) > before); /* it really asked the server */
  url(u, sizeof u, "missing.txt");
  CU_ASSERT_EQUAL(altar_storage_exists(s, u, &ex, &err), 0);
  CU_ASSERT_FALSE(ex);
  url(u, sizeof u, "status/503");
  CU_ASSERT_EQUAL(altar_storage_exists(s, u, &ex, &err), ALTAR_ESTORAGE);
  /* A server that refuses HEAD is asked with a ranged GET. */
  url(u, sizeof u, "nohead/hello.txt");
  ex = false;
  CU_ASSERT_EQUAL(altar_storage_exists(s, u, &ex, &err), 0);
  CU_ASSERT_TRUE(ex);
  url(u, sizeof u, "nohead/missing.txt");
  CU_ASSERT_EQUAL(altar_storage_exists(s, u, &ex, &err), 0);
  CU_ASSERT_FALSE(ex);

  url(u, sizeof u, "big.bin?x=1");
  altar_local_file_t lf = {0};
  CU_ASSERT_EQUAL_FATAL(altar_storage_as_local_file(s, u, &lf, &err), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(lf.path, ".bin")); /* keeps the extension, not the query */
  struct stat st;
  CU_ASSERT_EQUAL(stat(lf.path, &st), 0);
  CU_ASSERT_EQUAL(st.st_size, 1 << 20);
  char *keep = strdup(lf.path);
  altar_local_file_release(&lf);
  CU_ASSERT_EQUAL(stat(keep, &st), -1); /* the temp copy is gone */
  CU_ASSERT_EQUAL(errno, ENOENT);
  free(keep);
  url(u, sizeof u, "missing.bin");
  CU_ASSERT_EQUAL(altar_storage_as_local_file(s, u, &lf, &err), ALTAR_ENOTFOUND);
  CU_ASSERT_PTR_NULL(lf.path);
  altar_storage_close(s);
}

static void test_http_bounds_and_options(void) {
  altar_error_t err = {0};
  altar_strmap_t opts = {0};
  altar_strmap_set(&opts, "max_bytes", "1000");
  altar_strmap_set(&opts, "timeout_s", "20");
  altar_storage_t *s;
  CU_ASSERT_EQUAL_FATAL(altar_storage_open("http", &opts, &s, &err), 0);
  char u[256];
  url(u, sizeof u, "big.bin");
  altar_buf_t b = {0};
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s, u, &b, &err), ALTAR_ETOOBIG);
  CU_ASSERT_EQUAL(b.len, 0);
  altar_local_file_t lf = {0};
  CU_ASSERT_EQUAL(altar_storage_as_local_file(s, u, &lf, &err), ALTAR_ETOOBIG);
  url(u, sizeof u, "hello.txt");
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s, u, &b, &err), 0);
  altar_buf_free(&b);
  altar_storage_close(s);

  altar_strmap_set(&opts, "max_bytes", "lots");
  CU_ASSERT_EQUAL(altar_storage_open("http", &opts, &s, &err), ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "max_bytes"));
  altar_strmap_clear(&opts);
  altar_strmap_set(&opts, "colour", "blue");
  CU_ASSERT_EQUAL(altar_storage_open("http", &opts, &s, &err), ALTAR_ECONFIG);
  CU_ASSERT_STRING_EQUAL(
      err.msg, "storage.colour: unknown key for the http storage (known: timeout_s, connect_timeout_s, max_bytes)");
  altar_strmap_clear(&opts);

  /* Nothing listens on a port we just bound and closed: a clear transport error. */
  altar_test_httpd_t *gone = altar_test_httpd_start(webroot);
  CU_ASSERT_PTR_NOT_NULL_FATAL(gone);
  int port = altar_test_httpd_port(gone);
  altar_test_httpd_stop(gone);
  snprintf(u, sizeof u, "http://127.0.0.1:%d/hello.txt", port);
  CU_ASSERT_EQUAL_FATAL(altar_storage_open("http", NULL, &s, &err), 0);
  CU_ASSERT_EQUAL(altar_storage_read_bytes(s, u, &b, &err), ALTAR_ESTORAGE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "127.0.0.1"));
  CU_ASSERT_TRUE(err.retriable);
  altar_buf_free(&b);
  altar_storage_close(s);
}

/* ---- the Storage contract for local and http ----------------------------------------- */

static altar_storage_fixture_t local_fx, http_fx;
static altar_storage_t *http_s, *http_faulty;
static altar_test_mock_t *fault_srv;

static void test_local_contract(void) {
  local_fx.label = "local";
  local_fx.s = local;
  snprintf(local_fx.root, sizeof local_fx.root, "%s/lc/", dir);
  local_fx.big_size = 3u << 20;
  local_fx.wrong_scheme_uri = "gs://bucket/x";
  altar_storage_contract_roundtrip(&local_fx);
  altar_storage_contract_bad_input(&local_fx);
  altar_storage_contract_staging(&local_fx);
}

/* http is read-only: the files go into the server's directory. */
static int http_seed(void *ud, const char *key, const void *data, size_t len) {
  (void)ud;
  char p[4200];
  snprintf(p, sizeof p, "%s/%s", webroot, key);
  for (char *c = p + strlen(webroot) + 1; *c; c++) {
    if (*c != '/') continue;
    *c = '\0';
    mkdir(p, 0755);
    *c = '/';
  }
  altar_test_write_file(p, data, len);
  return 0;
}

static void test_http_contract(void) {
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_storage_open("http", NULL, &http_s, &err), 0);
  CU_ASSERT_EQUAL_FATAL(altar_storage_open("http", NULL, &http_faulty, &err), 0);
  fault_srv = altar_test_mock_start(altar_storage_fault_handler, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(fault_srv);
  http_fx.label = "http";
  http_fx.s = http_s;
  snprintf(http_fx.root, sizeof http_fx.root, "http://127.0.0.1:%d/", altar_test_httpd_port(httpd));
  http_fx.seed = http_seed;
  http_fx.big_size = 2u << 20;
  http_fx.wrong_scheme_uri = "ftp://127.0.0.1/x";
  http_fx.faulty = http_faulty;
  snprintf(http_fx.fault_root, sizeof http_fx.fault_root, "http://127.0.0.1:%d/", altar_test_mock_port(fault_srv));
  altar_storage_contract_roundtrip(&http_fx);
  altar_storage_contract_bad_input(&http_fx);
  altar_storage_contract_faults(&http_fx);
  altar_storage_contract_staging(&http_fx);
  CU_ASSERT(altar_test_mock_count(fault_srv, "fdrop") >= 2); /* the faults really reached the server */
  altar_test_mock_stop(fault_srv);
  altar_storage_close(http_s);
  altar_storage_close(http_faulty);
}

/* ---- an adapter with only what is required, and write_bytes: the defaults ---- */

/* One file in memory, kept as the adapter's state through the handle. */
typedef struct mem {
  altar_buf_t data;
  bool has;
} mem_t;
static int mem_opens, mem_closes;

static int mem_open(altar_storage_t *s, const altar_strmap_t *cfg, altar_error_t *err) {
  if (cfg && cfg->n) return altar_error_set(err, ALTAR_EINVAL, "option '%s': unknown", cfg->keys[0]);
  mem_t *m = calloc(1, sizeof *m);
  if (!m) return altar_error_set(err, ALTAR_ENOMEM, "mem: out of memory");
  altar_storage_set_impl(s, m);
  mem_opens++;
  return ALTAR_OK;
}
static void mem_close(altar_storage_t *s) {
  mem_t *m = altar_storage_impl(s);
  altar_buf_free(&m->data);
  free(m);
  mem_closes++;
}
static int mem_read_bytes(altar_storage_t *s, const char *path, altar_buf_t *out, altar_error_t *err) {
  mem_t *m = altar_storage_impl(s);
  if (!m->has) return altar_error_set(err, ALTAR_ENOTFOUND, "%s: not found", path);
  return altar_buf_append(out, m->data.data ? (const void *)m->data.data : "", m->data.len);
}
static int mem_exists(altar_storage_t *s, const char *path, bool *pexists, altar_error_t *err) {
  (void)path;
  (void)err;
  *pexists = ((mem_t *)altar_storage_impl(s))->has;
  return ALTAR_OK;
}
static int mem_write_bytes(altar_storage_t *s, const char *path, const void *data, size_t len, altar_error_t *err) {
  (void)path;
  (void)err;
  mem_t *m = altar_storage_impl(s);
  m->data.len = 0;
  m->has = true;
  return altar_buf_append(&m->data, data, len);
}
static const altar_storage_ops_t mem_ops = {.name = "mem",
                                            .caps = ALTAR_STORAGE_CAP_READ | ALTAR_STORAGE_CAP_WRITE,
                                            .open = mem_open,
                                            .close = mem_close,
                                            .read_bytes = mem_read_bytes,
                                            .exists = mem_exists,
                                            .write_bytes = mem_write_bytes};
static const altar_storage_ops_t no_exists_ops = {.name = "no-exists", .read_bytes = mem_read_bytes};

static void test_defaults_once_at_open(void) {
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_registry_register(ALTAR_REGISTRY_STORAGE, "mem", &mem_ops, &err), 0);
  CU_ASSERT_EQUAL_FATAL(altar_registry_register(ALTAR_REGISTRY_STORAGE, "no-exists", &no_exists_ops, &err), 0);
  altar_storage_t *s = NULL;
  /* A table lacking a required operation is refused at open, naming it. */
  CU_ASSERT_EQUAL(altar_storage_open("no-exists", NULL, &s, &err), ALTAR_EINVAL);
  CU_ASSERT_PTR_NULL(s);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "'exists'"));
  /* The adapter's open refuses a key; nothing is left to close. */
  altar_strmap_t opts = {0};
  altar_strmap_set(&opts, "bogus", "1");
  CU_ASSERT_EQUAL(altar_storage_open("mem", &opts, &s, &err), ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "bogus"));
  altar_strmap_clear(&opts);
  CU_ASSERT_EQUAL_FATAL(altar_storage_open("mem", NULL, &s, &err), 0);
  CU_ASSERT_EQUAL(mem_opens, 1);
  CU_ASSERT_STRING_EQUAL(altar_storage_name(s), "mem");
  CU_ASSERT_EQUAL(altar_storage_caps(s), ALTAR_STORAGE_CAP_READ | ALTAR_STORAGE_CAP_WRITE);
  /* write_text over write_bytes, read_text over read_bytes. */
  CU_ASSERT_EQUAL(altar_storage_write_text(s, "f", "hello", &err), 0);
  char *text = NULL;
  size_t len = 0;
  CU_ASSERT_EQUAL(altar_storage_read_text(s, "f", &text, &len, &err), 0);
  CU_ASSERT_STRING_EQUAL(text, "hello");
  CU_ASSERT_EQUAL(len, 5);
  free(text);
  /* upload and copy_from_local over write_bytes, the file read whole. */
  char *src = pathf("mem-src.txt");
  FILE *f = fopen(src, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("from disk", f);
  fclose(f);
  CU_ASSERT_EQUAL(altar_storage_upload(s, src, "g", &err), 0);
  CU_ASSERT_EQUAL(altar_storage_read_text(s, "g", &text, NULL, &err), 0);
  CU_ASSERT_STRING_EQUAL(text, "from disk");
  free(text);
  CU_ASSERT_EQUAL(altar_storage_write_text(s, "f", "x", &err), 0);
  CU_ASSERT_EQUAL(altar_storage_copy_from_local(s, src, "g", &err), 0);
  CU_ASSERT_EQUAL(altar_storage_read_text(s, "g", &text, NULL, &err), 0);
  CU_ASSERT_STRING_EQUAL(text, "from disk");
  free(text);
  /* as_local_file: a temp copy removed on release. */
  altar_local_file_t lf = {0};
  CU_ASSERT_EQUAL_FATAL(altar_storage_as_local_file(s, "g.txt", &lf, &err), 0);
  char *copy = altar_test_read_file(lf.path, NULL);
  CU_ASSERT_STRING_EQUAL(copy, "from disk");
  free(copy);
  char *tmp = strdup(lf.path);
  altar_local_file_release(&lf);
  CU_ASSERT_NOT_EQUAL(access(tmp, F_OK), 0);
  free(tmp);
  /* CSV over text. */
  altar_strmap_t row = {0};
  altar_strmap_set(&row, "a", "1");
  CU_ASSERT_EQUAL(altar_storage_write_csv(s, "c", &row, 1, ',', NULL, 0, &err), 0);
  altar_strmap_clear(&row);
  altar_csv_t csv = {0};
  CU_ASSERT_EQUAL_FATAL(altar_storage_read_csv(s, "c", ',', NULL, 0, &csv, &err), 0);
  CU_ASSERT_EQUAL(csv.n_rows, 1);
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&csv.rows[0], "a"), "1");
  altar_csv_clear(&csv);
  /* What has no default behaviour says so, naming the adapter. */
  CU_ASSERT_EQUAL(altar_storage_mkdirs(s, "d", &err), ALTAR_ENOTSUP);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "storage 'mem'"));
  CU_ASSERT_EQUAL(altar_storage_list(s, "", NULL, NULL, &err), ALTAR_ENOTSUP);
  altar_storage_close(s);
  CU_ASSERT_EQUAL(mem_closes, 1);
  free(src);
  altar_registry_unregister(ALTAR_REGISTRY_STORAGE, "mem");
  altar_registry_unregister(ALTAR_REGISTRY_STORAGE, "no-exists");
}

static void add(void) {
  {
    ALTAR_SUITE("storage_local", setup, NULL);
    ALTAR_TEST(test_local_text_bytes);
    ALTAR_TEST(test_local_uris_exists_mkdirs);
    ALTAR_TEST(test_local_upload);
    ALTAR_TEST(test_local_as_local_file);
    ALTAR_TEST(test_csv_delimiters);
    ALTAR_TEST(test_csv_parse_cases);
    ALTAR_TEST(test_text_reader_writer);
    ALTAR_TEST(test_open_for_uri);
    ALTAR_TEST(test_defaults_once_at_open);
  }
  {
    ALTAR_SUITE("storage_http", http_setup, http_teardown);
    ALTAR_TEST(test_http_read);
    ALTAR_TEST(test_http_errors);
    ALTAR_TEST(test_http_exists_and_local_file);
    ALTAR_TEST(test_http_bounds_and_options);
    ALTAR_TEST(test_local_contract);
    ALTAR_TEST(test_http_contract);
  }
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
