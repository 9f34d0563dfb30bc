/* The Storage contract suite: the checks every adapter passes (local,
 * http(s), gs, s3), as the backend contract is for backends.
 *
 * A test file fills an altar_storage_fixture_t and calls the four checks
 * from its own CUnit tests. Nothing here is skipped: a part that does not
 * apply to an adapter (buckets for local files, writes for http) checks the
 * adapter's refusal instead. */
#ifndef ALTAR_STORAGE_CONTRACT_H
#define ALTAR_STORAGE_CONTRACT_H

#include "altar/storage.h"
#include "mockhttp.h"

#include <CUnit/CUnit.h>

#include <stdbool.h>
#include <stddef.h>

typedef struct altar_storage_fixture {
  const char *label;
  altar_storage_t *s; /* the adapter under test */
  char root[512];     /* URI prefix for this run's files, ending in '/' */
  /* For read-only adapters: stores bytes so that root+key reads them. */
  int (*seed)(void *ud, const char *key, const void *data, size_t len);
  void *ud;
  size_t big_size;           /* the large round trip: above every chunk/part threshold in use */
  const char *no_bucket_uri; /* NULL when the scheme has no buckets */
  const char *escaping_uri;  /* NULL when paths have no root to escape */
  const char *wrong_scheme_uri;
  /* The same adapter aimed at altar_storage_fault_handler's server. */
  altar_storage_t *faulty;
  char fault_root[512]; /* URI prefix there, ending in '/' */
  bool checks_sums;     /* downloads are compared with the server's checksums */
  /* For a real server: its name, and whether it answered in setup. */
  const char *server;
  bool server_ok;
} altar_storage_fixture_t;

void altar_storage_contract_roundtrip(const altar_storage_fixture_t *fx);
void altar_storage_contract_bad_input(const altar_storage_fixture_t *fx);
void altar_storage_contract_faults(const altar_storage_fixture_t *fx);
/* Inputs staged and outputs collected through the process backend with
 * digests verified. The backend opens adapters with no options, so the
 * adapter must find its server from the environment. */
void altar_storage_contract_staging(const altar_storage_fixture_t *fx);

/* ---- what the object-store tests (gs://, s3://) share --------------------------------- */

/* Fills fx for scheme's adapter s on the real server (a run-unique root in
 * bucket altar-test, the bad URIs, sums checked) and faulty on the scripted
 * one; other_scheme makes the wrong-scheme URI. Then probes the server: an
 * exists that fails prints a FAIL line saying where it looked (address, from
 * variable) and which script starts it, and leaves fx->server_ok false. The
 * caller sets big_size. */
void altar_storage_fixture_object_store(altar_storage_fixture_t *fx, const char *scheme, const char *other_scheme,
                                        altar_storage_t *s, altar_storage_t *faulty, const char *server,
                                        const char *address, const char *variable, const char *script);

/* Adds the four contract checks on fx (filled later, in the suite's setup)
 * to suite; the ones that need the real server fail at once without it. */
void altar_storage_contract_add(CU_pSuite suite, const altar_storage_fixture_t *fx);

/* Fails the running test (fatally) when fx's server did not answer. */
#define ALTAR_STORAGE_NEED_SERVER(fx) altar_storage_need_server((fx), __FILE__, __LINE__)
void altar_storage_need_server(const altar_storage_fixture_t *fx, const char *file, unsigned line);

/* The fault server's handler: the request target decides the answer.
 *   f404   404               f403    403 with an error body
 *   ftrunc 200 that promises 1000 bytes and sends 500
 *   fdrop  the connection closed without an answer
 *   fbadsum 200 "hello world" with a wrong X-Goog-Hash and a wrong MD5 ETag
 * Anything else is 404. */
void altar_storage_fault_handler(int fd, const altar_test_req_t *rq, void *ud);

/* "sha256:<hex>" of a file (out holds 72). 0, or -1 when unreadable. */
int altar_storage_file_digest(const char *path, char out[72]);

#endif
