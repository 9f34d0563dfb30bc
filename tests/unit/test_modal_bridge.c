/* tools/modal_bridge.py and the C runtime that drives it, through the real,
 * pinned Modal SDK (scripts/modal-sdk.sh builds or reuses its virtual
 * environment) against a fake Modal control plane on the SDK's own protocol
 * (tests/modal/fake_modal_server.py, one per run of this program), reached
 * through MODAL_SERVER_URL. The fake runs each sandbox's command as a local
 * process over the volume's directory, so exit codes, timeouts (124),
 * terminations (137), the digest-checking wrapper and the sandboxes' output
 * are real. Covers every bridge operation, GPU requests (the SDK's older
 * call family), a volume round trip larger than one 8 MiB block, missing
 * sandboxes and files, refused credentials, the deadline that cancels a
 * sandbox stuck in scheduling, a failure detail made of the output's tail
 * (both call families), the backend and `altar run --backend modal` end to
 * end, and an installed altar finding its bridge without the source tree.
 * The backend contract suite runs here too, through the SDK and the fake. */
#include "altar/buf.h"
#include "altar/codec.h"
#include "altar/digest.h"
#include "altar/modal.h"
#include "altar/storage.h"
#include "backend_contract.h"
#include "testutil.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOKEN_ID "ak-altar-test"
#define TOKEN_SECRET "as-altar-test"
#define UNSCHEDULABLE_GPU "H100" /* the fake never schedules it */
#define WAIT_S 60                /* bound on waiting for a sandbox to end */

static char *dir, *vols, *vol, *bridge, *python;
static char http_url[128];
static pid_t fake_pid;
static int fake_stdin = -1;

static void path_in(char *out, size_t sz, const char *base, const char *name) {
  snprintf(out, sz, "%s/%s", base, name);
}

/* The last line a shell command printed (malloc'd), or NULL when it failed. */
static char *sh_line(const char *cmd) {
  FILE *p = popen(cmd, "r");
  if (!p) return NULL;
  char line[4096] = "", last[4096] = "";
  while (fgets(line, sizeof line, p)) snprintf(last, sizeof last, "%s", line);
  if (pclose(p) != 0) return NULL;
  last[strcspn(last, "\n")] = '\0';
  return *last ? strdup(last) : NULL;
}

