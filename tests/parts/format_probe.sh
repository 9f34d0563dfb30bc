#!/bin/sh
# The format check bites: a file indented against .clang-format fails it,
# the same file formatted passes.
set -eu
script="$1"
conf="$2"
d="$(mktemp -d)"
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/core"
cp "$conf" "$d/.clang-format"
printf 'int f(int x) {\n    return x+1;\n}\n' >"$d/core/probe.c"
if sh "$script" "$d" >"$d/out" 2>&1; then
  echo "FAIL: the check passed a badly formatted file"; cat "$d/out"; exit 1
fi
grep -q "core/probe.c: not formatted" "$d/out" || { echo "FAIL: the file was not named"; cat "$d/out"; exit 1; }
sh "$script" --fix "$d"
sh "$script" "$d" >"$d/out" 2>&1 || { echo "FAIL: a formatted file failed the check"; cat "$d/out"; exit 1; }
echo "format check: fails on a badly formatted file, passes it formatted: ok"
