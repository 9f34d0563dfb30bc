/* tools/modal_bridge.py and the C runtime that drives it, against a
 * stand-in for the Modal SDK: a fake `modal` package (tests/unit/fake_modal)
 * copied into a temp dir on PYTHONPATH. Checks the JSON-lines protocol, every
 * operation, errors, the bridge restarting after a crash, the backend end to
 * end through it, and the clear refusal when the SDK is not importable. */
#include "altar/modal.h"
#include "altar/storage.h"
#include "testutil.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *dir, *state, *bridge;

static int sh(const char *cmd) {
  int st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int suite_init(void) {
  dir = altar_test_tmpdir("modal-bridge");
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s/py' '%s/state' '%s/broken/modal' && cp -r '%s/tests/unit/fake_modal/modal' '%s/py/' && "
           "printf 'raise ImportError(\"simulated: no modal here\")\\n' > '%s/broken/modal/__init__.py'",
           dir, dir, dir, altar_test_source_dir(), dir, dir);
  if (sh(cmd) != 0) return 1;
  size_t n = strlen(dir) + 32;
  state = malloc(n);
  snprintf(state, n, "%s/state", dir);
  n = strlen(altar_test_source_dir()) + 64;
  bridge = malloc(n);
  snprintf(bridge, n, "%s/tools/modal_bridge.py", altar_test_source_dir());
  snprintf(cmd, sizeof cmd, "%s/py", dir);
  setenv("PYTHONPATH", cmd, 1);
  setenv("FAKE_MODAL_STATE", state, 1);
  return 0;
}

static int suite_clean(void) {
  altar_test_rmtree(dir);
  free(dir);
  free(state);
  free(bridge);
  return 0;
}

static altar_modal_runtime_t *new_rt(void) {
  altar_error_t err = {0};
  altar_modal_runtime_t *rt = altar_modal_bridge_runtime_new(NULL, bridge, 30000, &err);
  if (!rt) fprintf(stderr, "bridge runtime: %s\n", err.msg);
  CU_ASSERT_FATAL(rt != NULL);
  return rt;
}

static json_t *sandbox_record(const char *id) {
  char path[2048];
  snprintf(path, sizeof path, "%s/sandboxes/%s.json", state, id);
  json_t *j = json_load_file(path, 0, NULL);
  CU_ASSERT_FATAL(j != NULL);
  return j;
}

static void test_operations(void) {
  altar_modal_runtime_t *rt = new_rt();
  altar_strmap_t tags = {0};
  altar_strmap_set(&tags, "job_id", "j1");
  altar_strmap_set(&tags, "fold", "0");
  char *cmd[] = {"exit", "3"};
  altar_modal_sandbox_req_t req = {.app_name = "app-x", .volume_name = "vol-x", .mount_root = "/mnt/volume",
                                   .image = "python:3.11-slim", .command = cmd, .n_command = 2, .gpu = "A100:2",
                                   .memory_mb = {true, 2048}, .timeout_s = 600, .tags = &tags};
  char *id = NULL;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(rt->ops->run_sandbox(rt->impl, &req, &id, &err), 0);
  CU_ASSERT_STRING_EQUAL(id, "sb-fake-1");
  json_t *rec = sandbox_record(id);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(rec, "app")), "app-x");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(rec, "image")), "python:3.11-slim");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(rec, "volumes"), "/mnt/volume")), "vol-x");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(rec, "gpu")), "A100:2");
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(rec, "memory")), 2048);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(rec, "timeout")), 600);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(rec, "tags"), "fold")), "0");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_object_get(rec, "command"), 1)), "3");
  json_decref(rec);

  bool done = true;
  int code = -1;
  CU_ASSERT_EQUAL(rt->ops->poll_sandbox(rt->impl, id, &done, &code, &err), 0);
  CU_ASSERT(!done); /* None: running */
  CU_ASSERT_EQUAL(rt->ops->poll_sandbox(rt->impl, id, &done, &code, &err), 0);
  CU_ASSERT(done);
  CU_ASSERT_EQUAL(code, 3);
  CU_ASSERT_EQUAL(rt->ops->poll_sandbox(rt->impl, "sb-nope", &done, &code, &err), ALTAR_ENOTFOUND);

  /* A CPU sandbox without memory sends nulls; terminate makes it 137. */
  char *sleeper[] = {"sleep", "inf"};
  req.command = sleeper;
  req.gpu = NULL;
  req.memory_mb.set = false;
  req.tags = NULL;
  char *id2 = NULL;
  CU_ASSERT_EQUAL_FATAL(rt->ops->run_sandbox(rt->impl, &req, &id2, &err), 0);
  rec = sandbox_record(id2);
  CU_ASSERT(json_is_null(json_object_get(rec, "gpu")));
  CU_ASSERT(json_is_null(json_object_get(rec, "memory")));
  json_decref(rec);
  CU_ASSERT_EQUAL(rt->ops->terminate_sandbox(rt->impl, id2, &err), 0);
  CU_ASSERT_EQUAL(rt->ops->poll_sandbox(rt->impl, id2, &done, &code, &err), 0);
  CU_ASSERT(done && code == 137);
  CU_ASSERT_EQUAL(rt->ops->terminate_sandbox(rt->impl, "sb-nope", &err), 0); /* gone: fine */

  /* Volume round trip. */
  char local[2048], back[2048], inside[2048];
  snprintf(local, sizeof local, "%s/up.bin", dir);
  snprintf(back, sizeof back, "%s/down.bin", dir);
  altar_test_write_file(local, "bytes\0with nul", 14);
  CU_ASSERT_EQUAL(rt->ops->upload(rt->impl, "vol-x", local, "models/m.bin", &err), 0);
  snprintf(inside, sizeof inside, "%s/volumes/vol-x/models/m.bin", state);
  size_t len = 0;
  char *got = altar_test_read_file(inside, &len);
  CU_ASSERT(got && len == 14 && !memcmp(got, "bytes\0with nul", 14));
  free(got);
  CU_ASSERT_EQUAL(rt->ops->download(rt->impl, "vol-x", "models/m.bin", back, &err), 0);
  got = altar_test_read_file(back, &len);
  CU_ASSERT(got && len == 14 && !memcmp(got, "bytes\0with nul", 14));
  free(got);
  CU_ASSERT_EQUAL(rt->ops->download(rt->impl, "vol-x", "models/none.bin", back, &err), ALTAR_ENOTFOUND);
  CU_ASSERT_EQUAL(rt->ops->upload(rt->impl, "vol-x", "/no/such/file", "x", &err), ALTAR_ENOTFOUND);
  free(id);
  free(id2);
  altar_strmap_clear(&tags);
  altar_modal_runtime_free(rt);
}