static int sh(const char *cmd) {
  int st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Starts the fake control plane; fills http_url and MODAL_SERVER_URL. */
static int start_fake(void) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) return -1;
  char script[2048];
  snprintf(script, sizeof script, "%s/tests/modal/fake_modal_server.py", altar_test_source_dir());
  fake_pid = fork();
  if (fake_pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    execl(python, python, "-u", script, "--volume-root", vols, "--token-id", TOKEN_ID, "--token-secret", TOKEN_SECRET,
          "--unschedulable-gpu", UNSCHEDULABLE_GPU, (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  fake_stdin = in[1]; /* closing it stops the fake */
  char line[1024];
  size_t len = 0;
  while (len < sizeof line - 1 && !memchr(line, '\n', len)) {
    struct pollfd pfd = {out[0], POLLIN, 0};
    if (poll(&pfd, 1, 60000) <= 0) break;
    ssize_t n = read(out[0], line + len, sizeof line - 1 - len);
    if (n <= 0) break;
    len += (size_t)n;
  }
  close(out[0]);
  line[len] = '\0';
  json_t *addr = json_loads(line, JSON_DISABLE_EOF_CHECK, NULL);
  const char *grpc = json_string_value(json_object_get(addr, "grpc"));
  const char *http = json_string_value(json_object_get(addr, "http"));
  int rc = grpc && http ? 0 : -1;
  if (!rc) {
    setenv("MODAL_SERVER_URL", grpc, 1);
    snprintf(http_url, sizeof http_url, "%s", http);
  } else {
    fprintf(stderr, "fake Modal server did not start (said: %s)\n", line);
  }
  json_decref(addr);
  return rc;
}

/* The SDK environment and the fake server, started by whichever suite runs
 * first and stopped after the last one. */
static int world_rc = 1;
static bool world_started;

static int world_start(void) {
  if (world_started) return world_rc;
  world_started = true;
  dir = altar_test_tmpdir("modal-bridge");
  char cmd[4096], p[2048];
  snprintf(cmd, sizeof cmd, "'%s/scripts/modal-sdk.sh'", altar_test_source_dir());
  python = sh_line(cmd);
  if (!python) {
    fprintf(stderr, "scripts/modal-sdk.sh failed: no Modal SDK environment\n");
    return 1;
  }
  path_in(p, sizeof p, dir, "vols");
  vols = strdup(p);
  path_in(p, sizeof p, vols, "altar-data");
  vol = strdup(p); /* the default volume's directory: the sandboxes' mount_root */
  snprintf(p, sizeof p, "%s/tools/modal_bridge.py", altar_test_source_dir());
  bridge = strdup(p);
  /* The SDK's own settings: our server, our token, no ~/.modal.toml. */
  setenv("MODAL_TOKEN_ID", TOKEN_ID, 1);
  setenv("MODAL_TOKEN_SECRET", TOKEN_SECRET, 1);
  path_in(p, sizeof p, dir, "no-modal.toml");
  setenv("MODAL_CONFIG_PATH", p, 1);
  unsetenv("MODAL_PROFILE");
  unsetenv("MODAL_ENVIRONMENT");
  curl_global_init(CURL_GLOBAL_DEFAULT);
  world_rc = start_fake();
  return world_rc;
}

static int suite_init(void) { return world_start(); }

static int suite_clean(void) {
  if (fake_stdin >= 0) close(fake_stdin);
  if (fake_pid > 0) waitpid(fake_pid, NULL, 0);
  altar_test_rmtree(dir);
  free(dir);
  free(vols);
  free(vol);
  free(bridge);
  free(python);
  curl_global_cleanup();
  return 0;
}

/* ---- the fake's recorded facts ---- */

static size_t on_body(char *data, size_t size, size_t n, void *ctx) {
  return altar_buf_append(ctx, data, size * n) ? 0 : size * n;
}

static json_t *http_call(const char *method, const char *path) {
  char url[512];
  snprintf(url, sizeof url, "%s%s", http_url, path);
  altar_buf_t body = {0};
  CURL *c = curl_easy_init();
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
  long status = 0;
  CURLcode cc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(c);
  json_t *j = cc == CURLE_OK && status == 200 ? json_loadb((char *)body.data, body.len, 0, NULL) : NULL;
  altar_buf_free(&body);
  return j;
}

static json_t *fake_state(void) {
  json_t *j = http_call("GET", "/_fake/state");
  CU_ASSERT_FATAL(j != NULL);
  return j;
}

static long calls(json_t *state, const char *rpc) {
  return (long)json_integer_value(json_object_get(json_object_get(state, "calls"), rpc));
}

static long calls_now(const char *rpc) {
  json_t *s = fake_state();
  long n = calls(s, rpc);
  json_decref(s);
  return n;
}

/* The fake's record of a sandbox (a new reference). */
static json_t *sandbox_record(const char *id) {
  json_t *s = fake_state();
  json_t *rec = json_incref(json_object_get(json_object_get(s, "sandboxes"), id));
  json_decref(s);
  CU_ASSERT_FATAL(rec != NULL);
  return rec;
}

static const char *rec_str(json_t *rec, const char *key) { return json_string_value(json_object_get(rec, key)); }

/* ---- driving the runtime ---- */

static altar_modal_runtime_t *new_rt_with(const char *py, long run_ms) {
  altar_error_t err = {0};
  altar_modal_bridge_config_t cfg = {
      .python = py, .bridge = bridge, .reply_timeout_ms = 60000, .run_timeout_ms = run_ms};
  altar_modal_runtime_t *rt = altar_modal_bridge_runtime_new(&cfg, &err);
  if (!rt) fprintf(stderr, "bridge runtime: %s\n", err.msg);
  CU_ASSERT_FATAL(rt != NULL);
  return rt;
}
static altar_modal_runtime_t *new_rt(void) { return new_rt_with(python, 0); }

static altar_modal_sandbox_req_t base_req(char **cmd, size_t n) {
  return (altar_modal_sandbox_req_t){.app_name = "app-x",
                                     .volume_name = "altar-data",
                                     .mount_root = vol,
                                     .image = "python:3.11-slim",
                                     .command = cmd,
                                     .n_command = n,
                                     .timeout_s = 600};
}

static char *run(altar_modal_runtime_t *rt, const altar_modal_sandbox_req_t *req) {
  char *id = NULL;
  altar_error_t err = {0};
  int rc = rt->ops->run_sandbox(rt->impl, req, &id, &err);
  if (rc) fprintf(stderr, "run_sandbox: %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  return id;
}

/* Polls until the sandbox ends (bounded by WAIT_S); its exit code, or -1. */
static int wait_exit(altar_modal_runtime_t *rt, const char *id) {
  for (int i = 0; i < WAIT_S * 20; i++) {
    bool done = false;
    int code = 0;
    altar_error_t err = {0};
    int rc = rt->ops->poll_sandbox(rt->impl, id, &done, &code, &err);
    if (rc) {
      fprintf(stderr, "poll %s: %s\n", id, err.msg);
      return -1;
    }
    if (done) return code;
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
  }
  CU_FAIL("sandbox did not end within the wait bound");
  return -1;
}

static void test_sandbox_cpu(void) {
  altar_modal_runtime_t *rt = new_rt();
  altar_strmap_t tags = {0};
  altar_strmap_set(&tags, "job_id", "j1");
  altar_strmap_set(&tags, "fold", "0");
  char *cmd[] = {"sh", "-c", "exit 3"};
  altar_modal_sandbox_req_t req = base_req(cmd, 3);
  req.memory_mb = (altar_opt_i64_t){true, 2048};
  req.tags = &tags;
  long images = calls_now("ImageGetOrCreate"), tag_calls = calls_now("SandboxTagsSetV2");
  char *id = run(rt, &req);
  json_t *rec = sandbox_record(id);
  CU_ASSERT_STRING_EQUAL(rec_str(rec, "family"), "v2"); /* no GPU: SandboxCreateV2 */
  CU_ASSERT_STRING_EQUAL(json_string_value(json_array_get(json_object_get(rec, "args"), 2)), "exit 3");
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(rec, "timeout_secs")), 600);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(rec, "memory_mb")), 2048);
  CU_ASSERT(json_is_null(json_object_get(rec, "gpu")));
  CU_ASSERT_STRING_EQUAL(rec_str(json_object_get(rec, "tags"), "fold"), "0");
  CU_ASSERT_STRING_EQUAL(rec_str(json_object_get(rec, "tags"), "job_id"), "j1");
  CU_ASSERT(json_object_get(json_object_get(rec, "volumes"), vol) != NULL);
  json_t *state = fake_state();
  const char *image_id = rec_str(rec, "image_id");
  CU_ASSERT_STRING_EQUAL(rec_str(json_object_get(json_object_get(state, "images"), image_id), "ref"),
                         "python:3.11-slim");
  CU_ASSERT(json_is_string(json_object_get(json_object_get(state, "apps"), "app-x")));
  CU_ASSERT_EQUAL(calls(state, "SandboxTagsSetV2"), tag_calls); /* tags went in the create call */
  CU_ASSERT_EQUAL(json_array_size(json_object_get(state, "unimplemented")), 0);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(state, "auth_failures")), 0);
  json_decref(state);
  json_decref(rec);
  long v1_waits = calls_now("SandboxWait"), v2_waits = calls_now("SandboxWaitV2");
  CU_ASSERT_EQUAL(wait_exit(rt, id), 3);
  CU_ASSERT(calls_now("SandboxWaitV2") > v2_waits); /* the id's shape picks the V2 calls */
  CU_ASSERT_EQUAL(calls_now("SandboxWait"), v1_waits);

  /* A second sandbox of the same image: the image is not looked up again. */
  char *ok[] = {"true"};
  req = base_req(ok, 1);
  char *id2 = run(rt, &req);
  CU_ASSERT_EQUAL(wait_exit(rt, id2), 0);
  CU_ASSERT_EQUAL(calls_now("ImageGetOrCreate"), images + 1);
  rec = sandbox_record(id2);
  CU_ASSERT(json_is_null(json_object_get(rec, "memory_mb")));
  CU_ASSERT_EQUAL(json_object_size(json_object_get(rec, "tags")), 0);
  json_decref(rec);
  free(id);
  free(id2);
  altar_strmap_clear(&tags);
  altar_modal_runtime_free(rt);
}

/* With a GPU the SDK uses SandboxCreate + SandboxGetTaskId (and sb- ids of
 * 22 base-62 characters, which send the later calls to the same family). */
