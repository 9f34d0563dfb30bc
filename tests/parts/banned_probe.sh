#!/bin/sh
# The banned-function check fails on a real call and only on that: a tree
# with one sprintf call, and atoi/strcpy only in a comment and a string.
set -eu
script="$1"
d="$(mktemp -d)"
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/core"
cat >"$d/core/probe.c" <<'C'
#include <stdio.h>
/* atoi(x) in a comment is fine */
static const char *s = "strcpy(a, b) in a string is fine";
void f(char *buf) { sprintf(buf, "%s", s); }
C
if python3 "$script" "$d" >"$d/out" 2>&1; then
  echo "FAIL: the check passed a tree with a sprintf call"; cat "$d/out"; exit 1
fi
grep -q "core/probe.c:4: sprintf is banned" "$d/out" || { echo "FAIL: sprintf not reported"; cat "$d/out"; exit 1; }
if grep -q "atoi\|strcpy" "$d/out"; then echo "FAIL: a comment or string was reported"; cat "$d/out"; exit 1; fi
echo "banned-function check: fails on the call, ignores comments and strings: ok"
