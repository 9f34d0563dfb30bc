/* The docker backend with a scripted CommandRunner: a small fake of the docker
 * CLI that records every argv and answers from an in-memory container table
 * (or from programmed replies). It checks the exact argv the backend sends,
 * inspect parsing, the kill past a deadline, cancel of a missing container,
 * staging, and runs the shared contract suite against the fake. */
#include "altar/backend.h"
#include "altar/codec.h"
#include "altar/digest.h"
#include "altar/paths.h"
#include "altar/storage.h"
#include "backend_contract.h"
#include "backends/docker.h"
#include "backends/docker_int.h"
#include "testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the fake docker ------------------------------------------------------ */

#define FAKE_MAX_CONTAINERS 256
#define FAKE_MAX_CALLS 1024
#define FAKE_MAX_REPLIES 16

typedef enum { B_EXIT, B_SLEEP, B_OOM, B_READ } behaviour_t;

typedef struct fake_container {
  char id[65];
  altar_strmap_t labels;
  char host_root[512]; /* host side of the -v mount */
  behaviour_t beh;
  int arg;        /* exit code or seconds */
  char path[512]; /* B_READ: container path */
  char status[16];
  int exit_code;
  bool oom;
  double started, finished;
} fake_container_t;

typedef struct fake_reply {
  char verb[16];
  int exit_code;
  char *out, *err;
} fake_reply_t;

typedef struct fake_docker {
  fake_container_t c[FAKE_MAX_CONTAINERS];
  size_t n;
  unsigned next_id;
  char **calls[FAKE_MAX_CALLS]; /* copies of each argv */
  size_t ncalls;
  fake_reply_t replies[FAKE_MAX_REPLIES]; /* used first, in order, by verb */
  size_t nreplies;
} fake_docker_t;