static void test_restart_after_crash(void) {
  altar_modal_runtime_t *rt = new_rt();
  char *cmd[] = {"exit", "0"};
  altar_modal_sandbox_req_t req = {.app_name = "a", .volume_name = "v", .mount_root = "/mnt/volume",
                                   .image = "crash", .command = cmd, .n_command = 2, .timeout_s = 60};
  char *id = NULL;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(rt->ops->run_sandbox(rt->impl, &req, &id, &err), ALTAR_EBACKEND);
  CU_ASSERT(strstr(err.msg, "exited") != NULL);
  CU_ASSERT(id == NULL);
  /* The next call starts a fresh bridge. */
  req.image = "python:3.11-slim";
  CU_ASSERT_EQUAL(rt->ops->run_sandbox(rt->impl, &req, &id, &err), 0);
  CU_ASSERT(id != NULL);
  free(id);
  altar_modal_runtime_free(rt);
}

static void test_sdk_missing(void) {
  char py[2048];
  snprintf(py, sizeof py, "%s/broken", dir);
  char *old = strdup(getenv("PYTHONPATH"));
  setenv("PYTHONPATH", py, 1);
  altar_modal_runtime_t *rt = new_rt();
  bool done;
  int code;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(rt->ops->poll_sandbox(rt->impl, "sb-1", &done, &code, &err), ALTAR_ECONFIG);
  CU_ASSERT(strstr(err.msg, "pip install modal") != NULL);
  CU_ASSERT(strstr(err.msg, "simulated") != NULL);
  altar_modal_runtime_free(rt);
  setenv("PYTHONPATH", old, 1);
  free(old);
  /* A bridge path that does not exist is refused at construction. */
  CU_ASSERT(altar_modal_bridge_runtime_new(NULL, "/no/such/bridge.py", 0, &err) == NULL);
  CU_ASSERT_EQUAL(err.code, ALTAR_ECONFIG);
}

/* Raw protocol: malformed lines and unknown ops are answered, not fatal. */
static void test_protocol_lines(void) {
  char out[2048], cmd[4096];
  snprintf(out, sizeof out, "%s/raw.out", dir);
  snprintf(cmd, sizeof cmd,
           "printf '%%s\\n' 'not json' '[1,2]' '{\"op\":\"nope\"}' '{\"op\":\"run_sandbox\"}' "
           "'{\"op\":\"poll_sandbox\",\"sandbox_id\":\"sb-none\"}' '{\"op\":\"ping\"}' | python3 '%s' > '%s'",
           bridge, out);
  CU_ASSERT_EQUAL_FATAL(sh(cmd), 0);
  char *text = altar_test_read_file(out, NULL);
  CU_ASSERT_FATAL(text != NULL);
  const char *want[] = {"ready", "invalid", "invalid", "invalid", "invalid", "not_found", "modal_version"};
  char *save = NULL, *line = strtok_r(text, "\n", &save);
  size_t i = 0;
  for (; line && i < 7; i++, line = strtok_r(NULL, "\n", &save)) {
    json_t *j = json_loads(line, 0, NULL);
    CU_ASSERT_FATAL(j != NULL);
    if (!strstr(line, want[i])) fprintf(stderr, "line %zu: %s (want %s)\n", i, line, want[i]);
    CU_ASSERT(strstr(line, want[i]) != NULL);
    CU_ASSERT_EQUAL(json_is_true(json_object_get(j, "ok")), i == 0 || i == 6);
    json_decref(j);
  }
  CU_ASSERT_EQUAL(i, 7);
  CU_ASSERT(line == NULL);
  free(text);
}