static void test_sandbox_gpu(void) {
  altar_modal_runtime_t *rt = new_rt();
  char *cmd[] = {"sh", "-c", "exit 7"};
  altar_modal_sandbox_req_t req = base_req(cmd, 3);
  req.gpu = "A100:2";
  req.memory_mb = (altar_opt_i64_t){true, 4096};
  long task_ids = calls_now("SandboxGetTaskId"), waits = calls_now("SandboxWait");
  char *id = run(rt, &req);
  CU_ASSERT_EQUAL(strlen(id), 25);
  json_t *rec = sandbox_record(id);
  CU_ASSERT_STRING_EQUAL(rec_str(rec, "family"), "v1");
  CU_ASSERT_STRING_EQUAL(rec_str(rec, "gpu"), "A100:2");
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(rec, "memory_mb")), 4096);
  CU_ASSERT(json_is_true(json_object_get(rec, "scheduled")));
  json_decref(rec);
  CU_ASSERT(calls_now("SandboxGetTaskId") > task_ids);
  CU_ASSERT_EQUAL(wait_exit(rt, id), 7);
  CU_ASSERT(calls_now("SandboxWait") > waits); /* polled through the V1 call */
  free(id);
  altar_modal_runtime_free(rt);
}

static void test_timeout_and_terminate(void) {
  altar_modal_runtime_t *rt = new_rt();
  char *cmd[] = {"sleep", "60"};
  altar_modal_sandbox_req_t req = base_req(cmd, 2);
  req.timeout_s = 1;
  char *id = run(rt, &req);
  CU_ASSERT_EQUAL(wait_exit(rt, id), ALTAR_MODAL_TIMEOUT_EXIT_CODE);
  free(id);
  req.timeout_s = 600;
  id = run(rt, &req);
  bool done = true;
  int code = 0;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(rt->ops->poll_sandbox(rt->impl, id, &done, &code, &err), 0);
  CU_ASSERT(!done);
  CU_ASSERT_EQUAL(rt->ops->terminate_sandbox(rt->impl, id, &err), 0);
  CU_ASSERT_EQUAL(wait_exit(rt, id), ALTAR_MODAL_KILLED_EXIT_CODE);
  /* The same 137 as an OOM kill, but Modal's status says terminated. */
  bool oom = true;
  CU_ASSERT_EQUAL(rt->ops->oom_killed(rt->impl, id, &oom, &err), 0);
  CU_ASSERT_FALSE(oom);
  CU_ASSERT_EQUAL(rt->ops->terminate_sandbox(rt->impl, id, &err), 0); /* already ended: fine */
  free(id);
  /* Past its memory: the kernel-OOM status, which only oom_killed tells. */
  char *hog[] = {python, "-c", "import time; x = b'a' * (256 << 20); time.sleep(60)"};
  altar_modal_sandbox_req_t big = base_req(hog, 3);
  big.memory_mb = (altar_opt_i64_t){true, 32};
  id = run(rt, &big);
  CU_ASSERT_EQUAL(wait_exit(rt, id), ALTAR_MODAL_KILLED_EXIT_CODE);
  CU_ASSERT_EQUAL(rt->ops->oom_killed(rt->impl, id, &oom, &err), 0);
  CU_ASSERT_TRUE(oom);
  free(id);
  /* Sandboxes the platform does not know. */
  CU_ASSERT_EQUAL(rt->ops->poll_sandbox(rt->impl, "sb-AAAAAAAAAAAAAAAAAAAAAA", &done, &code, &err), ALTAR_ENOTFOUND);
  CU_ASSERT_EQUAL(rt->ops->poll_sandbox(rt->impl, "sb-nope", &done, &code, &err), ALTAR_ENOTFOUND);
  CU_ASSERT_EQUAL(rt->ops->terminate_sandbox(rt->impl, "sb-nope", &err), 0); /* gone: nothing to stop */
  altar_modal_runtime_free(rt);
}

/* 20 MiB + 3 bytes: three blocks, the last one short. */
static void test_volume_round_trip(void) {
  altar_modal_runtime_t *rt = new_rt();
  size_t len = (20u << 20) + 3;
  unsigned char *data = malloc(len);
  uint32_t x = 2463534242u;
  for (size_t i = 0; i < len; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    data[i] = (unsigned char)x;
  }
  char local[2048], back[2048], inside[2048];
  path_in(local, sizeof local, dir, "big.bin");
  path_in(back, sizeof back, dir, "big.back");
  altar_test_write_file(local, data, len);
  long puts = calls_now("PUT /blocks"), gets = calls_now("GET /blocks");
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(rt->ops->upload(rt->impl, "altar-data", local, "models/big.bin", &err), 0);
  CU_ASSERT_EQUAL(calls_now("PUT /blocks"), puts + 3);
  path_in(inside, sizeof inside, vol, "models/big.bin");
  size_t got_len = 0;
  char *got = altar_test_read_file(inside, &got_len);
  CU_ASSERT(got && got_len == len && !memcmp(got, data, len));
  free(got);
  CU_ASSERT_EQUAL_FATAL(rt->ops->download(rt->impl, "altar-data", "models/big.bin", back, &err), 0);
  CU_ASSERT_EQUAL(calls_now("GET /blocks"), gets + 3);
  got = altar_test_read_file(back, &got_len);
  CU_ASSERT(got && got_len == len && !memcmp(got, data, len));
  free(got);
  /* The same bytes again: the server has every block, none is sent. */
  CU_ASSERT_EQUAL(rt->ops->upload(rt->impl, "altar-data", local, "models/copy.bin", &err), 0);
  CU_ASSERT_EQUAL(calls_now("PUT /blocks"), puts + 3);
  /* Missing on either side. */
  CU_ASSERT_EQUAL(rt->ops->download(rt->impl, "altar-data", "models/none.bin", back, &err), ALTAR_ENOTFOUND);
  CU_ASSERT(strstr(err.msg, "none.bin") != NULL);
  struct stat sb;
  CU_ASSERT(stat(back, &sb) == 0 && (size_t)sb.st_size == len); /* the old copy is left alone */
  CU_ASSERT_EQUAL(rt->ops->upload(rt->impl, "altar-data", "/no/such/file", "x", &err), ALTAR_ENOTFOUND);
  free(data);
  altar_modal_runtime_free(rt);
}

/* A GPU sandbox that is never scheduled: the SDK would wait 21 minutes.
 * The C side's deadline sends the bridge SIGINT; the SDK's own clean-up
 * terminates the sandbox; the bridge answers and stays usable. */