static double now_real(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fmt_time(double t, char *buf, size_t cap) {
  if (t <= 0) {
    snprintf(buf, cap, "0001-01-01T00:00:00Z");
    return;
  }
  time_t s = (time_t)t;
  struct tm tm;
  gmtime_r(&s, &tm);
  char base[32];
  strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(buf, cap, "%s.%09ldZ", base, (long)((t - (double)s) * 1e9));
}

static fake_container_t *fake_find(fake_docker_t *fd, const char *id) {
  size_t l = strlen(id);
  if (!l) return NULL;
  for (size_t i = 0; i < fd->n; i++)
    if (fd->c[i].id[0] && !strncmp(fd->c[i].id, id, l)) return &fd->c[i];
  return NULL;
}

/* Moves a container along its programmed behaviour as time passes. */
static void fake_advance(fake_container_t *c) {
  if (strcmp(c->status, "running")) return;
  if (c->beh == B_SLEEP && now_real() >= c->started + c->arg) {
    snprintf(c->status, sizeof c->status, "exited");
    c->exit_code = 0;
    c->finished = c->started + c->arg;
  }
}

static void fake_remove(fake_container_t *c) {
  altar_strmap_clear(&c->labels);
  memset(c, 0, sizeof *c);
}

static void fake_reset(fake_docker_t *fd) {
  for (size_t i = 0; i < fd->n; i++) fake_remove(&fd->c[i]);
  for (size_t i = 0; i < fd->ncalls; i++) {
    for (size_t k = 0; fd->calls[i][k]; k++) free(fd->calls[i][k]);
    free(fd->calls[i]);
  }
  for (size_t i = 0; i < fd->nreplies; i++) {
    free(fd->replies[i].out);
    free(fd->replies[i].err);
  }
  memset(fd, 0, sizeof *fd);
}

static void fake_program(fake_docker_t *fd, const char *verb, int exit_code, const char *out, const char *err) {
  CU_ASSERT_FATAL(fd->nreplies < FAKE_MAX_REPLIES);
  fake_reply_t *r = &fd->replies[fd->nreplies++];
  snprintf(r->verb, sizeof r->verb, "%s", verb);
  r->exit_code = exit_code;
  r->out = strdup(out ? out : "");
  r->err = strdup(err ? err : "");
}

/* Host path of a container path under the -v mount. */
static void host_of(const fake_container_t *c, const char *cpath, char *buf, size_t cap) {
  const char *root = ALTAR_DOCKER_MOUNT_ROOT;
  if (!strncmp(cpath, root, strlen(root))) snprintf(buf, cap, "%s%s", c->host_root, cpath + strlen(root));
  else snprintf(buf, cap, "%s", cpath);
}

/* A refused run leaves no container behind. */
static int run_fail(fake_container_t *c, altar_cmd_result_t *res, int code, const char *out, const char *err) {
  fake_remove(c);
  return altar_cmd_result_set(res, code, out, err);
}

/* ps -q --no-trunc --filter label=K=V --filter status=S: the ids that match. */
static int fake_ps(fake_docker_t *fd, const char *const *a, altar_cmd_result_t *res) {
  const char *labels[4] = {0}, *status = NULL;
  size_t nl = 0;
  for (size_t i = 1; a[i]; i++)
    if (!strcmp(a[i], "--filter") && a[i + 1]) {
      const char *f = a[++i];
      if (!strncmp(f, "label=", 6) && nl < 4) labels[nl++] = f + 6;
      else if (!strncmp(f, "status=", 7)) status = f + 7;
    }
  char out[FAKE_MAX_CONTAINERS * 66 + 1];
  size_t len = 0;
  out[0] = '\0';
  for (size_t i = 0; i < fd->n; i++) {
    fake_container_t *c = &fd->c[i];
    if (!c->id[0]) continue;
    fake_advance(c);
    if (status && strcmp(c->status, status)) continue;
    bool match = true;
    for (size_t k = 0; k < nl && match; k++) {
      const char *label = labels[k], *eq = strchr(label, '=');
      char key[128];
      snprintf(key, sizeof key, "%.*s", eq ? (int)(eq - label) : (int)strlen(label), label);
      const char *v = altar_strmap_get(&c->labels, key);
      match = v && (!eq || !strcmp(v, eq + 1));
    }
    if (!match) continue;
    len += (size_t)snprintf(out + len, sizeof out - len, "%s\n", c->id);
  }
  return altar_cmd_result_set(res, 0, out, NULL);
}

static int fake_run(fake_docker_t *fd, const char *const *a, altar_cmd_result_t *res) {
  /* a[0] = "run" */
  if (fd->n == FAKE_MAX_CONTAINERS) return altar_cmd_result_set(res, 125, NULL, "fake: full\n");
  fake_container_t *c = &fd->c[fd->n];
  memset(c, 0, sizeof *c);
  size_t i = 1;
  bool detached = false;
  for (; a[i] && a[i][0] == '-'; i++) {
    if (!strcmp(a[i], "-d")) {
      detached = true;
    } else if (!strcmp(a[i], "--label") && a[i + 1]) {
      const char *eq = strchr(a[++i], '=');
      if (!eq) return run_fail(c, res, 125, NULL, "fake: bad label\n");
      altar_strmap_setn(&c->labels, a[i], (size_t)(eq - a[i]), eq + 1, strlen(eq + 1));
    } else if (!strcmp(a[i], "-v") && a[i + 1]) {
      const char *colon = strchr(a[++i], ':');
      if (!colon) return run_fail(c, res, 125, NULL, "fake: bad -v\n");
      snprintf(c->host_root, sizeof c->host_root, "%.*s", (int)(colon - a[i]), a[i]);
    } else if ((!strcmp(a[i], "--user") || !strcmp(a[i], "--memory") || !strcmp(a[i], "--memory-swap")) && a[i + 1]) {
      i++;
    } else {
      return run_fail(c, res, 125, NULL, "fake: unknown flag\n");
    }
  }
  if (!detached || !a[i]) return run_fail(c, res, 125, NULL, "fake: usage\n");
  if (!strcmp(a[i], "no-such-image"))
    return run_fail(c, res, 125, NULL,
                    "Unable to find image 'no-such-image:latest' locally\n"
                    "docker: Error response from daemon: pull access denied.\n");
  const char *cmd = a[i + 1];
  if (!cmd) return run_fail(c, res, 125, NULL, "fake: no command\n");
  /* The fixture's commands: exit N | sleep S | oom | read PATH */
  c->started = now_real();
  snprintf(c->status, sizeof c->status, "exited");
  c->finished = c->started;
  if (!strcmp(cmd, "exit") && a[i + 2]) {
    c->beh = B_EXIT;
    c->exit_code = (int)strtol(a[i + 2], NULL, 10);
  } else if (!strcmp(cmd, "sleep") && a[i + 2]) {
    c->beh = B_SLEEP;
    c->arg = (int)strtol(a[i + 2], NULL, 10);
    snprintf(c->status, sizeof c->status, "running");
    c->finished = 0;
  } else if (!strcmp(cmd, "oom")) {
    c->beh = B_OOM;
    c->exit_code = 137;
    c->oom = true;
  } else if (!strcmp(cmd, "read") && a[i + 2]) {
    c->beh = B_READ;
    char host[1024];
    host_of(c, a[i + 2], host, sizeof host);
    struct stat st;
    c->exit_code = (stat(host, &st) == 0 && S_ISREG(st.st_mode)) ? 0 : 1;
  } else {
    return run_fail(c, res, 127, NULL, "fake: unknown command\n");
  }
  fd->next_id++;
  char id[65];
  snprintf(id, sizeof id, "%08x", fd->next_id);
  for (size_t k = 8; k < 64; k++) id[k] = "0123456789abcdef"[(fd->next_id * 7 + k) % 16];
  id[64] = '\0';
  memcpy(c->id, id, sizeof id);
  fd->n++;
  char out[80];
  snprintf(out, sizeof out, "%s\n", id);
  return altar_cmd_result_set(res, 0, out, NULL);
}

static int fake_inspect(fake_docker_t *fd, const char *const *a, altar_cmd_result_t *res) {
  size_t i = 1;
  if (a[i] && !strcmp(a[i], "--type")) i += 2;
  json_t *arr = json_array();
  char errs[4096] = "";
  bool missing = false;
  for (; a[i]; i++) {
    fake_container_t *c = fake_find(fd, a[i]);
    if (!c) {
      size_t l = strlen(errs);
      snprintf(errs + l, sizeof errs - l, "Error: No such container: %s\n", a[i]);
      missing = true;
      continue;
    }
    fake_advance(c);
    char st[64], fin[64];
    fmt_time(c->started, st, sizeof st);
    fmt_time(c->finished, fin, sizeof fin);
    json_t *labels = json_object();
    for (size_t k = 0; k < c->labels.n; k++)
      json_object_set_new(labels, c->labels.keys[k], json_string(c->labels.vals[k]));
    json_array_append_new(arr, json_pack("{s:s, s:{s:s, s:b, s:i, s:b, s:s, s:s, s:s}, s:{s:o}}", "Id", c->id, "State",
                                         "Status", c->status, "Running", !strcmp(c->status, "running"), "ExitCode",
                                         c->exit_code, "OOMKilled", c->oom, "Error", "", "StartedAt", st, "FinishedAt",
                                         fin, "Config", "Labels", labels));
  }
  char *out = json_dumps(arr, JSON_COMPACT);
  json_decref(arr);
  int rc = altar_cmd_result_set(res, missing ? 1 : 0, out, errs);
  free(out);
  return rc;
}

static int fake_kill(fake_docker_t *fd, const char *const *a, altar_cmd_result_t *res) {
  char errs[4096] = "", out[4096] = "";
  int code = 0;
  for (size_t i = 1; a[i]; i++) {
    fake_container_t *c = fake_find(fd, a[i]);
    size_t l = strlen(errs), lo = strlen(out);
    if (!c) {
      snprintf(errs + l, sizeof errs - l, "Error response from daemon: No such container: %s\n", a[i]);
      code = 1;
      continue;
    }
    fake_advance(c);
    if (strcmp(c->status, "running")) {
      snprintf(errs + l, sizeof errs - l,
               "Error response from daemon: Cannot kill container: %s: Container %s is not running\n", a[i], a[i]);
      code = 1;
      continue;
    }
    snprintf(c->status, sizeof c->status, "exited");
    c->exit_code = 137;
    c->finished = now_real();
    snprintf(out + lo, sizeof out - lo, "%s\n", a[i]);
  }
  return altar_cmd_result_set(res, code, out, errs);
}

static int fake_rm(fake_docker_t *fd, const char *const *a, altar_cmd_result_t *res) {
  size_t i = 1;
  bool force = false;
  for (; a[i] && a[i][0] == '-'; i++)
    if (!strcmp(a[i], "--force") || !strcmp(a[i], "-f")) force = true;
  char errs[4096] = "";
  int code = 0;
  for (; a[i]; i++) {
    fake_container_t *c = fake_find(fd, a[i]);
    if (!c) {
      size_t l = strlen(errs);
      snprintf(errs + l, sizeof errs - l, "Error response from daemon: No such container: %s\n", a[i]);
      code = 1;
      continue;
    }
    if (!force && !strcmp(c->status, "running")) {
      code = 1;
      continue;
    }
    fake_remove(c);
  }
  return altar_cmd_result_set(res, code, "", errs);
}

static int fake_runner_run(void *impl, const char *const argv[], const altar_cmd_opts_t *opts, altar_cmd_result_t *pres,
                           altar_error_t *err) {
  fake_docker_t *fd = impl;
  (void)opts;
  (void)err;
  memset(pres, 0, sizeof *pres);
  size_t n = 0;
  while (argv[n]) n++;
  if (fd->ncalls < FAKE_MAX_CALLS) {
    char **copy = calloc(n + 1, sizeof *copy);
    for (size_t i = 0; i < n; i++) copy[i] = strdup(argv[i]);
    fd->calls[fd->ncalls++] = copy;
  }
  const char *verb = n > 1 ? argv[1] : "";
  for (size_t i = 0; i < fd->nreplies; i++) {
    fake_reply_t *r = &fd->replies[i];
    if (strcmp(r->verb, verb)) continue;
    int rc = altar_cmd_result_set(pres, r->exit_code, r->out, r->err);
    free(r->out);
    free(r->err);
    memmove(r, r + 1, (fd->nreplies - i - 1) * sizeof *r);
    fd->nreplies--;
    return rc;
  }
  const char *const *a = argv + 1;
  if (!strcmp(verb, "run")) return fake_run(fd, a, pres);
  if (!strcmp(verb, "ps")) return fake_ps(fd, a, pres);
  if (!strcmp(verb, "inspect")) return fake_inspect(fd, a, pres);
  if (!strcmp(verb, "kill")) return fake_kill(fd, a, pres);
  if (!strcmp(verb, "rm")) return fake_rm(fd, a, pres);
  return altar_cmd_result_set(pres, 1, NULL, "fake: unknown verb\n");
}

static const altar_command_runner_ops_t fake_ops = {.name = "fake-docker", .run = fake_runner_run};
static fake_docker_t fake;
static const altar_command_runner_t fake_runner = {.ops = &fake_ops, .impl = &fake};

/* The argv of call i joined with spaces, for exact comparisons. */
static char *call_str(size_t i) {
  static char buf[4096];
  if (i >= fake.ncalls) {
    snprintf(buf, sizeof buf, "(no such call %zu)", i);
    return buf;
  }
  altar_cmd_argv_render((const char *const *)fake.calls[i], buf, sizeof buf);
  return buf;
}

static size_t count_verb(const char *verb) {
  size_t n = 0;
  for (size_t i = 0; i < fake.ncalls; i++)
    if (fake.calls[i][1] && !strcmp(fake.calls[i][1], verb)) n++;
  return n;
}

/* ---- helpers ---------------------------------------------------------------- */

static char *root_dir;

/* Each test starts with an empty fake and a fresh data root. */
static void each_setup(void) {
  altar_storage_register_builtin();
  fake_reset(&fake);
  root_dir = altar_test_tmpdir("docker-scripted");
}

static void each_teardown(void) {
  fake_reset(&fake);
  altar_test_rmtree(root_dir);
  free(root_dir);
  root_dir = NULL;
}

static altar_backend_t *make(const char *user) {
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "data_root", root_dir);
  altar_strmap_set(&cfg, "slots", "3");
  if (user) altar_strmap_set(&cfg, "user", user);
  altar_error_t berr = {0};
  altar_backend_t *be = altar__docker_backend_open(&cfg, &fake_runner, &berr);
  altar_strmap_clear(&cfg);
  if (!be) fprintf(stderr, "make: %s\n", berr.msg);
  CU_ASSERT_FATAL(be != NULL);
  return be;
}

