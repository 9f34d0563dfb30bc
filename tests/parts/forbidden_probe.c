/* A stand-in part that calls into the ledger part, which a part reaching only
 * core must not do: the boundary check has to reject its archive
 * (tests/parts/expect_forbidden.sh). Never linked into anything. */
#include "altar/ledger.h"

altar_ledger_t *altar_part_probe_open(const char *path, altar_error_t *err);

altar_ledger_t *altar_part_probe_open(const char *path, altar_error_t *err) {
  return altar_ledger_rocksdb_open(path, NULL, err);
}
