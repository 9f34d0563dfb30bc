/* See httpd.h. Deliberately plain: blocking sockets, one client at a time. */
#include "httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

struct altar_test_httpd {
  char *root;
  int lfd;
  int stop_pipe[2];
  int port;
  unsigned requests;
  pthread_t thread;
};

static int send_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

static const char *reason(int status) {
  switch (status) {
  case 200: return "OK";
  case 302: return "Found";
  case 400: return "Bad Request";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 500: return "Internal Server Error";
  case 503: return "Service Unavailable";
  default: return "Status";
  }
}

static void respond_empty(int fd, int status, const char *extra) {
  char hdr[512];
  int n = snprintf(hdr, sizeof hdr, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\n%sConnection: close\r\n\r\n",
                   status, reason(status), extra ? extra : "");
  send_all(fd, hdr, (size_t)n);
}

static void serve_file(altar_test_httpd_t *h, int fd, const char *path, int head) {
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
  if (send_all(fd, hdr, (size_t)n) == 0 && !head) {
    char buf[65536];
    ssize_t r;
    while ((r = read(in, buf, sizeof buf)) > 0)
      if (send_all(fd, buf, (size_t)r) != 0) break;
  }
  close(in);
}

static void handle(altar_test_httpd_t *h, int fd) {
  char req[8192];
  size_t len = 0;
  while (len < sizeof req - 1) {
    ssize_t r = recv(fd, req + len, sizeof req - 1 - len, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return;
    len += (size_t)r;
    req[len] = '\0';
    if (strstr(req, "\r\n\r\n")) break;
  }
  __atomic_add_fetch(&h->requests, 1, __ATOMIC_SEQ_CST);
  char method[16], target[4096];
  if (sscanf(req, "%15s %4095s", method, target) != 2 || target[0] != '/') {
    respond_empty(fd, 400, NULL);
    return;
  }
  int head = strcmp(method, "HEAD") == 0;
  if (!head && strcmp(method, "GET") != 0) {
    respond_empty(fd, 405, NULL);
    return;
  }
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
    if (head)
      respond_empty(fd, 405, NULL);
    else
      serve_file(h, fd, target + 8, 0);
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

static void *loop(void *arg) {
  altar_test_httpd_t *h = arg;
  for (;;) {
    struct pollfd p[2] = {{h->lfd, POLLIN, 0}, {h->stop_pipe[0], POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p[1].revents) break;
    if (!(p[0].revents & POLLIN)) continue;
    int c = accept(h->lfd, NULL, NULL);
    if (c < 0) continue;
    handle(h, c);
    shutdown(c, SHUT_WR);
    close(c);
  }
  return NULL;
}

altar_test_httpd_t *altar_test_httpd_start(const char *root) {
  altar_test_httpd_t *h = calloc(1, sizeof *h);
  if (!h) return NULL;
  h->root = strdup(root);
  h->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof a;
  if (!h->root || h->lfd < 0 || bind(h->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(h->lfd, 16) != 0 ||
      getsockname(h->lfd, (struct sockaddr *)&a, &al) != 0 || pipe(h->stop_pipe) != 0) {
    perror("test httpd");
    if (h->lfd >= 0) close(h->lfd);
    free(h->root);
    free(h);
    return NULL;
  }
  h->port = ntohs(a.sin_port);
  if (pthread_create(&h->thread, NULL, loop, h) != 0) {
    fprintf(stderr, "test httpd: cannot start its thread\n");
    close(h->lfd);
    close(h->stop_pipe[0]);
    close(h->stop_pipe[1]);
    free(h->root);
    free(h);
    return NULL;
  }
  return h;
}

int altar_test_httpd_port(const altar_test_httpd_t *h) {
  return h->port;
}

unsigned altar_test_httpd_requests(const altar_test_httpd_t *h) {
  return __atomic_load_n(&h->requests, __ATOMIC_SEQ_CST);
}

void altar_test_httpd_stop(altar_test_httpd_t *h) {
  if (!h) return;
  if (write(h->stop_pipe[1], "x", 1) != 1) perror("test httpd stop");
  pthread_join(h->thread, NULL);
  close(h->lfd);
  close(h->stop_pipe[0]);
  close(h->stop_pipe[1]);
  free(h->root);
  free(h);
}
