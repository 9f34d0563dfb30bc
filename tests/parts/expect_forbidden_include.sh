#!/bin/sh
# Each part compiles against its own include root (CMakeLists.txt): a header
# across a forbidden arrow is not found. The probe includes a ledger
# header; it must compile for the reconciler and fail, naming that header,
# for the worker.
# usage: expect_forbidden_include.sh CC PROBE PUBLIC_INCLUDE GENERATED_INCLUDE PART_INCLUDE_ROOTS
set -u
cc=$1 probe=$2 pub=$3 gen=$4 roots=$5
compile() { "$cc" -fsyntax-only -D_GNU_SOURCE -I "$pub" -I "$gen" -I "$roots/$1" "$probe" 2>&1; }
out=$(compile reconciler) || { echo "$out"; echo "FAIL: the probe does not compile even for the reconciler"; exit 1; }
out=$(compile worker) && { echo "FAIL: the worker's include root reaches a ledger header"; exit 1; }
echo "$out" | grep -q 'ledger/ledger_rocksdb.h' ||
  { echo "$out"; echo "FAIL: the compile failed, but not on the forbidden header"; exit 1; }
echo "ok: a ledger header compiles for the reconciler and is not found for the worker"