static altar_spec_t *spec_with(const char *c0, const char *c1) {
  altar_spec_t *s = altar_spec_new("score", "altar-test/busybox:1");
  CU_ASSERT_FATAL(s != NULL);
  altar_spec_add_arg(s, c0);
  if (c1) altar_spec_add_arg(s, c1);
  return s;
}

/* An inspect reply for one container. */
static char *inspect_json(const char *id, const char *status, int exit_code, bool oom, const char *started,
                          const char *finished, const char *timeout_label) {
  json_t *labels = json_pack("{s:s}", "job_id", "j1");
  if (timeout_label) json_object_set_new(labels, ALTAR_DOCKER_LABEL_TIMEOUT, json_string(timeout_label));
  json_t *arr = json_pack("[{s:s, s:{s:s, s:i, s:b, s:s, s:s, s:s}, s:{s:o}}]", "Id", id, "State", "Status", status,
                          "ExitCode", exit_code, "OOMKilled", oom, "Error", "", "StartedAt", started, "FinishedAt",
                          finished, "Config", "Labels", labels);
  char *s = json_dumps(arr, JSON_COMPACT);
  json_decref(arr);
  return s;
}

static const char *ID_A = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char *ID_B = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

static altar_status_t poll_one_scripted(altar_backend_t *be, const char *id, const char *json) {
  fake_program(&fake, "inspect", 0, json, NULL);
  altar_handle_t h;
  altar_handle_init(&h, "local", id);
  altar_status_t st;
  altar_error_t err = {0};
  int rc = altar_backend_poll(be, &h, 1, &st, &err);
  if (rc) fprintf(stderr, "poll: %s\n", err.msg);
  CU_ASSERT_EQUAL(rc, 0);
  altar_handle_clear(&h);
  return st;
}

/* ---- argv ------------------------------------------------------------------- */

