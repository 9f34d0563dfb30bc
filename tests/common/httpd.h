/* A small real HTTP/1.1 server for tests: serves the files under a directory
 * on 127.0.0.1 from a background thread, one connection at a time (the
 * server of mockhttp.h with a file-serving handler).
 *   GET/HEAD /<path>        the file, or 404 (403 for a path with "..")
 *   GET/HEAD /status/<N>    an empty response with status N (100..599)
 *   GET/HEAD /redirect/<p>  302 to /<p>
 *   GET/HEAD /nohead/<p>    the file for GET, 405 for HEAD
 * Every response carries Content-Length and "Connection: close". */
#ifndef ALTAR_TEST_HTTPD_H
#define ALTAR_TEST_HTTPD_H

typedef struct altar_test_httpd altar_test_httpd_t;

/* Binds an ephemeral port (so parallel tests never collide) and starts
 * serving root. NULL on failure (with a message on stderr). */
altar_test_httpd_t *altar_test_httpd_start(const char *root);
int altar_test_httpd_port(const altar_test_httpd_t *h);
/* Number of requests served so far. */
unsigned altar_test_httpd_requests(const altar_test_httpd_t *h);
/* Stops the thread, closes the socket, frees h. */
void altar_test_httpd_stop(altar_test_httpd_t *h);

#endif
