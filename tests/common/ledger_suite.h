/* The shared TaskLedger suite: one body of tests run against every ledger
 * implementation through a factory. */
#ifndef ALTAR_TEST_LEDGER_SUITE_H
#define ALTAR_TEST_LEDGER_SUITE_H

#include "altar/ledger.h"

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

#endif