static void test_deadline_cancels_scheduling(void) {
  altar_modal_runtime_t *rt = new_rt_with(python, 5000);
  char *cmd[] = {"true"};
  altar_modal_sandbox_req_t req = base_req(cmd, 1);
  req.gpu = UNSCHEDULABLE_GPU;
  long creates = calls_now("SandboxCreate"), terminates = calls_now("SandboxTerminate");
  char *id = NULL;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(rt->ops->run_sandbox(rt->impl, &req, &id, &err), ALTAR_ETIMEOUT);
  CU_ASSERT(err.retriable);
  CU_ASSERT(strstr(err.msg, "cancelled") != NULL);
  CU_ASSERT(id == NULL);
  json_t *state = fake_state();
  CU_ASSERT_EQUAL(calls(state, "SandboxCreate"), creates + 1);
  CU_ASSERT_EQUAL(calls(state, "SandboxTerminate"), terminates + 1);
  const char *sid;
  json_t *rec;
  int stuck = 0;
  json_object_foreach(json_object_get(state, "sandboxes"), sid, rec) {
    const char *gpu = rec_str(rec, "gpu");
    if (!gpu || strncmp(gpu, UNSCHEDULABLE_GPU ":", strlen(UNSCHEDULABLE_GPU) + 1)) continue;
    stuck++;
    CU_ASSERT(json_is_false(json_object_get(rec, "scheduled")));
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(rec, "status")), 3); /* GENERIC_STATUS_TERMINATED */
  }
  CU_ASSERT_EQUAL(stuck, 1);
  json_decref(state);
  /* Still in step: the next call is answered. */
  req.gpu = NULL;
  id = run(rt, &req);
  CU_ASSERT_EQUAL(wait_exit(rt, id), 0);
  free(id);
  altar_modal_runtime_free(rt);
}

/* The SDK refuses what the platform refused: a wrong token secret. */
static void test_wrong_token(void) {
  setenv("MODAL_TOKEN_SECRET", "as-wrong", 1);
  altar_modal_runtime_t *rt = new_rt();
  json_t *state = fake_state();
  long failures = (long)json_integer_value(json_object_get(state, "auth_failures"));
  json_decref(state);
  bool done;
  int code;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(rt->ops->poll_sandbox(rt->impl, "sb-AAAAAAAAAAAAAAAAAAAAAA", &done, &code, &err), ALTAR_EBACKEND);
  CU_ASSERT(strstr(err.msg, "AuthError") != NULL);
  state = fake_state();
  CU_ASSERT(json_integer_value(json_object_get(state, "auth_failures")) > failures);
  json_decref(state);
  altar_modal_runtime_free(rt);
  setenv("MODAL_TOKEN_SECRET", TOKEN_SECRET, 1);
}

/* A bridge ignores SIGINT between requests; one that dies is restarted by
 * the next call. The python is a wrapper that records the bridge's pid so
 * the test can signal it. */
static void test_restart_after_crash(void) {
  char wrapper[2048], pidfile[2048];
  path_in(wrapper, sizeof wrapper, dir, "python-wrapper.sh");
  path_in(pidfile, sizeof pidfile, dir, "bridge.pid");
  char text[4096];
  snprintf(text, sizeof text, "#!/bin/sh\necho $$ > '%s'\nexec '%s' \"$@\"\n", pidfile, python);
  altar_test_write_file(wrapper, text, strlen(text));
  chmod(wrapper, 0755);
  altar_modal_runtime_t *rt = new_rt_with(wrapper, 0);
  char *cmd[] = {"true"};
  altar_modal_sandbox_req_t req = base_req(cmd, 1);
  char *id = run(rt, &req);
  char *pid_text = altar_test_read_file(pidfile, NULL);
  CU_ASSERT_FATAL(pid_text != NULL);
  pid_t first = (pid_t)strtol(pid_text, NULL, 10);
  free(pid_text);
  bool done;
  int code;
  altar_error_t err = {0};
  /* SIGINT between requests (a Ctrl-C at the terminal) leaves it serving. */
  CU_ASSERT_FATAL(first > 0 && kill(first, SIGINT) == 0);
  CU_ASSERT_EQUAL(rt->ops->poll_sandbox(rt->impl, id, &done, &code, &err), 0);
  CU_ASSERT_EQUAL(kill(first, 0), 0);
  CU_ASSERT_FATAL(kill(first, SIGKILL) == 0);
  CU_ASSERT_EQUAL(rt->ops->poll_sandbox(rt->impl, id, &done, &code, &err), ALTAR_EBACKEND);
  CU_ASSERT(err.retriable);
  CU_ASSERT_EQUAL(wait_exit(rt, id), 0); /* a fresh bridge */
  pid_text = altar_test_read_file(pidfile, NULL);
  CU_ASSERT(pid_text && (pid_t)strtol(pid_text, NULL, 10) != first);
  free(pid_text);
  free(id);
  altar_modal_runtime_free(rt);
}

static void test_sdk_missing(void) {
  /* A broken installation: a `modal` that cannot be imported, first on the path. */
  char broken[2048], cmd[4096];
  path_in(broken, sizeof broken, dir, "broken");
  snprintf(cmd, sizeof cmd,
           "mkdir -p '%s/modal' && printf 'raise ImportError(\"simulated: no modal here\")\\n' > "
           "'%s/modal/__init__.py'",
           broken, broken);
  CU_ASSERT_EQUAL_FATAL(sh(cmd), 0);
  setenv("PYTHONPATH", broken, 1);
  altar_modal_runtime_t *rt = new_rt();
  bool done;
  int code;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(rt->ops->poll_sandbox(rt->impl, "sb-1", &done, &code, &err), ALTAR_ECONFIG);
  CU_ASSERT(strstr(err.msg, "pip install modal") != NULL);
  CU_ASSERT(strstr(err.msg, "simulated") != NULL);
  altar_modal_runtime_free(rt);
  unsetenv("PYTHONPATH");
  /* A bridge path that does not exist is refused at construction. */
  altar_modal_bridge_config_t cfg = {.bridge = "/no/such/bridge.py"};
  CU_ASSERT(altar_modal_bridge_runtime_new(&cfg, &err) == NULL);
  CU_ASSERT_EQUAL(err.code, ALTAR_ECONFIG);
  CU_ASSERT(strstr(err.msg, "/no/such/bridge.py") != NULL);
}

