/* The transport conformance suite: one set of CUnit tests that every log
 * transport must pass (local and kafka run the same code).
 *
 * Usage, inside the function given to altar_test_main:
 *
 *   static const altar_transport_conformance_t conf = {
 *     .transport = "kafka", .config = &props, .timeout_ms = 60000,
 *   };
 *   altar_transport_conformance_add(&conf);
 *
 * The transport must be registered under .transport before the tests run.
 * Every test uses fresh topics and groups named from a prefix, the pid and
 * a counter, so runs against a long-lived broker do not interfere. The
 * config must make a group without a committed offset start at the
 * beginning of a partition (kafka: auto.offset.reset=earliest). */
#ifndef ALTAR_TESTS_TRANSPORT_CONFORMANCE_H
#define ALTAR_TESTS_TRANSPORT_CONFORMANCE_H

#include "altar/strmap.h"
#include "altar/transport.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct altar_transport_conformance {
  const char *suite_name;       /* CUnit suite name; NULL = "transport conformance: <transport>" */
  const char *transport;        /* registered transport name */
  const altar_strmap_t *config; /* given to every instance the suite creates (borrowed) */
  /* Optional: called before each test to get a config; overrides config. The
   * suite frees the result with altar_strmap_free. */
  altar_strmap_t *(*make_config)(void *ctx);
  void *make_config_ctx;
  int timeout_ms;           /* upper bound on any wait (rebalance, delivery); 0 = 30000 */
  const char *topic_prefix; /* NULL = "altar-conf" */
  /* Optional, for the leave test: keys set on every member there (e.g. a
   * kafka session timeout longer than leave_within_ms, so that only a real
   * LeaveGroup, not a session expiry, hands the partitions over in time),
   * and the bound on that hand-over (0 = timeout_ms). */
  const altar_strmap_t *leave_overrides;
  int leave_within_ms;
  /* The transport gives a wait descriptor (wait_fd); false: it must answer
   * -1, the default. */
  bool wait_fd;
} altar_transport_conformance_t;

/* Registers the suite's tests for conf (borrowed: must outlive the run).
 * One conformance suite per executable. */
void altar_transport_conformance_add(const altar_transport_conformance_t *conf);

#endif