static void test_submit_argv_exact(void) {
  altar_backend_t *be = make("1000:1000");
  altar_spec_t *s = spec_with("sh", "-c");
  altar_spec_add_arg(s, "echo 'a b' > /mnt/volume/x; exit 0");
  altar_spec_set_label(s, "job_id", "j 1");
  altar_spec_set_label(s, "fold", "3");
  s->resources.memory_mb = (altar_opt_i64_t){true, 64};
  s->timeout_s = (altar_opt_i64_t){true, 30};
  /* The fake has no "sh": program the reply docker would give. */
  char idline[80];
  snprintf(idline, sizeof idline, "%s\n", ID_A);
  fake_program(&fake, "run", 0, idline, NULL);
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &h, &err), 0);
  CU_ASSERT_EQUAL(fake.ncalls, 2);
  char key[ALTAR_TASK_KEY_LEN + 1];
  CU_ASSERT_EQUAL_FATAL(altar_spec_identity(s, key, &err), 0);
  /* First a look for a running container of the same task, to adopt. */
  char want[2048];
  snprintf(want, sizeof want,
           "docker ps -q --no-trunc --filter label=altar.task_key=%s --filter label=altar.data_root=%s "
           "--filter status=running",
           key, root_dir);
  CU_ASSERT_STRING_EQUAL(call_str(0), want);
  snprintf(want, sizeof want,
           "docker run -d --label fold=3 --label job_id=j 1 --label altar.kind=score "
           "--label altar.task_key=%s --label altar.data_root=%s --label altar.timeout_s=30 -v %s:/mnt/volume "
           "--user 1000:1000 --memory 64m --memory-swap 64m altar-test/busybox:1 sh -c echo 'a b' > /mnt/volume/x; "
           "exit 0",
           key, root_dir, root_dir);
  CU_ASSERT_STRING_EQUAL(call_str(1), want);
  /* Word boundaries too: the label with a space is one argv element. */
  CU_ASSERT_STRING_EQUAL(fake.calls[1][6], "job_id=j 1");
  CU_ASSERT_STRING_EQUAL(fake.calls[1][26], "echo 'a b' > /mnt/volume/x; exit 0");
  CU_ASSERT_PTR_NULL(fake.calls[1][27]);
  for (size_t i = 0; fake.calls[1][i]; i++) CU_ASSERT(strcmp(fake.calls[1][i], "--rm") != 0);
  /* The handle: backend name, container id, spec labels only. */
  CU_ASSERT_STRING_EQUAL(h.backend, "local");
  CU_ASSERT_STRING_EQUAL(h.external_id, ID_A);
  CU_ASSERT_TRUE(altar_strmap_equal(&h.labels, &s->labels));
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar_backend_close(be);
}

static void test_submit_argv_minimal(void) {
  altar_backend_t *be = make(NULL);
  altar_spec_t *s = spec_with("exit", "0");
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &h, &err), 0);
  char want[1024], key[ALTAR_TASK_KEY_LEN + 1];
  CU_ASSERT_EQUAL_FATAL(altar_spec_identity(s, key, &err), 0);
  snprintf(want, sizeof want,
           "docker run -d --label altar.kind=score --label altar.task_key=%s --label altar.data_root=%s "
           "-v %s:/mnt/volume altar-test/busybox:1 exit 0",
           key, root_dir, root_dir);
  CU_ASSERT_STRING_EQUAL(call_str(1), want);
  CU_ASSERT_EQUAL(strlen(h.external_id), 64);
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar_backend_close(be);
}

static void test_submit_rejects_before_running(void) {
  altar_backend_t *be = make(NULL);
  altar_error_t err = {0};
  altar_handle_t h;
  altar_spec_t *s = spec_with("exit", "0");
  altar_spec_set_label(s, "a=b", "c");
  CU_ASSERT_EQUAL(altar_backend_submit(be, s, &h, &err), ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "labels['a=b']"));
  altar_spec_free(s);

  s = spec_with("exit", "0");
  altar_spec_set_label(s, ALTAR_DOCKER_LABEL_TIMEOUT, "1");
  CU_ASSERT_EQUAL(altar_backend_submit(be, s, &h, &err), ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "reserved"));
  altar_spec_free(s);

  s = spec_with("exit", "0");
  altar_spec_set_gpu(s, ALTAR_GPU_POOL_A100, 1);
  CU_ASSERT_EQUAL(altar_backend_submit(be, s, &h, &err), ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "resources.gpu"));
  altar_spec_free(s);

  s = altar_spec_new("score", "-v/etc:/x");
  altar_spec_add_arg(s, "true");
  CU_ASSERT_EQUAL(altar_backend_submit(be, s, &h, &err), ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "image"));
  altar_spec_free(s);

  CU_ASSERT_EQUAL(fake.ncalls, 0); /* nothing reached docker */
  altar_backend_close(be);
}

static void test_submit_docker_error(void) {
  altar_backend_t *be = make(NULL);
  altar_spec_t *s = altar_spec_new("score", "no-such-image");
  altar_spec_add_arg(s, "true");
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_backend_submit(be, s, &h, &err), ALTAR_EBACKEND);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "pull access denied"));
  CU_ASSERT_PTR_NULL(h.external_id);
  /* docker's cause is quoted, not the usage hint it prints after it. */
  fake_program(&fake, "run", 125, NULL,
               "docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon "
               "running?.\nSee 'docker run --help'.\n");
  CU_ASSERT_EQUAL(altar_backend_submit(be, s, &h, &err), ALTAR_EBACKEND);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "Cannot connect to the Docker daemon"));
  CU_ASSERT_PTR_NULL(strstr(err.msg, "--help"));
  CU_ASSERT_TRUE(err.retriable);
  fake_program(&fake, "run", 125, NULL,
               "docker: invalid reference format.\nRun 'docker run --help' for more information\n");
  CU_ASSERT_EQUAL(altar_backend_submit(be, s, &h, &err), ALTAR_EBACKEND);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "invalid reference format"));
  /* A reply that is not a container id is not taken for one. */
  fake_program(&fake, "run", 0, "WARNING: something\n", NULL);
  altar_spec_free(s);
  s = spec_with("exit", "0");
  CU_ASSERT_EQUAL(altar_backend_submit(be, s, &h, &err), ALTAR_EBACKEND);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "not a container id"));
  altar_spec_free(s);
  altar_backend_close(be);
}

/* A running container labelled with the spec's task key is adopted, not
 * started twice (a dead worker's run on this engine); once it is gone, the
 * same spec starts a new one. */
static void test_submit_adopts_running_task(void) {
  altar_backend_t *be = make(NULL);
  altar_spec_t *s = spec_with("sleep", "300");
  altar_handle_t a, b, c;
  altar_error_t err = {0};
  size_t runs = count_verb("run");
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &a, &err), 0);
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &b, &err), 0);
  CU_ASSERT_STRING_EQUAL(b.external_id, a.external_id);
  CU_ASSERT_EQUAL(count_verb("run"), runs + 1);
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &a, &err), 0);
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &c, &err), 0);
  CU_ASSERT_STRING_NOT_EQUAL(c.external_id, a.external_id);
  CU_ASSERT_EQUAL(count_verb("run"), runs + 2);
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &c, &err), 0);
  altar_handle_clear(&a);
  altar_handle_clear(&b);
  altar_handle_clear(&c);
  altar_spec_free(s);
  altar_backend_close(be);
}

