/* A stand-in source that includes a ledger header. Compiled against the
 * reconciler's include root (which reaches the ledger) it builds; against
 * the worker's (which may reach only core) it must not:
 * tests/parts/expect_forbidden_include.sh. Never linked into anything. */
#include "ledger/ledger_rocksdb.h"

int altar_part_include_probe(void);

int altar_part_include_probe(void) { return 0; }
