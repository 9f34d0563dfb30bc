/* See mockhttp.h. Deliberately plain: blocking sockets, one client at a time. */
#include "mockhttp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_BODY (64u * 1024u * 1024u)
#define LOG_MAX 512

struct altar_test_mock {
  altar_test_handler_fn fn;
  void *ud;
  int lfd;
  int stop_pipe[2];
  int port;
  pthread_t thread;
  pthread_mutex_t lock;
  char *log[LOG_MAX]; /* the first LOG_MAX requests, for needles */
  unsigned n_log;
  unsigned n_seen; /* every request */
};

int altar_test_mock_send(int fd, const void *p, size_t n) {
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

void altar_test_mock_respond(int fd, int status, const char *extra, const void *body, size_t len) {
  char hdr[2048];
  int n = snprintf(hdr, sizeof hdr, "HTTP/1.1 %d X\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n", status, len,
                   extra ? extra : "");
  if (altar_test_mock_send(fd, hdr, (size_t)n) == 0 && len) altar_test_mock_send(fd, body, len);
}

const char *altar_test_mock_header(const altar_test_req_t *rq, const char *name, char *out, size_t cap) {
  size_t nl = strlen(name);
  for (const char *p = rq->headers; *p;) {
    const char *eol = strstr(p, "\r\n");
    size_t len = eol ? (size_t)(eol - p) : strlen(p);
    if (len > nl && p[nl] == ':' && !strncasecmp(p, name, nl)) {
      const char *v = p + nl + 1;
      while (*v == ' ') v++;
      size_t vn = len - (size_t)(v - p);
      if (vn >= cap) vn = cap - 1;
      memcpy(out, v, vn);
      out[vn] = '\0';
      return out;
    }
    if (!eol) break;
    p = eol + 2;
  }
  return NULL;
}

/* Reads one request: the head up to a blank line, then Content-Length bytes. */
static int read_request(int fd, altar_test_req_t *rq) {
  char head[20000];
  size_t got = 0;
  char *end = NULL;
  while (!end) {
    if (got >= sizeof head - 1) return -1;
    ssize_t r = recv(fd, head + got, sizeof head - 1 - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    got += (size_t)r;
    head[got] = '\0';
    end = strstr(head, "\r\n\r\n");
  }
  size_t head_len = (size_t)(end - head) + 4;
  char *line_end = strstr(head, "\r\n");
  *line_end = '\0';
  if (sscanf(head, "%15s %4095s", rq->method, rq->target) != 2) return -1;
  size_t hl = (size_t)(end - (line_end + 2));
  if (hl >= sizeof rq->headers) return -1;
  memcpy(rq->headers, line_end + 2, hl);
  rq->headers[hl] = '\0';
  char cl[32];
  size_t want = altar_test_mock_header(rq, "content-length", cl, sizeof cl) ? strtoul(cl, NULL, 10) : 0;
  if (want > MAX_BODY) return -1;
  rq->body = malloc(want + 1);
  if (!rq->body) return -1;
  size_t have = got - head_len;
  if (have > want) have = want;
  memcpy(rq->body, head + head_len, have);
  while (have < want) {
    ssize_t r = recv(fd, rq->body + have, want - have, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    have += (size_t)r;
  }
  rq->body[want] = '\0';
  rq->body_len = want;
  return 0;
}

static void *serve(void *arg) {
  altar_test_mock_t *m = arg;
  for (;;) {
    struct pollfd p[2] = {{m->lfd, POLLIN, 0}, {m->stop_pipe[0], POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p[1].revents) break;
    int fd = accept(m->lfd, NULL, NULL);
    if (fd < 0) continue;
    altar_test_req_t *rq = calloc(1, sizeof *rq);
    if (rq && read_request(fd, rq) == 0) {
      char line[4200];
      snprintf(line, sizeof line, "%s %s", rq->method, rq->target);
      pthread_mutex_lock(&m->lock);
      if (m->n_log < LOG_MAX) m->log[m->n_log++] = strdup(line);
      m->n_seen++;
      pthread_mutex_unlock(&m->lock);
      m->fn(fd, rq, m->ud);
    }
    if (rq) free(rq->body);
    free(rq);
    shutdown(fd, SHUT_WR); /* the answer ends here, before anything unread could reset it */
    close(fd);
  }
  return NULL;
}

altar_test_mock_t *altar_test_mock_start(altar_test_handler_fn fn, void *ud) {
  altar_test_mock_t *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->fn = fn;
  m->ud = ud;
  pthread_mutex_init(&m->lock, NULL);
  m->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(m->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof a;
  if (m->lfd < 0 || bind(m->lfd, (struct sockaddr *)&a, sizeof a) || listen(m->lfd, 16) ||
      getsockname(m->lfd, (struct sockaddr *)&a, &al) || pipe(m->stop_pipe)) {
    fprintf(stderr, "mockhttp: cannot listen on 127.0.0.1: %s\n", strerror(errno));
    if (m->lfd >= 0) close(m->lfd);
    free(m);
    return NULL;
  }
  m->port = ntohs(a.sin_port);
  if (pthread_create(&m->thread, NULL, serve, m)) {
    close(m->lfd);
    free(m);
    return NULL;
  }
  return m;
}

int altar_test_mock_port(const altar_test_mock_t *m) { return m->port; }

unsigned altar_test_mock_count(altar_test_mock_t *m, const char *needle) {
  unsigned n = 0;
  pthread_mutex_lock(&m->lock);
  if (!needle) n = m->n_seen;
  for (unsigned i = 0; needle && i < m->n_log; i++)
    if (strstr(m->log[i], needle)) n++;
  pthread_mutex_unlock(&m->lock);
  return n;
}

void altar_test_mock_stop(altar_test_mock_t *m) {
  if (!m) return;
  if (write(m->stop_pipe[1], "x", 1) < 0) { /* the thread also stops when the pipe closes */
  }
  pthread_join(m->thread, NULL);
  close(m->lfd);
  close(m->stop_pipe[0]);
  close(m->stop_pipe[1]);
  for (unsigned i = 0; i < m->n_log; i++) free(m->log[i]);
  pthread_mutex_destroy(&m->lock);
  free(m);
}