/* ---- poll ------------------------------------------------------------------- */

static void test_poll_uses_one_inspect(void) {
  altar_backend_t *be = make(NULL);
  altar_handle_t hs[4];
  const char *codes[] = {"0", "3", "0", "7"};
  for (int i = 0; i < 4; i++) {
    altar_spec_t *s = spec_with("exit", codes[i]);
    altar_error_t err = {0};
    CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &hs[i], &err), 0);
    altar_spec_free(s);
  }
  size_t before = fake.ncalls;
  altar_status_t st[4];
  altar_error_t err = {0};
  /* The failed containers' output: the first one's is quoted in its detail;
   * docker cannot give the second one's, whose detail stays as it was. */
  fake_program(&fake, "logs", 0, "loading\n", "FileNotFoundError: weights.h5\n");
  fake_program(&fake, "logs", 1, NULL, "Error: No such container\n");
  CU_ASSERT_EQUAL_FATAL(altar_backend_poll(be, hs, 4, st, &err), 0);
  CU_ASSERT_EQUAL(fake.ncalls, before + 3); /* one inspect, one logs per failed container */
  char logs_call[200];
  snprintf(logs_call, sizeof logs_call, "docker logs %s", hs[1].external_id);
  CU_ASSERT_STRING_EQUAL(call_str(before + 1), logs_call);
  const char *d1 = st[1].failure ? st[1].failure->detail : NULL;
  CU_ASSERT(d1 && strstr(d1, "exited with code 3") && strstr(d1, "--- stderr ---\nFileNotFoundError: weights.h5") &&
            strstr(d1, "--- stdout ---\nloading"));
  const char *d3 = st[3].failure ? st[3].failure->detail : NULL;
  CU_ASSERT(d3 && !strstr(d3, "---"));
  char want[1024];
  snprintf(want, sizeof want, "docker inspect --type container %s %s %s %s", hs[0].external_id, hs[1].external_id,
           hs[2].external_id, hs[3].external_id);
  CU_ASSERT_STRING_EQUAL(call_str(before), want);
  CU_ASSERT_EQUAL(st[0].state, ALTAR_STATE_SUCCEEDED);
  CU_ASSERT_EQUAL(st[1].state, ALTAR_STATE_FAILED);
  CU_ASSERT_STRING_EQUAL(st[1].failure->reason, "exit_3");
  CU_ASSERT_EQUAL(st[1].failure->exit_code.v, 3);
  CU_ASSERT_TRUE(st[1].failure->deterministic);
  CU_ASSERT_STRING_EQUAL(st[3].failure->reason, "exit_7");
  for (int i = 0; i < 4; i++) CU_ASSERT_TRUE(altar_handle_equal(&st[i].handle, &hs[i]));
  for (int i = 0; i < 4; i++) altar_status_clear(&st[i]);
  /* The quoted output is kept by task key; a failed container that printed
   * nothing keeps no directory. */
  char key[ALTAR_TASK_KEY_LEN + 1], path[4400];
  altar_spec_t *s3 = spec_with("exit", "3");
  CU_ASSERT_FATAL(altar_spec_identity(s3, key, &err) == 0);
  altar_spec_free(s3);
  snprintf(path, sizeof path, "%s/logs/%s/stderr", root_dir, key);
  CU_ASSERT(access(path, F_OK) == 0);
  /* What the backend keeps, from its index: that directory, its blocks. */
  uint64_t blocks = 0;
  static const char *const parts[] = {"", "/stdout", "/stderr"};
  for (size_t i = 0; i < 3; i++) {
    struct stat kst;
    snprintf(path, sizeof path, "%s/logs/%s%s", root_dir, key, parts[i]);
    CU_ASSERT_FATAL(stat(path, &kst) == 0);
    blocks += (uint64_t)kst.st_blocks * 512;
  }
  altar_kept_logs_t kept;
  CU_ASSERT_EQUAL(altar_backend_kept_logs(be, &kept), ALTAR_OK);
  CU_ASSERT_EQUAL(kept.dirs, 1);
  CU_ASSERT_EQUAL(kept.bytes, blocks);
  CU_ASSERT_EQUAL(kept.prune_next_dirs, 0);
  CU_ASSERT_EQUAL(kept.keep_dirs, 10000);
  fake_program(&fake, "logs", 0, "", "");
  altar_status_t again;
  CU_ASSERT_EQUAL_FATAL(altar_backend_poll(be, &hs[3], 1, &again, &err), 0);
  CU_ASSERT_EQUAL(again.state, ALTAR_STATE_FAILED);
  altar_status_clear(&again);
  altar_spec_t *s7 = spec_with("exit", "7");
  CU_ASSERT_FATAL(altar_spec_identity(s7, key, &err) == 0);
  altar_spec_free(s7);
  snprintf(path, sizeof path, "%s/logs/%s", root_dir, key);
  CU_ASSERT(access(path, F_OK) != 0);
  for (int i = 0; i < 4; i++) altar_handle_clear(&hs[i]);
  altar_backend_close(be);
}

