/* The shared TaskLedger suite: one body of tests run against every ledger
 * implementation through a factory. */
#ifndef ALTAR_TEST_LEDGER_SUITE_H
#define ALTAR_TEST_LEDGER_SUITE_H

#include "altar/ledger.h"

#include <stdbool.h>

typedef struct altar_ledger_factory {
  const char *name;
  /* A fresh, empty ledger. */
  altar_ledger_t *(*open)(void);
  /* Closes l and opens the same ledger again (a durable one from disk);
   * returns l itself when the ledger is not durable. */
  altar_ledger_t *(*reopen)(altar_ledger_t *l);
  /* Closes l and removes whatever it left behind. */
  void (*destroy)(altar_ledger_t *l);
} altar_ledger_factory_t;

/* Registers suite "ledger.<name>" running every shared test against f. */
void altar_ledger_suite_register(const altar_ledger_factory_t *f);

/* For the suites that open their ledger by directory (outbox, daemon,
 * settled groups, rebuild, retry times), so each runs on both ledgers: the
 * suite's init picks one with altar_test_ledger_init_memory or
 * altar_test_ledger_init_rocksdb, and its cleanup is
 * altar_test_ledger_cleanup. */
int altar_test_ledger_init_memory(void);
int altar_test_ledger_init_rocksdb(void);
int altar_test_ledger_cleanup(void);
/* True while a suite runs on the in-memory ledger. */
bool altar_test_ledger_is_memory(void);
/* The RocksDB ledger in dir; or the in-memory ledger of dir: the one given
 * for dir before and closed with altar_test_ledger_close since (a restart
 * keeps what a durable ledger keeps), else a fresh one. Fails the test
 * when it cannot be opened. */
altar_ledger_t *altar_test_ledger_open(const char *dir);
/* Closes a ledger from altar_test_ledger_open (an in-memory one is kept
 * for its directory until the suite's cleanup). */
void altar_test_ledger_close(altar_ledger_t *l);

#endif
