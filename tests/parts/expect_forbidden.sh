#!/bin/sh
# The boundary check must fail on an archive with a forbidden reference: a
# probe part that may reach only core but calls altar_ledger_rocksdb_open (the ledger part).
# usage: expect_forbidden.sh CHECK_SCRIPT NM PART=ARCHIVE=REACHES...
set -u
check=$1; shift
out=$(sh "$check" "$@" 2>&1); rc=$?
echo "$out"
[ $rc -eq 1 ] || { echo "FAIL: the check exited $rc, expected 1 (a forbidden reference)"; exit 1; }
echo "$out" | grep -q '^forbidden: probe (forbidden_probe.c.o) references altar_ledger_rocksdb_open, defined in ledger' ||
  { echo "FAIL: the check did not name the probe's forbidden reference"; exit 1; }
[ "$(echo "$out" | grep -c '^forbidden:')" -eq 1 ] || { echo "FAIL: the check found more than the probe's reference"; exit 1; }
echo "ok: the check rejects the probe's forbidden reference and nothing else"