static void test_inspect_parsing(void) {
  altar_backend_t *be = make(NULL);
  const char *zero = "0001-01-01T00:00:00Z";
  char *j;
  altar_status_t st;

  j = inspect_json(ID_A, "created", 0, false, zero, zero, NULL);
  st = poll_one_scripted(be, ID_A, j);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_PENDING);
  CU_ASSERT_PTR_NULL(st.failure);
  altar_status_clear(&st);
  free(j);

  j = inspect_json(ID_A, "running", 0, false, "2026-12-02T14:19:13.267320236Z", zero, NULL);
  st = poll_one_scripted(be, ID_A, j);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_RUNNING);
  altar_status_clear(&st);
  free(j);

  j = inspect_json(ID_A, "exited", 0, false, "2026-12-02T14:19:13Z", "2026-12-02T14:19:14Z", NULL);
  st = poll_one_scripted(be, ID_A, j);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
  altar_status_clear(&st);
  free(j);

  j = inspect_json(ID_A, "exited", 42, false, "2026-12-02T14:19:13Z", "2026-12-02T14:19:14Z", "3600");
  st = poll_one_scripted(be, ID_A, j);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
  CU_ASSERT_STRING_EQUAL(st.failure->reason, "exit_42");
  CU_ASSERT_TRUE(st.failure->exit_code.set);
  CU_ASSERT_EQUAL(st.failure->exit_code.v, 42);
  CU_ASSERT_TRUE(st.failure->deterministic);
  altar_status_clear(&st);
  free(j);

  j = inspect_json(ID_A, "exited", 137, true, "2026-12-02T14:19:13Z", "2026-12-02T14:19:14Z", NULL);
  st = poll_one_scripted(be, ID_A, j);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
  CU_ASSERT_STRING_EQUAL(st.failure->reason, "oom_killed");
  CU_ASSERT_FALSE(st.failure->deterministic);
  altar_status_clear(&st);
  free(j);

  /* Killed for its timeout by an earlier poll (maybe another process). */
  j = inspect_json(ID_A, "exited", 137, false, "2026-12-02T14:19:13Z", "2026-12-02T14:19:23.5Z", "10");
  st = poll_one_scripted(be, ID_A, j);
  CU_ASSERT_STRING_EQUAL(st.failure->reason, "timeout");
  CU_ASSERT_FALSE(st.failure->deterministic);
  altar_status_clear(&st);
  free(j);

  j = inspect_json(ID_A, "dead", 0, false, zero, zero, NULL);
  st = poll_one_scripted(be, ID_A, j);
  CU_ASSERT_STRING_EQUAL(st.failure->reason, "job_failed");
  altar_status_clear(&st);
  free(j);

  /* docker knows nothing of it: container_missing, not an error. */
  fake_program(&fake, "inspect", 1, "[]", "Error: No such object: aaaa\n");
  altar_handle_t h;
  altar_handle_init(&h, "local", ID_A);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_backend_poll(be, &h, 1, &st, &err), 0);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
  CU_ASSERT_STRING_EQUAL(st.failure->reason, "container_missing");
  CU_ASSERT_FALSE(st.failure->deterministic);
  altar_status_clear(&st);

  /* Garbage from docker is a poll error naming what, not a guess. */
  fake_program(&fake, "inspect", 0, "[{\"Id\": 5}]", NULL);
  CU_ASSERT_EQUAL(altar_backend_poll(be, &h, 1, &st, &err), ALTAR_EDECODE);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "Id"));
  fake_program(&fake, "inspect", 0, "not json", NULL);
  CU_ASSERT_EQUAL(altar_backend_poll(be, &h, 1, &st, &err), ALTAR_EDECODE);
  /* The daemon being down is an error, not "every container is missing". */
  fake_program(&fake, "inspect", 1, "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock.\n");
  CU_ASSERT_EQUAL(altar_backend_poll(be, &h, 1, &st, &err), ALTAR_EBACKEND);
  CU_ASSERT_TRUE(err.retriable);
  altar_handle_clear(&h);

  /* A handle whose id is not a container id never reaches docker. */
  size_t before = fake.ncalls;
  altar_handle_init(&h, "local", "--help");
  CU_ASSERT_EQUAL(altar_backend_poll(be, &h, 1, &st, &err), 0);
  CU_ASSERT_STRING_EQUAL(st.failure->reason, "container_missing");
  CU_ASSERT_EQUAL(fake.ncalls, before);
  altar_status_clear(&st);
  altar_handle_clear(&h);
  altar_backend_close(be);
}

static void test_kill_past_deadline_on_first_poll(void) {
  altar_backend_t *be = make(NULL);
  /* A started long ago with a 5 s limit; B started now with an hour. */
  char now_s[64];
  fmt_time(now_real(), now_s, sizeof now_s);
  json_error_t je;
  char *ja = inspect_json(ID_A, "running", 0, false, "2020-01-01T00:00:00.5Z", "0001-01-01T00:00:00Z", "5");
  char *jb = inspect_json(ID_B, "running", 0, false, now_s, "0001-01-01T00:00:00Z", "3600");
  json_t *a = json_loads(ja, 0, &je), *b = json_loads(jb, 0, &je);
  json_array_extend(a, b);
  char *both = json_dumps(a, JSON_COMPACT);
  json_decref(a);
  json_decref(b);
  free(ja);
  free(jb);
  fake_program(&fake, "inspect", 0, both, NULL);
  fake_program(&fake, "kill", 0, ID_A, NULL);
  free(both);

  altar_handle_t hs[2];
  altar_handle_init(&hs[0], "local", ID_A);
  altar_handle_init(&hs[1], "local", ID_B);
  altar_status_t st[2];
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_backend_poll(be, hs, 2, st, &err), 0);
  CU_ASSERT_EQUAL(fake.ncalls, 2);
  CU_ASSERT_STRING_EQUAL(fake.calls[0][1], "inspect");
  char want[256];
  snprintf(want, sizeof want, "docker kill %s", ID_A);
  CU_ASSERT_STRING_EQUAL(call_str(1), want);
  CU_ASSERT_EQUAL(st[0].state, ALTAR_STATE_FAILED);
  CU_ASSERT_STRING_EQUAL(st[0].failure->reason, "timeout");
  CU_ASSERT_EQUAL(st[1].state, ALTAR_STATE_RUNNING);
  CU_ASSERT_EQUAL(count_verb("kill"), 1);
  for (int i = 0; i < 2; i++) {
    altar_status_clear(&st[i]);
    altar_handle_clear(&hs[i]);
  }
  altar_backend_close(be);
}

static void test_time_parsing(void) {
  double t = -1;
  CU_ASSERT_EQUAL(altar__docker_parse_time("2026-12-02T14:19:13.5Z", &t), 0);
  CU_ASSERT_DOUBLE_EQUAL(t, 1796221153.5, 1e-6);
  CU_ASSERT_EQUAL(altar__docker_parse_time("2026-12-02T16:19:13.5+02:00", &t), 0);
  CU_ASSERT_DOUBLE_EQUAL(t, 1796221153.5, 1e-6);
  CU_ASSERT_EQUAL(altar__docker_parse_time("2026-12-02T14:19:13.267320236Z", &t), 0);
  CU_ASSERT_DOUBLE_EQUAL(t, 1796221153.267320236, 1e-5);
  CU_ASSERT_EQUAL(altar__docker_parse_time("0001-01-01T00:00:00Z", &t), 0);
  CU_ASSERT_DOUBLE_EQUAL(t, 0, 0);
  const char *bad[] = {"",
                       "2026-12-02",
                       "2026-12-02T14:19:13",
                       "2026-13-02T14:19:13Z",
                       "2026-12-02T14:19:13.Z",
                       "2026-12-02T14:19:13Zjunk",
                       "yesterday",
                       NULL};
  for (size_t i = 0; bad[i]; i++) CU_ASSERT_EQUAL(altar__docker_parse_time(bad[i], &t), ALTAR_EDECODE);
}