/* Raw protocol: malformed lines and unknown ops are answered, not fatal. */
static void test_protocol_lines(void) {
  char out[2048], cmd[4096];
  path_in(out, sizeof out, dir, "raw.out");
  snprintf(cmd, sizeof cmd,
           "printf '%%s\\n' 'not json' '[1,2]' '{\"op\":\"nope\"}' '{\"op\":\"run_sandbox\"}' "
           "'{\"op\":\"poll_sandbox\",\"sandbox_id\":\"sb-none\"}' '{\"op\":\"ping\"}' | '%s' '%s' > '%s'",
           python, bridge, out);
  CU_ASSERT_EQUAL_FATAL(sh(cmd), 0);
  char *text = altar_test_read_file(out, NULL);
  CU_ASSERT_FATAL(text != NULL);
  const char *want[] = {"ready", "invalid", "invalid", "invalid", "invalid", "not_found", "1.6.4"};
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

/* The backend end to end: inputs staged through the SDK into the volume,
 * verified by the wrapper inside the sandbox, outputs collected back. */
static void test_backend_through_bridge(void) {
  altar_modal_config_t cfg = {.mount_root = vol};
  altar_modal_t *m = altar_modal_new(&cfg, new_rt(), NULL);
  CU_ASSERT_FATAL(m != NULL);
  char src[2048], uri[2100], out_uri[2100], digest[72], script[4200];
  path_in(src, sizeof src, dir, "weights.bin");
  altar_test_write_file(src, "weights", 7);
  altar_contract_sha256("weights", 7, digest);
  snprintf(uri, sizeof uri, "file://%s", src);
  altar_spec_t *s = altar_spec_new("score", "python:3.11-slim");
  altar_spec_add_input(s, uri, "jobs/jb/weights.bin", NULL, digest);
  snprintf(script, sizeof script, "tr a-z A-Z < '%s/jobs/jb/weights.bin' > '%s/jobs/jb/out.txt'", vol, vol);
  altar_spec_add_arg(s, "sh");
  altar_spec_add_arg(s, "-c");
  altar_spec_add_arg(s, script);
  altar_spec_set_label(s, "job_id", "jb");
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_modal_stage_inputs(m, s->inputs, s->n_inputs, &err), 0);
  altar_handle_t h;
  CU_ASSERT_EQUAL_FATAL(altar_modal_submit(m, s, &h, &err), 0);
  json_t *rec = sandbox_record(h.external_id);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(rec, "timeout_secs")), ALTAR_MODAL_MAX_SANDBOX_TIMEOUT_S);
  CU_ASSERT_STRING_EQUAL(rec_str(json_object_get(rec, "tags"), "job_id"), "jb");
  json_decref(rec);
  altar_status_t st;
  memset(&st, 0, sizeof st);
  for (int i = 0; i < WAIT_S * 20; i++) {
    altar_status_clear(&st);
    CU_ASSERT_EQUAL_FATAL(altar_modal_poll(m, &h, 1, &st, &err), 0);
    if (altar_state_terminal(st.state)) break;
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
  }
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
  altar_status_clear(&st);
  snprintf(out_uri, sizeof out_uri, "file://%s/collected.txt", dir);
  altar_transfer_t out = {.uri = out_uri, .logical_path = "jobs/jb/out.txt"};
  CU_ASSERT_EQUAL(altar_modal_collect_outputs(m, &out, 1, &err), 0);
  path_in(src, sizeof src, dir, "collected.txt");
  char *got = altar_test_read_file(src, NULL);
  CU_ASSERT(got && !strcmp(got, "WEIGHTS"));
  free(got);
  altar_handle_clear(&h);

  /* The volume's copy tampered with: the wrapper stops the task. */
  path_in(src, sizeof src, vol, "jobs/jb/weights.bin");
  altar_test_write_file(src, "tampered", 8);
  CU_ASSERT_EQUAL_FATAL(altar_modal_submit(m, s, &h, &err), 0);
  for (int i = 0; i < WAIT_S * 20; i++) {
    altar_status_clear(&st);
    CU_ASSERT_EQUAL_FATAL(altar_modal_poll(m, &h, 1, &st, &err), 0);
    if (altar_state_terminal(st.state)) break;
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
  }
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
  CU_ASSERT(st.failure && !strcmp(st.failure->reason, ALTAR_REASON_INPUT_DIGEST_MISMATCH));
  altar_status_clear(&st);
  /* Cancel terminates; the platform forgetting it reads as container_missing. */
  CU_ASSERT_EQUAL(altar_modal_cancel(m, &h, &err), 0);
  char path[256];
  snprintf(path, sizeof path, "/_fake/vanish/%s", h.external_id);
  json_decref(http_call("POST", path));
  CU_ASSERT_EQUAL(altar_modal_poll(m, &h, 1, &st, &err), 0);
  CU_ASSERT(st.failure && !strcmp(st.failure->reason, ALTAR_REASON_CONTAINER_MISSING));
  altar_status_clear(&st);
  CU_ASSERT_EQUAL(altar_modal_cancel(m, &h, &err), 0);
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar_modal_free(m);
}

/* Polls the backend until h ends (bounded); st holds its last status. */
static void poll_until_done(altar_modal_t *m, const altar_handle_t *h, altar_status_t *st) {
  altar_error_t err = {0};
  memset(st, 0, sizeof *st);
  for (int i = 0; i < WAIT_S * 20; i++) {
    altar_status_clear(st);
    CU_ASSERT_EQUAL_FATAL(altar_modal_poll(m, h, 1, st, &err), 0);
    if (altar_state_terminal(st->state)) return;
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
  }
  CU_FAIL("sandbox did not end within the wait bound");
}

/* Issue #27 item 8: a worker dies with its sandbox running and another
 * takes the job over. The new backend (its own bridge, as in a new worker
 * process) submits the same spec and adopts the running sandbox by its task
 * key instead of starting a second; once it has ended, a submit runs anew.
 * The sandbox runs until cancelled, so that it is surely still running
 * however long the second bridge takes to start (ASan, a loaded machine). */
