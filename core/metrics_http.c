/* GET /metrics over HTTP, served by libmicrohttpd on its own thread. */
#include "altar/metrics.h"
#include "core/unconst.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct altar_metrics_server {
  struct MHD_Daemon *mhd;
  altar_metrics_t *reg;
  int port;
  altar_http_handler_fn handler;
  void *handler_ctx;
};

struct altar_http_request {
  struct MHD_Connection *c;
};

const char *altar_http_request_get(const altar_http_request_t *rq, bool header, const char *name) {
  return MHD_lookup_connection_value(rq->c, header ? MHD_HEADER_KIND : MHD_GET_ARGUMENT_KIND, name);
}

#define ADDR_MAX 300

/* Splits "host:port" / "[v6]:port" into host and a numeric port string. */
static int split_addr(const char *addr, char *host, size_t hostsz, char *port, size_t portsz, altar_error_t *err) {
  if (!addr || !*addr)
    return altar_error_set(err, ALTAR_ECONFIG, "metrics.addr: empty; expected host:port, e.g. 127.0.0.1:9464");
  size_t len = strnlen(addr, ADDR_MAX + 1);
  if (len > ADDR_MAX) return altar_error_set(err, ALTAR_ECONFIG, "metrics.addr: longer than %d bytes", ADDR_MAX);
  const char *h = addr, *he, *p;
  if (*addr == '[') {
    h = addr + 1;
    he = strchr(h, ']');
    if (!he || he[1] != ':')
      return altar_error_set(err, ALTAR_ECONFIG, "metrics.addr '%s': expected [ipv6]:port", addr);
    p = he + 2;
  } else {
    he = strrchr(addr, ':');
    if (!he) return altar_error_set(err, ALTAR_ECONFIG, "metrics.addr '%s': expected host:port", addr);
    if (memchr(addr, ':', (size_t)(he - addr)))
      return altar_error_set(err, ALTAR_ECONFIG, "metrics.addr '%s': write an IPv6 host in brackets, [::1]:9464", addr);
    p = he + 1;
  }
  size_t hl = (size_t)(he - h);
  if (hl == 0) return altar_error_set(err, ALTAR_ECONFIG, "metrics.addr '%s': the host is missing", addr);
  if (hl >= hostsz) return altar_error_set(err, ALTAR_ECONFIG, "metrics.addr '%s': host too long", addr);
  size_t pl = strlen(p);
  bool digits = pl > 0 && pl <= 5;
  for (size_t i = 0; digits && i < pl; i++) digits = p[i] >= '0' && p[i] <= '9';
  if (!digits || strtol(p, NULL, 10) > 65535 || pl >= portsz)
    return altar_error_set(err, ALTAR_ECONFIG, "metrics.addr '%s': the port must be a number in [0, 65535]", addr);
  memcpy(host, h, hl);
  host[hl] = 0;
  memcpy(port, p, pl + 1);
  return ALTAR_OK;
}

/* Binds and listens on exactly the given host, so a bind failure reports
 * its real cause and the socket never leaks into child processes. */
static int open_listener(const char *addr, int *pfd, int *pport, bool *pv6, altar_error_t *err) {
  char host[ADDR_MAX + 1], port[8];
  int rc = split_addr(addr, host, sizeof host, port, sizeof port, err);
  if (rc) return rc;
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  int gai = getaddrinfo(host, port, &hints, &res);
  if (gai != 0 || !res)
    return altar_error_set(err, ALTAR_ECONFIG, "metrics.addr '%s': cannot resolve host '%s': %s", addr, host,
                           gai_strerror(gai));
  int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, res->ai_protocol);
  int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 64) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    return altar_error_set(err, ALTAR_EIO, "metrics.addr '%s': cannot listen: %s", addr, strerror(e));
  }
  *pv6 = res->ai_family == AF_INET6;
  freeaddrinfo(res);
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  *pport = 0;
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
    *pport = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                            : ((struct sockaddr_in *)&ss)->sin_port);
  *pfd = fd;
  return ALTAR_OK;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned int status, const char *ctype, const void *body,
                             size_t len) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, ALTAR__UNCONST(body), MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **req_cls) {
  (void)version;
  (void)upload_data;
  static int first_call_seen;
  altar_metrics_server_t *srv = cls;
  /* The first call only announces the request; answer once any body has
   * been read (and dropped: nothing here takes input). */
  if (!*req_cls) {
    *req_cls = &first_call_seen;
    return MHD_YES;
  }
  if (*upload_data_size) {
    *upload_data_size = 0;
    return MHD_YES;
  }
  static const char text[] = "text/plain; charset=utf-8";
  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
    return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, text, "method not allowed\n", 19);
  if (strcmp(url, "/metrics") != 0 && srv->handler) {
    altar_http_request_t rq = {c};
    altar_http_reply_t out = {.status = MHD_HTTP_OK, .content_type = text};
    srv->handler(srv->handler_ctx, url, &rq, &out);
    enum MHD_Result hr =
        reply(c, out.status, out.content_type, out.body.data ? (const void *)out.body.data : "", out.body.len);
    altar_buf_free(&out.body);
    return hr;
  }
  if (strcmp(url, "/metrics") != 0) return reply(c, MHD_HTTP_NOT_FOUND, text, "not found; try /metrics\n", 24);
  altar_buf_t b = {0};
  altar_error_t e = {0};
  enum MHD_Result ret;
  if (altar_metrics_render(srv->reg, &b, &e) == ALTAR_OK)
    ret = reply(c, MHD_HTTP_OK, ALTAR_METRICS_CONTENT_TYPE, b.data ? (const void *)b.data : "", b.len);
  else ret = reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, text, "rendering failed\n", 17);
  altar_buf_free(&b);
  return ret;
}

altar_metrics_server_t *altar_metrics_serve(altar_metrics_t *reg, const char *addr, altar_error_t *err) {
  return altar_metrics_serve_with(reg, addr, NULL, NULL, err);
}

altar_metrics_server_t *altar_metrics_serve_with(altar_metrics_t *reg, const char *addr, altar_http_handler_fn handler,
                                                 void *ctx, altar_error_t *err) {
  if (!reg) {
    altar_error_set(err, ALTAR_EINVAL, "metrics: a registry is required");
    return NULL;
  }
  int fd = -1, port = 0;
  bool v6 = false;
  if (open_listener(addr, &fd, &port, &v6, err)) return NULL;
  altar_metrics_server_t *srv = calloc(1, sizeof *srv);
  if (!srv) {
    close(fd);
    altar_error_set(err, ALTAR_ENOMEM, "metrics: out of memory");
    return NULL;
  }
  srv->reg = reg;
  srv->port = port;
  srv->handler = handler;
  srv->handler_ctx = ctx;
  /* Scrapers are few; bound connections and idle time so a stuck client
   * cannot pile up. */
  /* The server thread inherits a mask blocking every signal, so SIGTERM and
   * friends reach the thread that runs the fleet loop. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  srv->mhd = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | (v6 ? MHD_USE_IPv6 : 0), 0, NULL, NULL, on_request, srv,
                              MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)32,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)10, MHD_OPTION_END);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (!srv->mhd) {
    close(fd);
    free(srv);
    altar_error_set(err, ALTAR_EIO, "metrics.addr '%s': starting the HTTP server failed", addr);
    return NULL;
  }
  return srv;
}

int altar_metrics_server_port(const altar_metrics_server_t *srv) { return srv ? srv->port : 0; }

void altar_metrics_stop(altar_metrics_server_t *srv) {
  if (!srv) return;
  MHD_stop_daemon(srv->mhd); /* joins the thread and closes the listening socket */
  free(srv);
}