/* ---- cancel ----------------------------------------------------------------- */

static void test_cancel(void) {
  altar_backend_t *be = make(NULL);
  altar_spec_t *s = spec_with("sleep", "300");
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &h, &err), 0);
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, &err), 0);
  char want[256];
  snprintf(want, sizeof want, "docker rm --force %s", h.external_id);
  CU_ASSERT_STRING_EQUAL(call_str(2), want);
  /* Again: docker says the container is missing, which is fine. */
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, &err), 0);
  CU_ASSERT_STRING_EQUAL(call_str(3), want);
  /* A failure that is not "missing" is reported. */
  fake_program(&fake, "rm", 1, "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock.\n");
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, &err), ALTAR_EBACKEND);
  CU_ASSERT_TRUE(err.retriable);
  /* Not a container id: nothing to remove, nothing run. */
  size_t before = fake.ncalls;
  altar_handle_t bad;
  altar_handle_init(&bad, "local", "-f");
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &bad, &err), 0);
  CU_ASSERT_EQUAL(fake.ncalls, before);
  altar_handle_clear(&bad);
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar_backend_close(be);
}

/* ---- capacity, resolver, config --------------------------------------------- */

static void test_capacity_resolver_config(void) {
  altar_backend_t *be = make(NULL);
  CU_ASSERT_STRING_EQUAL(altar_backend_name(be), "local");
  CU_ASSERT_EQUAL(altar_backend_verification(be), ALTAR_VERIFY_STAGING);
  altar_capacity_t cap;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_backend_capacity(be, &cap, &err), 0);
  CU_ASSERT_EQUAL(cap.n, 1);
  CU_ASSERT_STRING_EQUAL(cap.pools[0], "normal");
  CU_ASSERT_EQUAL(cap.free_slots[0], 3);
  altar_resources_t cpu = {.gpu = NULL, .count = 1};
  CU_ASSERT_EQUAL(altar_capacity_free_for(&cap, &cpu), 3);
  altar_capacity_clear(&cap);
  CU_ASSERT_STRING_EQUAL(altar_backend_mount_root(be), "/mnt/volume");
  char *p = NULL;
  CU_ASSERT_EQUAL(altar_backend_resolve_path(be, "jobs/./j1//x.bin", &p, &err), 0);
  CU_ASSERT_STRING_EQUAL(p, "/mnt/volume/jobs/j1/x.bin");
  free(p);
  CU_ASSERT_EQUAL(altar_backend_resolve_path(be, "../etc/passwd", &p, &err), ALTAR_EPATH);
  CU_ASSERT_EQUAL(altar_backend_resolve_path(be, "/etc/passwd", &p, &err), ALTAR_EPATH);
  CU_ASSERT_PTR_NULL(p);
  altar_backend_close(be);

  altar_error_t berr = {0};
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "data_root", root_dir);
  altar_strmap_set(&cfg, "slotz", "3");
  CU_ASSERT_PTR_NULL(altar__docker_backend_open(&cfg, &fake_runner, &berr));
  CU_ASSERT_PTR_NOT_NULL(strstr(berr.msg, "slotz"));
  altar_strmap_remove(&cfg, "slotz");
  altar_strmap_set(&cfg, "slots", "-1");
  CU_ASSERT_PTR_NULL(altar__docker_backend_open(&cfg, &fake_runner, &berr));
  CU_ASSERT_PTR_NOT_NULL(strstr(berr.msg, "slots"));
  altar_strmap_remove(&cfg, "slots");
  altar_strmap_set(&cfg, "user", "--privileged");
  CU_ASSERT_PTR_NULL(altar__docker_backend_open(&cfg, &fake_runner, &berr));
  CU_ASSERT_PTR_NOT_NULL(strstr(berr.msg, "user"));
  altar_strmap_remove(&cfg, "user");
  altar_strmap_set(&cfg, "data_root", "/tmp/a:b");
  CU_ASSERT_PTR_NULL(altar__docker_backend_open(&cfg, &fake_runner, &berr));
  CU_ASSERT_PTR_NOT_NULL(strstr(berr.msg, "data_root"));
  altar_strmap_clear(&cfg);
}

static void test_registered_names(void) {
  /* create_by_name through the real runner: "docker" is an alias of "local". */
  altar_backend_register(&altar_backend_docker_ops);
  altar_backend_register_alias("docker", &altar_backend_docker_ops);
  CU_ASSERT_PTR_EQUAL(altar_backend_lookup("docker"), &altar_backend_docker_ops);
  CU_ASSERT_PTR_EQUAL(altar_backend_lookup("local"), &altar_backend_docker_ops);
}

static void test_missing_client_is_a_clear_error(void) {
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "data_root", root_dir);
  altar_strmap_set(&cfg, "docker", "/nonexistent/docker");
  altar_error_t berr = {0};
  altar_backend_t *be = altar_backend_open(&altar_backend_docker_ops, &cfg, &berr);
  altar_strmap_clear(&cfg);
  CU_ASSERT_FATAL(be != NULL);
  altar_spec_t *s = spec_with("true", NULL);
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_backend_submit(be, s, &h, &err), ALTAR_EBACKEND);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "/nonexistent/docker"));
  altar_spec_free(s);
  altar_backend_close(be);
}

/* ---- staging ---------------------------------------------------------------- */

