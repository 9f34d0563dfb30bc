#!/bin/sh
# The tests-map check passes a complete map and fails, naming each problem,
# on a tree with unmapped files, a row for a file that is gone, a row under
# another part's heading and a row naming a test that does not exist.
set -eu
script="$1"
d="$(mktemp -d)"
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/core" "$d/cli" "$d/tests/unit" "$d/tests/parts"
echo 'set(ALTAR_PARTS core)' >"$d/CMakeLists.txt"
cat >"$d/tests/CMakeLists.txt" <<'CMAKE'
file(GLOB UNIT_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_*.c)
foreach(src ${UNIT_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_test(NAME unit.${name} COMMAND ${name})
endforeach()
add_test(NAME unit.part_probe COMMAND sh probe.sh)
CMAKE
echo 'int altar_probe_answer(void) { return 42; }' >"$d/core/answer.c"
echo 'int altar_probe_split_half(void) { return 21; }' >"$d/core/answer_half.c"
echo 'int main(void) { return 0; }' >"$d/cli/main.c"
echo 'int main(void) { return altar_probe_answer() != 42; }' >"$d/tests/unit/test_answer.c"
cat >"$d/tests/MAP.md" <<'MAP'
### core/

| file | tests |
|---|---|
| `core/answer.c` | `unit.test_answer`, `unit.part_probe` |
| `core/answer_half.c` | `unit.test_answer` |

### cli/

| file | tests |
|---|---|
| `cli/main.c` | none |
MAP
python3 "$script" "$d" >"$d/out" 2>&1 || { echo "FAIL: the check refused a complete map"; cat "$d/out"; exit 1; }

# The same tree with answer_half.c unmapped, a new file no row names (a test
# calls its function), a row for a file that is gone and a row naming a test
# nobody defined.
echo 'int altar_probe_twice(int x) { return 2 * x; }' >"$d/core/twice.c"
echo 'int main(void) { return altar_probe_twice(21) != 42; }' >"$d/tests/unit/test_twice.c"
sed -i -e '/answer_half/d' -e 's/`cli\/main.c` | none/`cli\/main.c` | `cli.test_nosuch` |/' "$d/tests/MAP.md"
echo '| `core/gone.c` | `unit.test_answer` |' >>"$d/tests/MAP.md"
echo '| `core/twice_misplaced.c` | `unit.test_twice` |' >>"$d/tests/MAP.md"
echo 'int altar_probe_misplaced(void) { return 0; }' >"$d/core/twice_misplaced.c"
if python3 "$script" "$d" >"$d/out" 2>&1; then
  echo "FAIL: the check passed a map missing core/answer_half.c"; cat "$d/out"; exit 1
fi
expect() {
  grep -qF -- "$1" "$d/out" || { echo "FAIL: expected: $1"; cat "$d/out"; exit 1; }
}
expect 'tests/MAP.md: no row for core/answer_half.c; add under "### core/"'
# ... with the row to add: the tests of answer.c, the mapped file whose name it shares most of
expect '| `core/answer_half.c` | `unit.test_answer`, `unit.part_probe` |'
expect '| `core/twice.c` | `unit.test_twice` |'
expect 'tests/MAP.md:12: core/gone.c does not exist; remove its row'
expect 'tests/MAP.md:11: cli/main.c: no test named cli.test_nosuch'
expect 'tests/MAP.md:13: core/twice_misplaced.c sits under "### cli/"; move it under "### core/"'
echo "tests-map check: passes a complete map, fails on unmapped files (with their rows), a gone file, a misplaced row and an unknown test: ok"
