/* What a RocksDB ledger holds in memory, by RocksDB's own accounting: the
 * figures behind a reconciler's resident memory (its memtables and block
 * cache are bounded by configuration; table readers grow with the number of
 * open table files). */
#include "ledger/ledger_rocksdb.h"
#include "ledger/ledger_rocksdb_int.h"

int altar_ledger_rocksdb_memory(altar_ledger_t *l, altar_ledger_memory_t *pout, altar_error_t *err) {
  *pout = (altar_ledger_memory_t){0};
  if (!altar__ledger_is_rocksdb(l)) return altar_error_set(err, ALTAR_ENOTSUP, "ledger: not a RocksDB ledger");
  rl_t *r = altar_ledger_impl(l);
  /* Properties RocksDB does not know leave their figure at 0. */
  rocksdb_property_int(r->db, "rocksdb.cur-size-all-mem-tables", &pout->memtables);
  rocksdb_property_int(r->db, "rocksdb.estimate-table-readers-mem", &pout->table_readers);
  pout->block_cache = rocksdb_cache_get_usage(r->cache);
  pout->block_cache_pinned = rocksdb_cache_get_pinned_usage(r->cache);
  return ALTAR_OK;
}
