#!/bin/sh
# A third-party plug-in, end to end: install altar into a temp prefix, build
# examples/subprocess_backend outside the tree against the installed altar.pc,
# load it through ALTAR_PLUGIN_PATH and through a config's `plugins:` entry,
# run the backend contract suite on it both ways, run one real
# `altar run --backend subprocess` job (an input staged and verified by
# digest, the command's output checked), and check that a plug-in for another
# ABI, one without an entry point, a missing file, a file dlopen refuses and
# a plug-in claiming a built-in's name are each refused with the documented
# message naming the file (and FILE:LINE for a config entry).
# Needs BUILD_DIR, ALTAR_SOURCE_DIR and CONTRACT_BIN (the contract runner).
set -eu
: "${BUILD_DIR:?}" "${ALTAR_SOURCE_DIR:?}" "${CONTRACT_BIN:?}"
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT INT TERM
prefix=$tmp/prefix
cmake --install "$BUILD_DIR" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
altar=$prefix/bin/altar
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc=${CC:-cc}
abi=$(sed -n 's/^#define ALTAR_PLUGIN_ABI \([0-9]*\)u$/\1/p' "$prefix/include/altar/plugin/host.h")
[ -n "$abi" ] || fail "no ALTAR_PLUGIN_ABI in the installed altar/plugin/host.h"

# Out of tree: a copy of the example, its own Makefile, only the installed
# headers and library (the source tree is not on any path it sees).
cp -r "$ALTAR_SOURCE_DIR/examples/subprocess_backend" "$tmp/example"
make -C "$tmp/example" CC="$cc" >"$tmp/make.log" 2>&1 || { cat "$tmp/make.log"; fail "building the example against altar.pc"; }
! grep -q -- "-I$ALTAR_SOURCE_DIR" "$tmp/make.log" || fail "the example build saw the source tree"
grep -q -- "-laltar" "$tmp/make.log" || fail "the example was not linked with pkg-config --libs altar"
mkdir "$tmp/plugins"
cp "$tmp/example/subprocess.so" "$tmp/plugins/"
plugin=$tmp/plugins/subprocess.so

# The contract suite, through ALTAR_PLUGIN_PATH (a directory) ...
contract() { # label, then the runner's arguments
  label=$1; shift
  "$@" >"$tmp/contract.log" 2>&1 || { cat "$tmp/contract.log"; fail "contract suite ($label)"; }
  grep -q 'Suite: contract\[subprocess\]' "$tmp/contract.log" || { cat "$tmp/contract.log"; fail "no contract suite ran ($label)"; }
  # CUnit's summary line: tests, total, ran, passed, failed, inactive.
  summary=$(grep -E '^ +tests +[0-9]' "$tmp/contract.log")
  # shellcheck disable=SC2086
  set -- $summary
  [ "$3" -ge 13 ] && [ "$3" = "$4" ] && [ "$5" = 0 ] || { cat "$tmp/contract.log"; fail "contract summary ($label): $summary"; }
  echo "contract suite ($label): $summary"
}
contract "ALTAR_PLUGIN_PATH" env ALTAR_PLUGIN_PATH="$tmp/plugins" "$CONTRACT_BIN" subprocess
# ... and through a config's plugins: entry, relative to the config's directory.
mkdir "$tmp/conf"
cat >"$tmp/conf/altar.yaml" <<EOF
backend: {name: subprocess, data_root: $tmp/data}
plugins:
  - ../plugins/subprocess.so
EOF
contract "config plugins:" env -u ALTAR_PLUGIN_PATH "$CONTRACT_BIN" subprocess "$tmp/conf/altar.yaml"

