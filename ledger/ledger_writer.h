/* altar — a thread that writes the RocksDB ledger's batches behind its
 * caller: a commit hands its batch over and goes on with the next one
 * while RocksDB inserts the last into its memtable. Internal to
 * ledger/ledger_rocksdb.c. */
#ifndef ALTAR_RECONCILER_LEDGER_WRITER_H
#define ALTAR_RECONCILER_LEDGER_WRITER_H

#include <rocksdb/c.h>

typedef struct altar__lwriter altar__lwriter_t;

/* Starts the thread; db and wopts are borrowed. NULL without resources. */
altar__lwriter_t *altar__lwriter_start(rocksdb_t *db, const rocksdb_writeoptions_t *wopts);
/* Waits for the previous batch to be written, then hands *pwb over and puts
 * an empty batch in its place. A failed write is sticky: this and every
 * later call return its message (malloc'd, the caller frees) and hand
 * nothing over. */
char *altar__lwriter_submit(altar__lwriter_t *w, rocksdb_writebatch_t **pwb);
/* Waits until every batch handed over is written (so reads see them); the
 * sticky error as above, or NULL. */
char *altar__lwriter_drain(altar__lwriter_t *w);
/* The sticky error as drain gives it, without waiting for the batch in
 * flight (whose failure a later call then reports); NULL when none yet. */
char *altar__lwriter_failed(altar__lwriter_t *w);
/* Test hook (fault injection): the next batch handed over fails to write. */
void altar__lwriter_fail_next(altar__lwriter_t *w);
/* Drains and stops the thread. */
void altar__lwriter_stop(altar__lwriter_t *w);

#endif
