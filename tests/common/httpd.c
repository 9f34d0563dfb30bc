/* See httpd.h. The server is mockhttp's; this is its file-serving handler. */
#include "httpd.h"
#include "mockhttp.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct altar_test_httpd {
  char *root;
  altar_test_mock_t *mock;
};

static void respond_empty(int fd, int status, const char *extra) { altar_test_mock_respond(fd, status, extra, "", 0); }

static void serve_file(const altar_test_httpd_t *h, int fd, const char *path, int head) {
  char full[4096];
  snprintf(full, sizeof full, "%s/%s", h->root, path);
  int in = open(full, O_RDONLY);
  struct stat st;
  if (in < 0 || fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (in >= 0) close(in);
    respond_empty(fd, 404, NULL);
    return;
  }
  char hdr[256];
  int n = snprintf(hdr, sizeof hdr,
                   "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                   "Content-Length: %lld\r\nConnection: close\r\n\r\n",
                   (long long)st.st_size);
  if (altar_test_mock_send(fd, hdr, (size_t)n) == 0 && !head) {
    char buf[65536];
    ssize_t r;
    while ((r = read(in, buf, sizeof buf)) > 0)
      if (altar_test_mock_send(fd, buf, (size_t)r) != 0) break;
  }
  close(in);
}

static void handle(int fd, const altar_test_req_t *rq, void *ud) {
  const altar_test_httpd_t *h = ud;
  if (rq->target[0] != '/') {
    respond_empty(fd, 400, NULL);
    return;
  }
  int head = strcmp(rq->method, "HEAD") == 0;
  if (!head && strcmp(rq->method, "GET") != 0) {
    respond_empty(fd, 405, NULL);
    return;
  }
  char target[sizeof rq->target];
  snprintf(target, sizeof target, "%s", rq->target);
  char *q = strpbrk(target, "?#");
  if (q) *q = '\0';
  if (strstr(target, "..")) {
    respond_empty(fd, 403, NULL);
    return;
  }
  if (strncmp(target, "/status/", 8) == 0) {
    char *end;
    long status = strtol(target + 8, &end, 10);
    respond_empty(fd, *end == '\0' && status >= 100 && status <= 599 ? (int)status : 400, NULL);
    return;
  }
  if (strncmp(target, "/nohead/", 8) == 0) {
    if (head) respond_empty(fd, 405, NULL);
    else serve_file(h, fd, target + 8, 0);
    return;
  }
  if (strncmp(target, "/redirect/", 10) == 0) {
    char loc[4200];
    snprintf(loc, sizeof loc, "Location: /%s\r\n", target + 10);
    respond_empty(fd, 302, loc);
    return;
  }
  serve_file(h, fd, target + 1, head);
}

altar_test_httpd_t *altar_test_httpd_start(const char *root) {
  altar_test_httpd_t *h = calloc(1, sizeof *h);
  if (!h) return NULL;
  h->root = strdup(root);
  if (h->root) h->mock = altar_test_mock_start(handle, h);
  if (!h->mock) {
    fprintf(stderr, "test httpd: cannot start serving %s\n", root);
    free(h->root);
    free(h);
    return NULL;
  }
  return h;
}

int altar_test_httpd_port(const altar_test_httpd_t *h) { return altar_test_mock_port(h->mock); }

unsigned altar_test_httpd_requests(const altar_test_httpd_t *h) { return altar_test_mock_count(h->mock, NULL); }

void altar_test_httpd_stop(altar_test_httpd_t *h) {
  if (!h) return;
  altar_test_mock_stop(h->mock);
  free(h->root);
  free(h);
}