static void test_submit_adopts_running_sandbox(void) {
  altar_modal_config_t cfg = {.mount_root = vol};
  altar_spec_t *s = altar_spec_new("adopt", "python:3.11-slim");
  altar_spec_add_arg(s, "sh");
  altar_spec_add_arg(s, "-c");
  altar_spec_add_arg(s, "sleep 600; echo adopted-run-done");
  altar_error_t err = {0};
  long created0 = calls_now("SandboxCreateV2") + calls_now("SandboxCreate");

  altar_modal_t *dead = altar_modal_new(&cfg, new_rt(), NULL);
  CU_ASSERT_FATAL(dead != NULL);
  altar_handle_t h1, h2, h3;
  CU_ASSERT_EQUAL_FATAL(altar_modal_submit(dead, s, &h1, &err), 0);
  altar_modal_free(dead); /* the worker dies; its sandbox runs on */

  altar_modal_t *m = altar_modal_new(&cfg, new_rt(), NULL);
  CU_ASSERT_FATAL(m != NULL);
  CU_ASSERT_EQUAL_FATAL(altar_modal_submit(m, s, &h2, &err), 0);
  CU_ASSERT_STRING_EQUAL(h2.external_id, h1.external_id);
  CU_ASSERT_EQUAL(calls_now("SandboxCreateV2") + calls_now("SandboxCreate") - created0, 1);
  json_t *rec = sandbox_record(h1.external_id);
  char key[ALTAR_TASK_KEY_LEN + 1];
  CU_ASSERT_EQUAL_FATAL(altar_spec_identity(s, key, &err), 0);
  const char *tagged = rec_str(json_object_get(rec, "tags"), "altar.task_key");
  CU_ASSERT(tagged && !strcmp(tagged, key));
  json_decref(rec);
  /* The adopted handle is the run's: cancelling through it ends the sandbox. */
  CU_ASSERT_EQUAL(altar_modal_cancel(m, &h2, &err), 0);
  altar_status_t st;
  poll_until_done(m, &h2, &st);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
  altar_status_clear(&st);

  /* Ended: not adopted, a new run. */
  CU_ASSERT_EQUAL_FATAL(altar_modal_submit(m, s, &h3, &err), 0);
  CU_ASSERT(strcmp(h3.external_id, h1.external_id) != 0);
  CU_ASSERT_EQUAL(calls_now("SandboxCreateV2") + calls_now("SandboxCreate") - created0, 2);
  CU_ASSERT_EQUAL(altar_modal_cancel(m, &h3, &err), 0);
  altar_handle_clear(&h1);
  altar_handle_clear(&h2);
  altar_handle_clear(&h3);
  altar_spec_free(s);
  altar_modal_free(m);
}

#define SECRET_VALUE "tok-9f2c41d7e05b"

/* A failed sandbox's detail ends with the tails of its stderr and stdout,
 * read through the SDK (V2: the task command router; GPU: SandboxGetLogs),
 * with the value of a secret-looking variable of the worker replaced. */
static void test_failure_detail_has_output(void) {
  setenv("ALTAR_TEST_API_TOKEN", SECRET_VALUE, 1);
  altar_modal_config_t cfg = {.mount_root = vol};
  altar_modal_t *m = altar_modal_new(&cfg, new_rt(), NULL);
  CU_ASSERT_FATAL(m != NULL);
  for (int gpu = 0; gpu <= 1; gpu++) {
    altar_spec_t *s = altar_spec_new("score", "python:3.11-slim");
    altar_spec_add_arg(s, "sh");
    altar_spec_add_arg(s, "-c");
    altar_spec_add_arg(s, "echo loading weights; echo 'FileNotFoundError: weights.h5 (token " SECRET_VALUE ")' >&2; "
                          "exit 3");
    if (gpu) altar_spec_set_gpu(s, "gpu", 1);
    long router = calls_now("SandboxStdioReadV2"), logs = calls_now("SandboxGetLogs");
    altar_handle_t h;
    altar_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(altar_modal_submit(m, s, &h, &err), 0);
    altar_status_t st;
    poll_until_done(m, &h, &st);
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
    CU_ASSERT_FATAL(st.failure != NULL && st.failure->detail != NULL);
    const char *d = st.failure->detail;
    if (!strstr(d, "weights.h5")) fprintf(stderr, "detail: %s\n", d);
    CU_ASSERT_STRING_EQUAL(st.failure->reason, "exit_3");
    const char *head = "the command exited with 3\n--- stderr ---\n";
    CU_ASSERT(strncmp(d, head, strlen(head)) == 0);
    CU_ASSERT(strstr(d, "FileNotFoundError: weights.h5 (token [redacted])\n") != NULL);
    CU_ASSERT(strstr(d, "--- stdout ---\nloading weights\n") != NULL);
    CU_ASSERT(strstr(d, SECRET_VALUE) == NULL);
    /* Read the way each family reads it. */
    CU_ASSERT_EQUAL(calls_now("SandboxStdioReadV2") > router, !gpu);
    CU_ASSERT_EQUAL(calls_now("SandboxGetLogs") > logs, gpu);
    altar_status_clear(&st);
    altar_handle_clear(&h);
    altar_spec_free(s);
  }
  /* Much more output than the window: the bridge returns only the last
   * bytes, and the detail keeps to its bound with the last line in it. */
  altar_modal_runtime_t *rt = altar_modal_runtime(m);
  char *cmd[] = {"sh", "-c",
                 "i=0; while [ $i -lt 3000 ]; do echo line-$i-of-filler-text >&2; i=$((i+1)); done; "
                 "echo LAST-LINE >&2; exit 1"};
  altar_modal_sandbox_req_t req = base_req(cmd, 3);
  char *id = run(rt, &req);
  CU_ASSERT_EQUAL(wait_exit(rt, id), 1);
  char *er = NULL, *out = NULL;
  size_t en = 0, on = 0;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(rt->ops->read_output(rt->impl, id, 8192, &er, &en, &out, &on, &err), 0);
  CU_ASSERT(en > 8000 && en <= 8192);
  CU_ASSERT(en >= 10 && !memcmp(er + en - 10, "LAST-LINE\n", 10));
  CU_ASSERT_EQUAL(on, 0);
  free(er);
  free(out);
  altar_handle_t h = {0};
  CU_ASSERT_EQUAL_FATAL(altar_handle_init(&h, "modal", id), 0);
  altar_status_t st;
  poll_until_done(m, &h, &st);
  CU_ASSERT_FATAL(st.failure && st.failure->detail);
  CU_ASSERT(strlen(st.failure->detail) <= 2048);
  CU_ASSERT(strstr(st.failure->detail, "--- stderr (last ") != NULL);
  CU_ASSERT(strstr(st.failure->detail, "LAST-LINE\n") != NULL);
  altar_status_clear(&st);
  altar_handle_clear(&h);
  /* A sandbox the platform does not know has no output to read. */
  CU_ASSERT_EQUAL(rt->ops->read_output(rt->impl, "sb-AAAAAAAAAAAAAAAAAAAAAA", 8192, &er, &en, &out, &on, &err),
                  ALTAR_ENOTFOUND);
  CU_ASSERT(er == NULL && out == NULL);
  free(id);
  altar_modal_free(m);
  unsetenv("ALTAR_TEST_API_TOKEN");
}

/* ---- `altar run --backend modal` ---- */

/* Runs `bin run SPEC --backend modal --config CFG --quiet`; its exit code,
 * stdout parsed into *pstatus and stderr into *perr (malloc'd). */