static void test_staging_verifies_records_and_skips(void) {
  altar_backend_t *be = make(NULL);
  char src[1024], dest[1024];
  snprintf(src, sizeof src, "%s/src-model.tar", root_dir);
  altar_test_write_file(src, "model bytes", 11);
  char digest[ALTAR_DIGEST_BUFSZ];
  CU_ASSERT_EQUAL_FATAL(altar_sha256_bytes("model bytes", 11, digest, NULL), 0);
  char uri[1100];
  snprintf(uri, sizeof uri, "file://%s", src);
  altar_transfer_t in = {.uri = uri, .logical_path = "models/m1/m.tar", .digest = digest};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_backend_stage_inputs(be, &in, 1, &err), 0);
  snprintf(dest, sizeof dest, "%s/models/m1/m.tar", root_dir);
  size_t len = 0;
  char *got = altar_test_read_file(dest, &len);
  CU_ASSERT_FATAL(got != NULL);
  CU_ASSERT_EQUAL(len, 11);
  free(got);
  CU_ASSERT_TRUE(altar_has_verification_record(dest, digest));
  /* Changing the source now shows whether a second staging copies again:
   * the recorded copy must be kept as it is. */
  altar_test_write_file(src, "other bytes", 11);
  CU_ASSERT_EQUAL(altar_backend_stage_inputs(be, &in, 1, &err), 0);
  got = altar_test_read_file(dest, &len);
  CU_ASSERT(got && !memcmp(got, "model bytes", 11));
  free(got);
  /* A copy that does not match is deleted and named in the error. */
  altar_transfer_t bad = {.uri = uri, .logical_path = "models/m2/m.tar", .digest = digest};
  CU_ASSERT_EQUAL(altar_backend_stage_inputs(be, &bad, 1, &err), ALTAR_EINTEGRITY);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "inputs[0]"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "models/m2/m.tar"));
  snprintf(dest, sizeof dest, "%s/models/m2/m.tar", root_dir);
  CU_ASSERT_EQUAL(access(dest, F_OK), -1);
  /* Escaping logical paths and malformed digests never touch the disk. */
  altar_transfer_t esc = {.uri = uri, .logical_path = "../outside", .digest = NULL};
  CU_ASSERT_EQUAL(altar_backend_stage_inputs(be, &esc, 1, &err), ALTAR_EPATH);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "inputs[0].logical_path"));
  altar_transfer_t mal = {.uri = uri, .logical_path = "x", .digest = "sha256:XYZ"};
  CU_ASSERT_EQUAL(altar_backend_stage_inputs(be, &mal, 1, &err), ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "inputs[0].digest"));
  CU_ASSERT_EQUAL(fake.ncalls, 0); /* staging runs no docker command */
  altar_backend_close(be);
}

static void test_collect_outputs(void) {
  altar_backend_t *be = make(NULL);
  char host[1024], out[1024], uri[1100];
  snprintf(host, sizeof host, "%s/jobs", root_dir);
  mkdir(host, 0755);
  snprintf(host, sizeof host, "%s/jobs/j1", root_dir);
  mkdir(host, 0755);
  snprintf(host, sizeof host, "%s/jobs/j1/result.txt", root_dir);
  altar_test_write_file(host, "result\n", 7);
  snprintf(out, sizeof out, "%s/collected.txt", root_dir);
  snprintf(uri, sizeof uri, "file://%s", out);
  altar_transfer_t o = {.uri = uri, .logical_path = "jobs/j1/result.txt"};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_backend_collect_outputs(be, &o, 1, &err), 0);
  size_t len = 0;
  char *got = altar_test_read_file(out, &len);
  CU_ASSERT(got && len == 7 && !memcmp(got, "result\n", 7));
  free(got);
  altar_transfer_t missing = {.uri = uri, .logical_path = "jobs/j1/none.txt"};
  CU_ASSERT_EQUAL(altar_backend_collect_outputs(be, &missing, 1, &err), ALTAR_ENOTFOUND);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "outputs[0]"));
  altar_backend_close(be);
}

/* ---- the contract suite against the fake ------------------------------------ */

static altar_backend_t *fx_make(void *ctx, const char *data_root, altar_error_t *err) {
  (void)ctx;
  altar_storage_register_builtin();
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "data_root", data_root);
  altar_backend_t *be = altar__docker_backend_open(&cfg, &fake_runner, err);
  altar_strmap_clear(&cfg);
  return be;
}

static int fx_set_cmd(altar_spec_t *spec, const char *a0, const char *a1) {
  for (size_t i = 0; i < spec->n_command; i++) free(spec->command[i]);
  free(spec->command);
  spec->command = NULL;
  spec->n_command = 0;
  int rc = altar_spec_add_arg(spec, a0);
  if (!rc && a1) rc = altar_spec_add_arg(spec, a1);
  return rc;
}

static int fx_set_exit(void *ctx, altar_spec_t *spec, int code) {
  (void)ctx;
  char buf[16];
  snprintf(buf, sizeof buf, "%d", code);
  return fx_set_cmd(spec, "exit", buf);
}

static int fx_set_sleep(void *ctx, altar_spec_t *spec, int seconds) {
  (void)ctx;
  char buf[16];
  snprintf(buf, sizeof buf, "%d", seconds);
  return fx_set_cmd(spec, "sleep", buf);
}

static int fx_set_oom(void *ctx, altar_spec_t *spec) {
  (void)ctx;
  spec->resources.memory_mb = (altar_opt_i64_t){true, 32};
  return fx_set_cmd(spec, "oom", NULL);
}

static int fx_set_read(void *ctx, altar_spec_t *spec, const char *physical) {
  (void)ctx;
  return fx_set_cmd(spec, "read", physical);
}

static int fx_vanish(void *ctx, altar_backend_t *be, const altar_handle_t *h) {
  (void)ctx;
  (void)be;
  fake_container_t *c = fake_find(&fake, h->external_id);
  if (!c) return -1;
  fake_remove(c);
  return 0;
}

static void fx_cleanup(void *ctx, const char *data_root) {
  (void)ctx;
  (void)data_root;
  fake_reset(&fake);
}

static const altar_contract_fixture_t fixture = {
    .name = "docker-scripted",
    .image = "altar-test/busybox:1",
    .wait_s = 30,
    .make_backend = fx_make,
    .set_exit = fx_set_exit,
    .set_sleep = fx_set_sleep,
    .set_oom = fx_set_oom,
    .set_read_input = fx_set_read,
    .vanish = fx_vanish,
    .cleanup = fx_cleanup,
};

static void add(void) {
  {
    CU_pSuite suite__ = CU_add_suite_with_setup_and_teardown("docker[scripted]", NULL, NULL, each_setup, each_teardown);
    if (!suite__) return;
    ALTAR_TEST(test_submit_argv_exact);
    ALTAR_TEST(test_submit_argv_minimal);
    ALTAR_TEST(test_submit_adopts_running_task);
    ALTAR_TEST(test_submit_rejects_before_running);
    ALTAR_TEST(test_submit_docker_error);
    ALTAR_TEST(test_poll_uses_one_inspect);
    ALTAR_TEST(test_inspect_parsing);
    ALTAR_TEST(test_kill_past_deadline_on_first_poll);
    ALTAR_TEST(test_time_parsing);
    ALTAR_TEST(test_cancel);
    ALTAR_TEST(test_capacity_resolver_config);
    ALTAR_TEST(test_registered_names);
    ALTAR_TEST(test_missing_client_is_a_clear_error);
    ALTAR_TEST(test_staging_verifies_records_and_skips);
    ALTAR_TEST(test_collect_outputs);
  }
  altar_contract_add_suite(&fixture);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