# One real job through the installed altar: an input staged by digest
# through altar's own storage registry, then read by the command.
printf 'bytes from the store\n' >"$tmp/input.txt"
digest=sha256:$(sha256sum "$tmp/input.txt" | cut -d' ' -f1)
cat >"$tmp/spec.json" <<EOF
{"kind": "score", "image": "none", "labels": {"job_id": "plugin-e2e"},
 "command": ["sh", "-c", "cat inputs/in.txt; echo ran by \$0", "subprocess-task"],
 "inputs": [{"uri": "file://$tmp/input.txt", "logical_path": "inputs/in.txt", "digest": "$digest"}]}
EOF
run_job() { # label, then the environment and the arguments after `altar run`
  label=$1; shift
  rm -rf "$tmp/data"
  env "$@" "$tmp/spec.json" >"$tmp/run.out" 2>"$tmp/run.err" ||
    { cat "$tmp/run.out" "$tmp/run.err"; fail "altar run ($label) exited $?"; }
  grep -q '"backend":"subprocess"' "$tmp/run.out" || fail "altar run ($label): not run on subprocess: $(cat "$tmp/run.out")"
  grep -q '"state":"succeeded"' "$tmp/run.out" || fail "altar run ($label): $(cat "$tmp/run.out")"
  id=$(sed -n 's/.*"external_id":"\([^"]*\)".*/\1/p' "$tmp/run.out")
  out=$tmp/data/tasks/$id/output
  [ -f "$out" ] || fail "altar run ($label): no output file for task '$id'"
  [ "$(cat "$out")" = "bytes from the store
ran by subprocess-task" ] || fail "altar run ($label): task output: $(cat "$out")"
  echo "altar run ($label): succeeded on subprocess, task $id"
}
run_job "config plugins:" -u ALTAR_PLUGIN_PATH "$altar" run --quiet --config "$tmp/conf/altar.yaml"
run_job "ALTAR_PLUGIN_PATH" ALTAR_PLUGIN_PATH="$plugin" "$altar" run --quiet --backend subprocess --data-root "$tmp/data"
# A failing command is the task's failure, with its exit code.
printf '{"kind": "score", "image": "none", "command": ["sh", "-c", "exit 3"]}' >"$tmp/fail.json"
code=0
ALTAR_PLUGIN_PATH="$plugin" "$altar" run --quiet --backend subprocess --data-root "$tmp/data" "$tmp/fail.json" \
  >"$tmp/run.out" 2>"$tmp/run.err" || code=$?
[ "$code" = 1 ] && grep -q '"reason":"exit_3"' "$tmp/run.out" || fail "a failing task (exit $code): $(cat "$tmp/run.out" "$tmp/run.err")"

# Small plug-ins, each a few lines built against the installed headers.
build() { # name [directory, default bad], C source on stdin
  cat >"$tmp/$1.c"
  $cc -std=c11 -Wall -Werror -fPIC -shared -o "$tmp/${2:-bad}/$1.so" "$tmp/$1.c" $(pkg-config --cflags --libs altar) \
    -Wl,-rpath,"$prefix/lib" || fail "building $1"
}
mkdir "$tmp/bad"

# A storage adapter from a plug-in, used by the subprocess backend's staging:
# both load from one ALTAR_PLUGIN_PATH directory, and an input's scheme finds
# the plug-in's adapter in altar's storage registry.
build echostore plugins <<'EOF'
#include <altar/plugin/host.h>
#include <stdlib.h>
#include <string.h>
ALTAR_PLUGIN_DECLARE_ABI();
/* echostore://TEXT reads as TEXT. Its state, kept in the handle, is the
 * prefix it answers to. */
static int open_(altar_storage_t *s, const altar_strmap_t *cfg, altar_error_t *err) {
  if (cfg && cfg->n) return altar_error_set(err, ALTAR_EINVAL, "option '%s': unknown", cfg->keys[0]);
  char *prefix = malloc(sizeof "echostore://");
  if (prefix) memcpy(prefix, "echostore://", sizeof "echostore://");
  if (!prefix) return altar_error_set(err, ALTAR_ENOMEM, "echostore: out of memory");
  altar_storage_set_impl(s, prefix);
  return 0;
}
static void close_(altar_storage_t *s) { free(altar_storage_impl(s)); }
static int read_bytes(altar_storage_t *s, const char *path, altar_buf_t *out, altar_error_t *err) {
  const char *prefix = altar_storage_impl(s);
  size_t n = strlen(prefix);
  if (strncmp(path, prefix, n)) return altar_error_set(err, ALTAR_EINVAL, "not echostore: %s", path);
  return altar_buf_append(out, path + n, strlen(path + n));
}
static int exists(altar_storage_t *s, const char *path, bool *pexists, altar_error_t *err) {
  (void)s; (void)path; (void)err; *pexists = true; return 0;
}
static const altar_storage_ops_t ops = {.name = "echostore", .caps = ALTAR_STORAGE_CAP_READ,
                                        .open = open_, .close = close_,
                                        .read_bytes = read_bytes, .exists = exists};
int altar_plugin_init(const altar_plugin_host_t *host, altar_error_t *err) {
  return host->register_storage(host, &ops, err);
}
EOF
digest=sha256:$(printf 'made-by-a-plugin' | sha256sum | cut -d' ' -f1)
cat >"$tmp/echo.json" <<EOF
{"kind": "score", "image": "none", "command": ["cat", "in.txt"],
 "inputs": [{"uri": "echostore://made-by-a-plugin", "logical_path": "in.txt", "digest": "$digest"}]}
EOF
rm -rf "$tmp/data"
ALTAR_PLUGIN_PATH="$tmp/plugins" "$altar" run --quiet --backend subprocess --data-root "$tmp/data" "$tmp/echo.json" \
  >"$tmp/run.out" 2>"$tmp/run.err" || { cat "$tmp/run.out" "$tmp/run.err"; fail "altar run with a plug-in storage adapter"; }
id=$(sed -n 's/.*"external_id":"\([^"]*\)".*/\1/p' "$tmp/run.out")
[ "$(cat "$tmp/data/tasks/$id/output")" = made-by-a-plugin ] || fail "plug-in storage: task output: $(cat "$tmp/data/tasks/$id/output")"
echo "altar run: input staged through the echostore plug-in, verified, read by the task"

# A transport from a config's plugins: entry: keys under transport: are
# checked against the ones it declares, as for a built-in (a typo is refused
# with its line, not left to a default). Its operations are never called here.
build keyed_transport plugins <<'EOF'
#include <altar/plugin/host.h>
ALTAR_PLUGIN_DECLARE_ABI();
static int never(void) { return ALTAR_ENOTSUP; }
static const altar_plugin_key_t keys[] = {{"path", "where it writes"}, ALTAR_PLUGIN_KEYS_END};
#define NEVER(op) .op = (__typeof__(((altar_transport_ops_t *)0)->op))(void (*)(void))never
static const altar_transport_ops_t ops = {
  .name = "keyed", .config_keys = keys, NEVER(open), NEVER(close), NEVER(produce), NEVER(poll),
  NEVER(flush), NEVER(create_topic), NEVER(list_topics), NEVER(subscribe), NEVER(consume),
  NEVER(pause), NEVER(resume), NEVER(seek), NEVER(commit), NEVER(committed)};
int altar_plugin_init(const altar_plugin_host_t *host, altar_error_t *err) {
  return host->register_transport(host, &ops, err);
}
EOF
printf 'transport:\n  name: keyed\n  path: /x\nbackend: {name: subprocess, data_root: %s}\nplugins: [../plugins/subprocess.so, ../plugins/keyed_transport.so]\n' \
  "$tmp/data" >"$tmp/conf/keyed.yaml"
rm -rf "$tmp/data"
env -u ALTAR_PLUGIN_PATH "$altar" run --quiet --config "$tmp/conf/keyed.yaml" "$tmp/echo.json" >/dev/null 2>"$tmp/run.err" &&
  fail "a config naming a plug-in storage it does not load ran"
grep -qF "storage 'echostore' is not registered" "$tmp/run.err" || fail "keyed config: $(cat "$tmp/run.err")"
env -u ALTAR_PLUGIN_PATH "$altar" run --quiet --config "$tmp/conf/keyed.yaml" "$tmp/spec.json" >"$tmp/run.out" 2>"$tmp/run.err" ||
  fail "a config with the keyed transport's own key: $(cat "$tmp/run.err")"
sed -i 's/^  path: /  paht: /' "$tmp/conf/keyed.yaml"
code=0
env -u ALTAR_PLUGIN_PATH "$altar" run --quiet --config "$tmp/conf/keyed.yaml" "$tmp/spec.json" >/dev/null 2>"$tmp/run.err" || code=$?
[ "$code" = 2 ] && grep -qF "$tmp/conf/keyed.yaml:3: transport.paht: unknown key for the keyed transport" "$tmp/run.err" ||
  fail "a typo under a plug-in transport's keys (exit $code): $(cat "$tmp/run.err")"
echo "config with a plug-in transport: its keys checked ($(cat "$tmp/run.err"))"

# Refusals.
build other_abi <<EOF
#include <altar/plugin/host.h>
ALTAR_API const unsigned altar_plugin_abi = $((abi + 1));
int altar_plugin_init(const altar_plugin_host_t *host, altar_error_t *err) { (void)host; (void)err; return 0; }
EOF
build no_entry <<'EOF'
#include <altar/plugin/host.h>
ALTAR_PLUGIN_DECLARE_ABI();
int not_the_entry_point(void) { return 0; }
EOF
build takes_process <<'EOF'
#include <altar/plugin/host.h>
ALTAR_PLUGIN_DECLARE_ABI();
static int open_(altar_backend_t *be, const altar_strmap_t *c, altar_error_t *e) { (void)be; (void)c; (void)e; return 0; }
static void close_(altar_backend_t *be) { (void)be; }
static int submit(altar_backend_t *be, const altar_spec_t *s, altar_handle_t *h, altar_error_t *e) {
  (void)be; (void)s; (void)h; (void)e; return 0; }
static int poll(altar_backend_t *be, const altar_handle_t *h, size_t n, altar_status_t *st, altar_error_t *e) {
  (void)be; (void)h; (void)n; (void)st; (void)e; return 0; }
static const altar_backend_ops_t ops = {.name = "process", .input_digest_verification = ALTAR_VERIFY_TASK,
  .open = open_, .close = close_, .submit = submit, .poll = poll};
int altar_plugin_init(const altar_plugin_host_t *host, altar_error_t *err) {
  return host->register_backend(host, &ops, err); }
EOF
build undeclared_cancel <<'EOF'
#include <altar/plugin/host.h>
ALTAR_PLUGIN_DECLARE_ABI();
static int open_(altar_backend_t *be, const altar_strmap_t *c, altar_error_t *e) { (void)be; (void)c; (void)e; return 0; }
static void close_(altar_backend_t *be) { (void)be; }
static int submit(altar_backend_t *be, const altar_spec_t *s, altar_handle_t *h, altar_error_t *e) {
  (void)be; (void)s; (void)h; (void)e; return 0; }
static int poll(altar_backend_t *be, const altar_handle_t *h, size_t n, altar_status_t *st, altar_error_t *e) {
  (void)be; (void)h; (void)n; (void)st; (void)e; return 0; }
static int cancel(altar_backend_t *be, const altar_handle_t *h, altar_error_t *e) { (void)be; (void)h; (void)e; return 0; }
/* cancel without ALTAR_BACKEND_CAP_CANCEL: refused at load, not at the first open. */
static const altar_backend_ops_t ops = {.name = "undeclared", .input_digest_verification = ALTAR_VERIFY_TASK,
  .open = open_, .close = close_, .submit = submit, .poll = poll, .cancel = cancel};
int altar_plugin_init(const altar_plugin_host_t *host, altar_error_t *err) {
  return host->register_backend(host, &ops, err); }
EOF
build half_transport <<'EOF'
#include <altar/plugin/host.h>
ALTAR_PLUGIN_DECLARE_ABI();
static const altar_transport_ops_t ops = {.name = "half"};
int altar_plugin_init(const altar_plugin_host_t *host, altar_error_t *err) {
  (void)host->register_transport(host, &ops, err);
  return 0; /* ignoring the failure does not make the load succeed */
}
EOF
printf 'not a shared object\n' >"$tmp/bad/not_elf.so"

refused() { # label, plug-in file, expected message (fixed string), then how altar is started
  label=$1 file=$2 want=$3; shift 3
  code=0
  "$@" >"$tmp/ref.out" 2>"$tmp/ref.err" || code=$?
  [ "$code" = 2 ] || fail "$label: exit $code, not 2: $(cat "$tmp/ref.err")"
  grep -qF -- "$file" "$tmp/ref.err" || fail "$label: the message does not name $file: $(cat "$tmp/ref.err")"
  grep -qF -- "$want" "$tmp/ref.err" || fail "$label: want '$want' in: $(cat "$tmp/ref.err")"
  echo "refused ($label): $(cat "$tmp/ref.err")"
}
refused "other ABI" "$tmp/bad/other_abi.so" \
  "built for plug-in ABI $((abi + 1)), this altar ($("$altar" --version | cut -d' ' -f2)) has ABI $abi" \
  env ALTAR_PLUGIN_PATH="$tmp/bad/other_abi.so" "$altar" run "$tmp/spec.json"
refused "no entry point" "$tmp/bad/no_entry.so" "no entry point altar_plugin_init" \
  env ALTAR_PLUGIN_PATH="$tmp/bad/no_entry.so" "$altar" run "$tmp/spec.json"
refused "not ELF" "$tmp/bad/not_elf.so" "cannot be loaded: " \
  env ALTAR_PLUGIN_PATH="$tmp/bad/not_elf.so" "$altar" run "$tmp/spec.json"
refused "built-in name" "$tmp/bad/takes_process.so" "backend 'process' is already registered by altar itself" \
  env ALTAR_PLUGIN_PATH="$tmp/bad/takes_process.so" "$altar" run "$tmp/spec.json"
refused "undeclared capability" "$tmp/bad/undeclared_cancel.so" \
  "backend 'undeclared': the vtable has 'cancel' but caps does not declare it" \
  env ALTAR_PLUGIN_PATH="$tmp/bad/undeclared_cancel.so" "$altar" run "$tmp/spec.json"
refused "half a transport" "$tmp/bad/half_transport.so" "transport 'half' lacks the required operation 'open'" \
  env ALTAR_PLUGIN_PATH="$tmp/bad/half_transport.so" "$altar" run "$tmp/spec.json"
refused "missing (env)" "$tmp/bad/missing.so" "ALTAR_PLUGIN_PATH: plug-in $tmp/bad/missing.so: No such file" \
  env ALTAR_PLUGIN_PATH="$tmp/bad/missing.so" "$altar" run "$tmp/spec.json"
# Config entries: FILE:LINE of the entry.
for bad in no_entry missing other_abi; do
  printf 'backend: {name: subprocess}\n\nplugins:\n  - ../plugins/subprocess.so\n  - ../bad/%s.so\n' "$bad" \
    >"$tmp/conf/bad.yaml"
  refused "config $bad" "$tmp/conf/../bad/$bad.so" "$tmp/conf/bad.yaml:5: plugins[1]: plug-in " \
    env -u ALTAR_PLUGIN_PATH "$altar" run --config "$tmp/conf/bad.yaml" "$tmp/spec.json"
done
echo "ok: subprocess plug-in built against altar.pc, contract suite passed via ALTAR_PLUGIN_PATH and plugins:, jobs ran, bad plug-ins refused"
