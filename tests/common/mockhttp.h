/* A small scripted HTTP/1.1 server for tests: on 127.0.0.1 (ephemeral
 * port), one connection at a time on a background thread, each request
 * handed to a handler that writes whatever it likes to the socket, a
 * truncated body or nothing at all included. For what real servers will not
 * do on demand (drop a connection, lie about a checksum) and for the local
 * token and metadata servers of the gs:// auth tests. Connections close
 * after one request. */
#ifndef ALTAR_TEST_MOCKHTTP_H
#define ALTAR_TEST_MOCKHTTP_H

#include <stddef.h>

typedef struct altar_test_mock altar_test_mock_t;

typedef struct altar_test_req {
  char method[16];
  char target[4096];
  char headers[16384]; /* the raw header lines */
  unsigned char *body; /* NUL-terminated; body_len bytes */
  size_t body_len;
} altar_test_req_t;

/* Writes the response for rq to fd (the server closes fd afterwards). */
typedef void (*altar_test_handler_fn)(int fd, const altar_test_req_t *rq, void *ud);

/* NULL on failure (message on stderr). */
altar_test_mock_t *altar_test_mock_start(altar_test_handler_fn fn, void *ud);
int altar_test_mock_port(const altar_test_mock_t *m);
/* Requests seen so far whose "METHOD target" contains needle (among the
 * first 512), or with needle NULL all of them. */
unsigned altar_test_mock_count(altar_test_mock_t *m, const char *needle);
void altar_test_mock_stop(altar_test_mock_t *m);

/* The value of header name (case-insensitive) in rq, into out; NULL when absent. */
const char *altar_test_mock_header(const altar_test_req_t *rq, const char *name, char *out, size_t cap);
/* A whole response with Content-Length and Connection: close; extra is
 * "Name: value\r\n" lines or NULL. */
void altar_test_mock_respond(int fd, int status, const char *extra, const void *body, size_t len);
int altar_test_mock_send(int fd, const void *p, size_t n);

#endif