static int altar_run(const char *bin, const char *spec_json, bool with_python, json_t **pstatus, char **perr) {
  char spec[2048], out[2048], errf[2048], cfg[2048], text[4096];
  path_in(spec, sizeof spec, dir, "cli-spec.json");
  path_in(out, sizeof out, dir, "cli.out");
  path_in(errf, sizeof errf, dir, "cli.err");
  path_in(cfg, sizeof cfg, dir, "altar.yaml");
  altar_test_write_file(spec, spec_json, strlen(spec_json));
  snprintf(text, sizeof text, "backend:\n  name: modal\n  mount_root: \"%s\"\n%s%s%s", vol,
           with_python ? "  python: \"" : "", with_python ? python : "", with_python ? "\"\n" : "");
  altar_test_write_file(cfg, text, strlen(text));
  pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir) != 0) _exit(126);
    unsetenv("ALTAR_MODAL_BRIDGE"); /* found the way the binary finds it */
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), efd = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || efd < 0 || dup2(fd, 1) < 0 || dup2(efd, 2) < 0) _exit(126);
    execl(bin, "altar", "run", spec, "--backend", "modal", "--config", cfg, "--quiet", (char *)NULL);
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  char *got = altar_test_read_file(out, NULL);
  *pstatus = got ? json_loads(got, 0, NULL) : NULL;
  free(got);
  if (perr) *perr = altar_test_read_file(errf, NULL);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *status_str(json_t *status, const char *a, const char *b) {
  json_t *j = json_object_get(status, a);
  return json_string_value(b ? json_object_get(j, b) : j);
}

static void test_altar_run_cli(void) {
  json_t *status = NULL;
  const char *bin = altar_test_altar_bin();
  int rc = altar_run(bin,
                     "{\"kind\":\"score\",\"image\":\"python:3.11-slim\",\"command\":[\"true\"],"
                     "\"labels\":{\"job_id\":\"cli\"}}",
                     true, &status, NULL);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_STRING_EQUAL(status_str(status, "state", NULL), "succeeded");
  CU_ASSERT_STRING_EQUAL(status_str(status, "handle", "backend"), "modal");
  json_decref(status);
  rc = altar_run(bin,
                 "{\"kind\":\"score\",\"image\":\"python:3.11-slim\",\"command\":[\"sh\",\"-c\",\"exit 3\"],"
                 "\"resources\":{\"gpu\":\"gpu\",\"count\":1},\"labels\":{\"job_id\":\"cli\"}}",
                 true, &status, NULL);
  CU_ASSERT_EQUAL(rc, 1);
  CU_ASSERT_STRING_EQUAL(status_str(status, "failure", "reason"), "exit_3");
  const char *id = status_str(status, "handle", "external_id");
  CU_ASSERT_FATAL(id != NULL);
  json_t *rec = sandbox_record(id);
  CU_ASSERT_STRING_EQUAL(rec_str(rec, "gpu"), "A10G:1");
  json_decref(rec);
  json_decref(status);
  rc = altar_run(bin,
                 "{\"kind\":\"score\",\"image\":\"python:3.11-slim\",\"command\":[\"sleep\",\"60\"],"
                 "\"timeout_s\":1}",
                 true, &status, NULL);
  CU_ASSERT_EQUAL(rc, 1);
  CU_ASSERT_STRING_EQUAL(status_str(status, "failure", "reason"), ALTAR_REASON_TIMEOUT);
  json_decref(status);
  /* Past Modal's 24 h cap: refused, naming the field, before anything runs. */
  long creates = calls_now("SandboxCreateV2");
  char *errtext = NULL;
  rc = altar_run(bin,
                 "{\"kind\":\"score\",\"image\":\"python:3.11-slim\",\"command\":[\"true\"],"
                 "\"timeout_s\":90000}",
                 true, &status, &errtext);
  CU_ASSERT_EQUAL(rc, 2);
  CU_ASSERT(errtext && strstr(errtext, "timeout_s") != NULL);
  CU_ASSERT_EQUAL(calls_now("SandboxCreateV2"), creates);
  free(errtext);
  json_decref(status);
}

/* Ctrl-C at the terminal reaches the whole process group, the bridge too:
 * the bridge ignores it between requests, so `altar run` can still
 * terminate its sandbox (exit 130). */
static void test_altar_run_ctrl_c(void) {
  char spec[2048], cfg[2048], text[4096];
  path_in(spec, sizeof spec, dir, "ctrl-c-spec.json");
  path_in(cfg, sizeof cfg, dir, "ctrl-c.yaml");
  const char *json = "{\"kind\":\"score\",\"image\":\"python:3.11-slim\",\"command\":[\"sleep\",\"300\"],"
                     "\"labels\":{\"job_id\":\"ctrl-c\"}}";
  altar_test_write_file(spec, json, strlen(json));
  snprintf(text, sizeof text, "backend:\n  name: modal\n  mount_root: \"%s\"\n  python: \"%s\"\n", vol, python);
  altar_test_write_file(cfg, text, strlen(text));
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    execl(altar_test_altar_bin(), "altar", "run", spec, "--backend", "modal", "--config", cfg, "--quiet", (char *)NULL);
    _exit(127);
  }
  setpgid(pid, pid);
  /* Wait (bounded) until the fake runs the sandbox. */
  char *sid = NULL;
  for (int i = 0; i < WAIT_S * 20 && !sid; i++) {
    json_t *state = fake_state();
    const char *id;
    json_t *rec;
    json_object_foreach(json_object_get(state, "sandboxes"), id, rec) {
      const char *job = rec_str(json_object_get(rec, "tags"), "job_id");
      if (job && !strcmp(job, "ctrl-c") && json_is_true(json_object_get(rec, "scheduled"))) sid = strdup(id);
    }
    json_decref(state);
    struct timespec ts = {0, 50000000};
    if (!sid) nanosleep(&ts, NULL);
  }
  CU_ASSERT_FATAL(sid != NULL);
  CU_ASSERT_EQUAL(killpg(pid, SIGINT), 0);
  int st = 0;
  waitpid(pid, &st, 0);
  CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 130);
  json_t *rec = sandbox_record(sid);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(rec, "status")), 3); /* GENERIC_STATUS_TERMINATED */
  json_decref(rec);
  free(sid);
}

/* `cmake --install` into a temp prefix: the installed altar finds
 * share/altar/modal_bridge.py beside its bin/, and only there. */
