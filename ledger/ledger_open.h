/* Opening a RocksDB ledger directory: what RocksDB does not do itself
 * (parents of the directory) and what it does not say (who holds the lock). */
#ifndef ALTAR_LEDGER_OPEN_H
#define ALTAR_LEDGER_OPEN_H

#include "altar/error.h"

#include <stddef.h>
#include <sys/types.h>

/* Creates the missing parents of dir (RocksDB creates only dir itself), so
 * a fresh checkout can start a reconciler before anything else made ./var.
 * 0, or ALTAR_ELEDGER naming the parent that could not be made. */
int altar__ledger_make_parents(const char *dir, altar_error_t *err);

/* The process holding a POSIX lock on dir/LOCK (from /proc/locks), or 0
 * when none is found (another host, no /proc). */
pid_t altar__ledger_lock_holder(const char *dir);

/* Sets err for a RocksDB open error dberr of dir: a lock held by another
 * process is said so, naming it ("another reconciler is running"), instead
 * of RocksDB's raw "IO error: lock ... LOCK: Resource temporarily
 * unavailable". Returns ALTAR_ELEDGER. */
int altar__ledger_open_error(const char *dir, const char *dberr, altar_error_t *err);

#endif