/* The modal backend end to end through the bridge and the stand-in SDK. */
static void test_backend_through_bridge(void) {
  altar_modal_t *m = altar_modal_new(NULL, new_rt(), NULL);
  CU_ASSERT_FATAL(m != NULL);
  altar_spec_t *s = altar_spec_new("score", "python:3.11-slim");
  altar_spec_add_arg(s, "exit");
  altar_spec_add_arg(s, "4");
  altar_spec_set_label(s, "job_id", "jb");
  altar_spec_set_gpu(s, "gpu", 1);
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_modal_submit(m, s, &h, &err), 0);
  json_t *rec = sandbox_record(h.external_id);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(rec, "timeout")), 86400);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(rec, "gpu")), "A10G");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(rec, "tags"), "job_id")), "jb");
  json_decref(rec);
  altar_status_t st;
  memset(&st, 0, sizeof st);
  CU_ASSERT_EQUAL(altar_modal_poll(m, &h, 1, &st, &err), 0);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_RUNNING);
  altar_status_clear(&st);
  CU_ASSERT_EQUAL(altar_modal_poll(m, &h, 1, &st, &err), 0);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
  CU_ASSERT_STRING_EQUAL(st.failure->reason, "exit_4");
  altar_status_clear(&st);
  /* Staging and collection through the volume. */
  char src[2048], uri[2100], dst_uri[2100];
  snprintf(src, sizeof src, "%s/in.txt", dir);
  altar_test_write_file(src, "input", 5);
  snprintf(uri, sizeof uri, "file://%s", src);
  altar_transfer_t in = {.uri = uri, .logical_path = "jobs/jb/in.txt"};
  CU_ASSERT_EQUAL(altar_modal_stage_inputs(m, &in, 1, &err), 0);
  snprintf(dst_uri, sizeof dst_uri, "file://%s/collected.txt", dir);
  altar_transfer_t out = {.uri = dst_uri, .logical_path = "jobs/jb/in.txt"};
  CU_ASSERT_EQUAL(altar_modal_collect_outputs(m, &out, 1, &err), 0);
  snprintf(src, sizeof src, "%s/collected.txt", dir);
  char *got = altar_test_read_file(src, NULL);
  CU_ASSERT(got && !strcmp(got, "input"));
  free(got);
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar_modal_free(m);
}


/* `altar run SPEC --backend modal` through the bridge and the stand-in SDK. */
static int altar_run(const char *spec_json, json_t **pstatus) {
  char spec[2048], out[2048];
  snprintf(spec, sizeof spec, "%s/cli-spec.json", dir);
  snprintf(out, sizeof out, "%s/cli.out", dir);
  altar_test_write_file(spec, spec_json, strlen(spec_json));
  pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir) != 0) _exit(126);
    setenv("ALTAR_MODAL_BRIDGE", bridge, 1);
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || dup2(fd, 1) < 0) _exit(126);
    execl(altar_test_altar_bin(), "altar", "run", spec, "--backend", "modal", "--quiet", (char *)NULL);
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  char *got = altar_test_read_file(out, NULL);
  *pstatus = got ? json_loads(got, 0, NULL) : NULL;
  free(got);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_altar_run_cli(void) {
  json_t *status = NULL;
  int rc = altar_run("{\"kind\":\"score\",\"image\":\"python:3.11-slim\",\"command\":[\"exit\",\"0\"],"
                     "\"labels\":{\"job_id\":\"cli\"}}",
                     &status);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(status, "state")), "succeeded");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(json_object_get(status, "handle"), "backend")), "modal");
  json_decref(status);
  rc = altar_run("{\"kind\":\"score\",\"image\":\"python:3.11-slim\",\"command\":[\"exit\",\"3\"],"
                 "\"labels\":{\"job_id\":\"cli\"}}",
                 &status);
  CU_ASSERT_EQUAL(rc, 1);
  CU_ASSERT_STRING_EQUAL(
      json_string_value(json_object_get(json_object_get(status, "failure"), "reason")), "exit_3");
  json_decref(status);
  /* Past Modal's 24 h cap: refused, naming the field, before anything runs. */
  rc = altar_run("{\"kind\":\"score\",\"image\":\"python:3.11-slim\",\"command\":[\"exit\",\"0\"],"
                 "\"timeout_s\":90000}",
                 &status);
  CU_ASSERT_NOT_EQUAL(rc, 0);
  json_decref(status);
}

static void add(void) {
  altar_storage_register_builtin();
  ALTAR_SUITE("modal_bridge", suite_init, suite_clean);
  ALTAR_TEST(test_operations);
  ALTAR_TEST(test_restart_after_crash);
  ALTAR_TEST(test_sdk_missing);
  ALTAR_TEST(test_protocol_lines);
  ALTAR_TEST(test_backend_through_bridge);
  ALTAR_TEST(test_altar_run_cli);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
