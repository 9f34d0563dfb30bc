/* A stand-in source that includes a reconciler header. Compiled against the
 * reconciler's include root it builds; against the worker's (which may reach
 * only core) it must not: tests/parts/expect_forbidden_include.sh. Never
 * linked into anything. */
#include "reconciler/ledger_rocksdb.h"

int altar_part_include_probe(void);

int altar_part_include_probe(void) { return 0; }