static void test_installed_altar_finds_bridge(void) {
  char build[2048], prefix[2048], cmd[6000], bin[2100], installed[2100];
  snprintf(build, sizeof build, "%s", altar_test_altar_bin());
  char *slash = strrchr(build, '/');
  CU_ASSERT_FATAL(slash != NULL);
  *slash = '\0';
  path_in(prefix, sizeof prefix, dir, "prefix");
  snprintf(cmd, sizeof cmd, "cmake --install '%s' --prefix '%s' >/dev/null", build, prefix);
  CU_ASSERT_EQUAL_FATAL(sh(cmd), 0);
  path_in(bin, sizeof bin, prefix, "bin/altar");
  path_in(installed, sizeof installed, prefix, "share/altar/modal_bridge.py");
  CU_ASSERT_FATAL(access(installed, R_OK) == 0);
  json_t *status = NULL;
  char *errtext = NULL;
  const char *spec = "{\"kind\":\"score\",\"image\":\"python:3.11-slim\",\"command\":[\"true\"]}";
  int rc = altar_run(bin, spec, true, &status, &errtext);
  if (rc) fprintf(stderr, "installed altar: %s\n", errtext ? errtext : "");
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_STRING_EQUAL(status_str(status, "state", NULL), "succeeded");
  json_decref(status);
  free(errtext);
  /* Without its share/ copy it does not fall back to the source tree. */
  CU_ASSERT_EQUAL_FATAL(unlink(installed), 0);
  rc = altar_run(bin, spec, true, &status, &errtext);
  CU_ASSERT_EQUAL(rc, 2);
  CU_ASSERT(errtext && strstr(errtext, "share/altar/modal_bridge.py") != NULL);
  free(errtext);
  json_decref(status);
  /* The override still works. */
  setenv("ALTAR_MODAL_BRIDGE", bridge, 1);
  char found[4096];
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_modal_bridge_find(NULL, found, sizeof found, &err), 0);
  CU_ASSERT_STRING_EQUAL(found, bridge);
  unsetenv("ALTAR_MODAL_BRIDGE");
  /* This test binary lives in the build tree: the source tree's copy. */
  CU_ASSERT_EQUAL(altar_modal_bridge_find(NULL, found, sizeof found, &err), 0);
  CU_ASSERT(strstr(found, "tools/modal_bridge.py") != NULL);
}

/* ---- the backend contract suite, through the SDK and the fake ---- */

static altar_backend_t *contract_make(void *ctx, const char *data_root, altar_error_t *err) {
  (void)ctx;
  (void)data_root; /* the volume lives where the fake keeps it */
  if (world_start()) {
    altar_error_set(err, ALTAR_ENOTSUP, "no Modal SDK environment or fake server");
    return NULL;
  }
  altar_modal_bridge_config_t bcfg = {.python = python, .bridge = bridge, .reply_timeout_ms = 60000};
  altar_modal_runtime_t *rt = altar_modal_bridge_runtime_new(&bcfg, err);
  altar_modal_config_t cfg = {.mount_root = vol};
  altar_modal_t *m = rt ? altar_modal_new(&cfg, rt, err) : NULL;
  return altar_modal_backend_wrap(m);
}

static int set_argv(altar_spec_t *s, const char *a0, const char *a1, const char *a2) {
  for (size_t i = 0; i < s->n_command; i++) free(s->command[i]);
  s->n_command = 0;
  int rc = altar_spec_add_arg(s, a0);
  if (!rc && a1) rc = altar_spec_add_arg(s, a1);
  if (!rc && a2) rc = altar_spec_add_arg(s, a2);
  return rc;
}
static int c_exit(void *ctx, altar_spec_t *s, int code) {
  (void)ctx;
  char script[32];
  snprintf(script, sizeof script, "exit %d", code);
  return set_argv(s, "sh", "-c", script);
}
static int c_sleep(void *ctx, altar_spec_t *s, int secs) {
  (void)ctx;
  char n[16];
  snprintf(n, sizeof n, "%d", secs);
  return set_argv(s, "sleep", n, NULL);
}
static int c_oom(void *ctx, altar_spec_t *s) {
  (void)ctx;
  s->resources.memory_mb = (altar_opt_i64_t){true, 32};
  return set_argv(s, python, "-c", "import time; x = b'a' * (256 << 20); time.sleep(60)");
}
static int c_read(void *ctx, altar_spec_t *s, const char *path) {
  (void)ctx;
  return set_argv(s, "cat", path, NULL);
}
static int c_vanish(void *ctx, altar_backend_t *be, const altar_handle_t *h) {
  (void)ctx;
  (void)be;
  char path[256];
  snprintf(path, sizeof path, "/_fake/vanish/%s", h->external_id);
  json_t *j = http_call("POST", path);
  json_decref(j);
  return j ? 0 : -1;
}
static char *c_host_path(void *ctx, altar_backend_t *be, const char *data_root, const char *logical) {
  (void)ctx;
  (void)be;
  (void)data_root;
  char p[4096];
  path_in(p, sizeof p, vol, logical);
  return strdup(p);
}

static const altar_contract_fixture_t contract_fx = {
    .name = "modal (real SDK, fake control plane)",
    .image = "python:3.11-slim",
    .wait_s = WAIT_S,
    .make_backend = contract_make,
    .set_exit = c_exit,
    .set_sleep = c_sleep,
    .set_oom = c_oom,
    .set_read_input = c_read,
    .vanish = c_vanish,
    .host_path = c_host_path,
    /* The fake's volume is a host directory, but a Modal Volume is remote:
     * an upload writes there even from the very file it holds. */
    .volume_is_remote = true,
};

/* Last: nothing the SDK asked for in this whole run went unanswered. */
static void test_no_unimplemented_calls(void) {
  json_t *state = fake_state();
  json_t *un = json_object_get(state, "unimplemented");
  for (size_t i = 0; i < json_array_size(un); i++)
    fprintf(stderr, "the SDK called %s, which the fake does not implement\n", json_string_value(json_array_get(un, i)));
  CU_ASSERT_EQUAL(json_array_size(un), 0);
  json_decref(state);
}

static void add(void) {
  altar_storage_register_builtin();
  altar_contract_add_suite(&contract_fx); /* first: the suite below stops the fake */
  ALTAR_SUITE("modal_bridge", suite_init, suite_clean);
  ALTAR_TEST(test_sandbox_cpu);
  ALTAR_TEST(test_sandbox_gpu);
  ALTAR_TEST(test_timeout_and_terminate);
  ALTAR_TEST(test_volume_round_trip);
  ALTAR_TEST(test_deadline_cancels_scheduling);
  ALTAR_TEST(test_wrong_token);
  ALTAR_TEST(test_restart_after_crash);
  ALTAR_TEST(test_sdk_missing);
  ALTAR_TEST(test_protocol_lines);
  ALTAR_TEST(test_backend_through_bridge);
  ALTAR_TEST(test_failure_detail_has_output);
  ALTAR_TEST(test_submit_adopts_running_sandbox);
  ALTAR_TEST(test_altar_run_cli);
  ALTAR_TEST(test_altar_run_ctrl_c);
  ALTAR_TEST(test_installed_altar_finds_bridge);
  ALTAR_TEST(test_no_unimplemented_calls);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
