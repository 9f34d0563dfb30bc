/* The ExecutionBackend contract suite on `process`, plus what is particular
 * to it: cwd and environment of a task, bounded logs, exec failure, GPU
 * requests refused, capacity counting its slots. */
#include "altar/plugin/backend.h"
#include "altar/digest.h"
#include "altar/pools.h"
#include "altar/codec.h"
#include "altar/storage.h"
#include "backend_contract.h"
#include "testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- the fixture -------------------------------------------------------- */

static altar_backend_t *make_process(void *ctx, const char *data_root, altar_error_t *err) {
  const char *memory = ctx;
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "data_root", data_root);
  altar_strmap_set(&cfg, "slots", "4");
  if (memory) altar_strmap_set(&cfg, "memory", memory);
  altar_backend_t *be = altar_backend_open(&altar_backend_process_ops, &cfg, err);
  altar_strmap_clear(&cfg);
  return be;
}

static int set_argv(altar_spec_t *s, const char *const *argv) {
  for (size_t i = 0; i < s->n_command; i++) free(s->command[i]);
  free(s->command);
  s->command = NULL;
  s->n_command = 0;
  for (size_t i = 0; argv[i]; i++)
    if (altar_spec_add_arg(s, argv[i]) < 0) return -1;
  return 0;
}

static int set_exit(void *ctx, altar_spec_t *s, int code) {
  (void)ctx;
  char script[32];
  snprintf(script, sizeof script, "exit %d", code);
  const char *argv[] = {"sh", "-c", script, NULL};
  return set_argv(s, argv);
}

static int set_sleep(void *ctx, altar_spec_t *s, int seconds) {
  (void)ctx;
  char secs[16];
  snprintf(secs, sizeof secs, "%d", seconds);
  const char *argv[] = {"sleep", secs, NULL};
  return set_argv(s, argv);
}

static int set_oom(void *ctx, altar_spec_t *s) {
  (void)ctx;
  /* Grows without end, so it can only stop by being killed. */
  const char *argv[] = {"perl", "-e", "my @a; while (1) { push @a, 'x' x 1048576 }", NULL};
  s->resources.memory_mb = (altar_opt_i64_t){true, 64};
  return set_argv(s, argv);
}

static int set_read_input(void *ctx, altar_spec_t *s, const char *path) {
  (void)ctx;
  const char *argv[] = {"cat", path, NULL};
  return set_argv(s, argv);
}

static char *task_file(const char *data_root, const char *id, const char *name) {
  size_t n = strlen(data_root) + strlen(id) + strlen(name) + 16;
  char *p = malloc(n);
  snprintf(p, n, "%s/tasks/%s/%s", data_root, id, name);
  return p;
}

/* A task's output is kept by task key: <data_root>/logs/<key>/<name>. */
static char *log_file(const char *data_root, const altar_spec_t *spec, const char *name) {
  char key[ALTAR_TASK_KEY_LEN + 1];
  altar_error_t e = {0};
  if (altar_spec_identity(spec, key, &e) < 0) return NULL;
  size_t n = strlen(data_root) + strlen(key) + strlen(name) + 16;
  char *p = malloc(n);
  snprintf(p, n, "%s/logs/%s/%s", data_root, key, name);
  return p;
}

/* The data root of a process backend is its mount root. */
static long read_pid_field(const char *data_root, const char *id, const char *key) {
  char *path = task_file(data_root, id, "task");
  long v = 0;
  for (int i = 0; i < 500 && !v; i++) {
    char *text = altar_test_read_file(path, NULL);
    const char *p = text ? strstr(text, key) : NULL;
    if (p) v = strtol(p + strlen(key), NULL, 10);
    free(text);
    if (!v) {
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  free(path);
  return v;
}

static int vanish(void *ctx, altar_backend_t *be, const altar_handle_t *h) {
  (void)ctx;
  /* The supervisor dies without a word (kill -9); its command follows it. */
  long sup = read_pid_field(altar_backend_mount_root(be), h->external_id, "supervisor=");
  if (sup <= 1) return -1;
  return kill((pid_t)sup, SIGKILL);
}

static const altar_contract_fixture_t process_fixture = {
    .name = "process",
    .ctx = NULL,
    .image = "debian:12 (recorded, unused)",
    .wait_s = 60,
    .make_backend = make_process,
    .set_exit = set_exit,
    .set_sleep = set_sleep,
    .set_oom = set_oom,
    .set_read_input = set_read_input,
    .vanish = vanish,
};

/* ---- process specifics -------------------------------------------------- */

static char *root;
static altar_backend_t *be;

static int setup(void) {
  root = altar_test_tmpdir("process");
  altar_error_t berr = {0};
  be = make_process(NULL, root, &berr);
  return be ? 0 : 1;
}

static int teardown(void) {
  altar_backend_close(be);
  altar_test_rmtree(root);
  free(root);
  return 0;
}

static int run(altar_spec_t *s, altar_status_t *st, altar_handle_t *h) {
  altar_error_t err = {0};
  int rc = altar_backend_submit(be, s, h, &err);
  if (rc < 0) fprintf(stderr, "submit: %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  return altar_contract_wait_terminal(be, h, 60, st);
}

static void test_cwd_env_and_logical_layout(void) {
  altar_spec_t *s = altar_spec_new("k", "img:1");
  /* Writes through the logical layout under ALTAR_DATA_ROOT, from its own cwd. */
  const char *argv[] = {"sh", "-c",
                        "mkdir -p \"$ALTAR_DATA_ROOT/jobs/j1\" && pwd > \"$ALTAR_DATA_ROOT/jobs/j1/cwd\" "
                        "&& echo \"$ALTAR_TASK_ID\" && echo to-stderr >&2",
                        NULL};
  set_argv(s, argv);
  altar_status_t st;
  altar_handle_t h;
  if (run(s, &st, &h) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
    char path[4096];
    snprintf(path, sizeof path, "%s/jobs/j1/cwd", root);
    char *cwd = altar_test_read_file(path, NULL);
    char want[4096];
    char real[4096];
    CU_ASSERT_PTR_NOT_NULL(realpath(root, real));
    snprintf(want, sizeof want, "%s/tasks/%s\n", real, h.external_id);
    CU_ASSERT_PTR_NOT_NULL(cwd);
    if (cwd) CU_ASSERT_STRING_EQUAL(cwd, want);
    free(cwd);
    char *out = log_file(root, s, "stdout");
    char *text = altar_test_read_file(out, NULL);
    CU_ASSERT_PTR_NOT_NULL(text);
    if (text) CU_ASSERT_NSTRING_EQUAL(text, h.external_id, strlen(h.external_id));
    free(text);
    free(out);
    char *errp = log_file(root, s, "stderr");
    text = altar_test_read_file(errp, NULL);
    if (text) CU_ASSERT_STRING_EQUAL(text, "to-stderr\n");
    free(text);
    free(errp);
    char *meta = task_file(root, h.external_id, "task");
    text = altar_test_read_file(meta, NULL);
    CU_ASSERT(text && strstr(text, "image=img:1\n")); /* recorded, not used */
    CU_ASSERT(text && strstr(text, "\nsupervisor=")); /* appended by the supervisor */
    free(text);
    free(meta);
    altar_status_clear(&st);
    altar_handle_clear(&h);
  }
  altar_spec_free(s);
}

static void test_logs_bounded(void) {
  altar_strmap_t cfg = {0};
  char *r2 = altar_test_tmpdir("process-logs");
  altar_strmap_set(&cfg, "data_root", r2);
  altar_strmap_set(&cfg, "log_cap", "1000");
  altar_error_t berr = {0};
  altar_backend_t *b2 = altar_backend_open(&altar_backend_process_ops, &cfg, &berr);
  altar_strmap_clear(&cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(b2);
  altar_spec_t *s = altar_spec_new("k", "i");
  /* 100000 lines: far more than the cap; the first and last survive. */
  const char *argv[] = {"sh", "-c", "echo FIRST; seq 1 100000; echo LAST", NULL};
  set_argv(s, argv);
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(b2, s, &h, &err), 0);
  altar_status_t st;
  if (altar_contract_wait_terminal(b2, &h, 60, &st) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
    char *out = log_file(r2, s, "stdout");
    size_t len = 0;
    char *text = altar_test_read_file(out, &len);
    CU_ASSERT_PTR_NOT_NULL(text);
    if (text) {
      CU_ASSERT(len <= 1000 + 64);
      CU_ASSERT_NSTRING_EQUAL(text, "FIRST\n", 6);
      CU_ASSERT(len >= 5 && !strcmp(text + len - 5, "LAST\n"));
      CU_ASSERT_PTR_NOT_NULL(strstr(text, "bytes omitted]"));
    }
    free(text);
    free(out);
    altar_status_clear(&st);
  }
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar_backend_close(b2);
  altar_test_rmtree(r2);
  free(r2);
}

/* A failed command's last output reaches the failure's detail, with the
 * values of secret variables of the environment it ran with replaced; the
 * logs stay by task key after the task directory is reclaimed and reused. */
static void test_failure_detail_carries_output(void) {
  setenv("ALTAR_TEST_API_TOKEN", "s3cr3t-value-xyz", 1);
  altar_spec_t *s = altar_spec_new("k", "i");
  const char *argv[] = {"sh", "-c",
                        "seq 1 5000; echo \"FileNotFoundError: weights.h5 $ALTAR_TEST_API_TOKEN\" >&2; "
                        "printf 'bad \\377\\376 bytes\\n' >&2; exit 3",
                        NULL};
  set_argv(s, argv);
  altar_status_t st;
  altar_handle_t h;
  if (run(s, &st, &h) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
    const char *d = st.failure ? st.failure->detail : NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_PTR_NOT_NULL(strstr(d, "command exited with code 3"));
    CU_ASSERT_PTR_NOT_NULL(strstr(d, "FileNotFoundError: weights.h5 [redacted]"));
    CU_ASSERT_PTR_NULL(strstr(d, "s3cr3t-value-xyz"));
    CU_ASSERT_PTR_NOT_NULL(strstr(d, "bad ?? bytes"));
    CU_ASSERT_PTR_NOT_NULL(strstr(d, "\n5000\n")); /* stdout's last lines */
    CU_ASSERT(strlen(d) <= ALTAR_BOUND_DETAIL);
    altar_error_t err = {0};
    CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, &err), 0); /* reclaimed: its directory is reused */
    altar_status_clear(&st);
    altar_handle_clear(&h);
    altar_spec_t *other = altar_spec_new("k", "i");
    const char *quiet[] = {"true", NULL};
    set_argv(other, quiet);
    if (run(other, &st, &h) == 0) {
      char *errp = log_file(root, s, "stderr");
      char *text = altar_test_read_file(errp, NULL);
      CU_ASSERT(text && strstr(text, "FileNotFoundError")); /* the failed task's log survives */
      CU_ASSERT(text && strstr(text, "[redacted]") && !strstr(text, "s3cr3t-value-xyz")); /* redacted on disk too */
      free(text);
      free(errp);
      altar_status_clear(&st);
      CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, &err), 0);
      altar_handle_clear(&h);
    }
    altar_spec_free(other);
  }
  unsetenv("ALTAR_TEST_API_TOKEN");
  altar_spec_free(s);
}

/* Kept output older than the retention is deleted when a backend starts on
 * the data root; newer output, and names that are not task keys, stay. */
static void test_old_logs_swept(void) {
  char *r = altar_test_tmpdir("process-logs-sweep");
  char old_dir[4400], new_dir[4400], other[4400], logs[4200];
  snprintf(logs, sizeof logs, "%s/logs", r);
  CU_ASSERT_EQUAL_FATAL(mkdir(logs, 0755), 0);
  snprintf(old_dir, sizeof old_dir, "%s/%064d", logs, 1);
  snprintf(new_dir, sizeof new_dir, "%s/%064d", logs, 2);
  snprintf(other, sizeof other, "%s/not-a-key", logs);
  CU_ASSERT_EQUAL_FATAL(mkdir(old_dir, 0755), 0);
  CU_ASSERT_EQUAL_FATAL(mkdir(new_dir, 0755), 0);
  CU_ASSERT_EQUAL_FATAL(mkdir(other, 0755), 0);
  struct timespec ts[2] = {{time(NULL) - 15 * 24 * 3600, 0}, {time(NULL) - 15 * 24 * 3600, 0}};
  CU_ASSERT_EQUAL(utimensat(AT_FDCWD, old_dir, ts, 0), 0);
  CU_ASSERT_EQUAL(utimensat(AT_FDCWD, other, ts, 0), 0);
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "data_root", r);
  altar_error_t berr = {0};
  altar_backend_t *b = altar_backend_open(&altar_backend_process_ops, &cfg, &berr);
  altar_strmap_clear(&cfg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(b);
  struct stat st;
  CU_ASSERT_NOT_EQUAL(stat(old_dir, &st), 0);
  CU_ASSERT_EQUAL(stat(new_dir, &st), 0);
  CU_ASSERT_EQUAL(stat(other, &st), 0);
  altar_backend_close(b);
  altar_test_rmtree(r);
  free(r);
}

static void test_exec_failure_is_exit_127(void) {
  altar_spec_t *s = altar_spec_new("k", "i");
  altar_spec_add_arg(s, "/nonexistent/altar-no-such-program");
  altar_status_t st;
  altar_handle_t h;
  if (run(s, &st, &h) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
    if (st.failure) {
      CU_ASSERT_STRING_EQUAL(st.failure->reason, "exit_127");
      CU_ASSERT(st.failure->detail && strstr(st.failure->detail, "No such file"));
    }
    altar_status_clear(&st);
    altar_handle_clear(&h);
  }
  altar_spec_free(s);
}

/* The supervisor is the program carried in the library, exec'd from memory,
 * not a fork of us (which would copy our whole address space per task);
 * only where exec from a memfd is forbidden does the backend fork. */
static void test_supervisor_is_exec_not_fork(void) {
  altar_spec_t *s = altar_spec_new("k", "i");
  const char *argv[] = {"sh", "-c", "readlink /proc/$PPID/exe", NULL};
  set_argv(s, argv);
  char *noexec = altar_test_read_file("/proc/sys/vm/memfd_noexec", NULL);
  bool forbidden = noexec && strtol(noexec, NULL, 10) == 2;
  free(noexec);
  altar_status_t st;
  altar_handle_t h;
  if (run(s, &st, &h) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
    char *out = log_file(root, s, "stdout");
    char *text = altar_test_read_file(out, NULL);
    CU_ASSERT_PTR_NOT_NULL(text);
    if (text && !forbidden) CU_ASSERT_PTR_NOT_NULL(strstr(text, "memfd:altar-supervisor"));
    if (text && forbidden) CU_ASSERT_PTR_NULL(strstr(text, "memfd:altar-supervisor"));
    free(text);
    free(out);
    altar_status_clear(&st);
    altar_handle_clear(&h);
  }
  altar_spec_free(s);
}

/* A reclaimed task's directory is reused by the next submit, emptied of all
 * the task left there; a task that swapped its task file for a link to
 * another file does not get that file truncated (its directory is deleted). */
static void test_reclaimed_directory_is_reused_clean(void) {
  altar_spec_t *s = altar_spec_new("k", "i");
  const char *dirty[] = {"sh", "-c", "mkdir -p sub && echo x > sub/f && echo junk > junk && echo out", NULL};
  set_argv(s, dirty);
  altar_status_t st;
  altar_handle_t h;
  if (run(s, &st, &h) != 0) {
    altar_spec_free(s);
    return;
  }
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
  altar_status_clear(&st);
  char *dir = task_file(root, h.external_id, "");
  struct stat before, after;
  CU_ASSERT_EQUAL_FATAL(stat(dir, &before), 0);
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, &err), 0); /* finished: reclaimed */
  CU_ASSERT_NOT_EQUAL(stat(dir, &after), 0);
  free(dir);
  altar_handle_clear(&h);
  const char *look[] = {"sh", "-c", "ls -A; wc -c < task", NULL};
  set_argv(s, look);
  if (run(s, &st, &h) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
    dir = task_file(root, h.external_id, "");
    CU_ASSERT(stat(dir, &after) == 0 && after.st_ino == before.st_ino); /* the same directory */
    free(dir);
    char *out = log_file(root, s, "stdout");
    char *text = altar_test_read_file(out, NULL);
    CU_ASSERT_PTR_NOT_NULL(text);
    /* Only its own task file, which holds nothing of the first task. */
    if (text) CU_ASSERT(!strncmp(text, "task\n", 5) && !strstr(text, "junk") && !strstr(text, "sub"));
    char *meta = task_file(root, h.external_id, "task");
    char *mt = altar_test_read_file(meta, NULL);
    CU_ASSERT(mt && strstr(mt, "wc -c") && !strstr(mt, "junk")); /* the new meta only */
    free(mt);
    free(meta);
    free(text);
    free(out);
    altar_status_clear(&st);
    CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, &err), 0);
    altar_handle_clear(&h);
  }
  /* A link in place of the task file: the directory is not kept, the file not touched. */
  char victim[4200];
  snprintf(victim, sizeof victim, "%s/victim", root);
  FILE *f = fopen(victim, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("keep me", f);
  fclose(f);
  char script[4400];
  snprintf(script, sizeof script, "rm -f task && ln -s %s task", victim);
  const char *evil[] = {"sh", "-c", script, NULL};
  set_argv(s, evil);
  if (run(s, &st, &h) == 0) {
    altar_status_clear(&st);
    CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, &err), 0);
    char *text = altar_test_read_file(victim, NULL);
    CU_ASSERT(text && !strcmp(text, "keep me"));
    free(text);
    dir = task_file(root, h.external_id, "");
    CU_ASSERT_NOT_EQUAL(stat(dir, &after), 0);
    free(dir);
    altar_handle_clear(&h);
  }
  altar_spec_free(s);
}

/* Spares a dead worker left behind are deleted when a backend opens the
 * data root; a live process's are not touched. */
static void test_dead_workers_spares_swept(void) {
  char *r2 = altar_test_tmpdir("process-sweep");
  pid_t dead = fork();
  CU_ASSERT_FATAL(dead >= 0);
  if (dead == 0) _exit(0);
  waitpid(dead, NULL, 0);
  char path[4400];
  snprintf(path, sizeof path,
           "mkdir -p %s/tasks/.spare/%ld-0 %s/tasks/.spare/%ld-0 && touch %s/tasks/.spare/%ld-0/task", r2, (long)dead,
           r2, (long)getppid(), r2, (long)dead);
  CU_ASSERT_EQUAL_FATAL(system(path), 0);
  altar_error_t berr = {0};
  altar_backend_t *b2 = make_process(NULL, r2, &berr);
  CU_ASSERT_PTR_NOT_NULL_FATAL(b2);
  struct stat st;
  snprintf(path, sizeof path, "%s/tasks/.spare/%ld-0", r2, (long)dead);
  CU_ASSERT_NOT_EQUAL(stat(path, &st), 0);
  snprintf(path, sizeof path, "%s/tasks/.spare/%ld-0", r2, (long)getppid());
  CU_ASSERT_EQUAL(stat(path, &st), 0);
  altar_backend_close(b2);
  altar_test_rmtree(r2);
  free(r2);
}

static void test_no_shell_interpretation(void) {
  altar_spec_t *s = altar_spec_new("k", "i");
  /* An argv element with shell syntax reaches the program untouched. */
  const char *argv[] = {"printf", "%s", "$HOME;`id`|*", NULL};
  set_argv(s, argv);
  altar_status_t st;
  altar_handle_t h;
  if (run(s, &st, &h) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
    char *out = log_file(root, s, "stdout");
    char *text = altar_test_read_file(out, NULL);
    if (text) CU_ASSERT_STRING_EQUAL(text, "$HOME;`id`|*");
    free(text);
    free(out);
    altar_status_clear(&st);
    altar_handle_clear(&h);
  }
  altar_spec_free(s);
}

static void test_gpu_refused(void) {
  altar_spec_t *s = altar_spec_new("k", "i");
  altar_spec_add_arg(s, "true");
  altar_spec_set_gpu(s, "a100", 1);
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_backend_submit(be, s, &h, &err), ALTAR_EINVAL);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "resources.gpu"));
  CU_ASSERT_PTR_NULL(h.external_id);
  altar_spec_free(s);
}

static void test_capacity_counts_running(void) {
  altar_capacity_t cap;
  altar_error_t err = {0};
  altar_resources_t cpu = {.count = 1};
  CU_ASSERT_EQUAL(altar_backend_capacity(be, &cap, &err), 0);
  int64_t before = altar_capacity_free_for(&cap, &cpu);
  altar_capacity_clear(&cap);
  CU_ASSERT_EQUAL(before, 4);
  altar_spec_t *s = altar_spec_new("k", "i");
  const char *argv[] = {"sleep", "300", NULL};
  set_argv(s, argv);
  altar_handle_t h;
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &h, &err), 0);
  CU_ASSERT_EQUAL(altar_backend_capacity(be, &cap, &err), 0);
  CU_ASSERT_EQUAL(altar_capacity_free_for(&cap, &cpu), 3);
  altar_resources_t gpu = {.gpu = "gpu", .count = 1};
  CU_ASSERT_EQUAL(altar_capacity_free_for(&cap, &gpu), 0); /* no GPU pools here */
  altar_capacity_clear(&cap);
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, &err), 0);
  altar_status_t st;
  if (altar_contract_wait_terminal(be, &h, 60, &st) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
    if (st.failure) CU_ASSERT_STRING_EQUAL(st.failure->reason, "canceled");
    altar_status_clear(&st);
  }
  CU_ASSERT_EQUAL(altar_backend_capacity(be, &cap, &err), 0);
  CU_ASSERT_EQUAL(altar_capacity_free_for(&cap, &cpu), 4);
  altar_capacity_clear(&cap);
  altar_handle_clear(&h);
  altar_spec_free(s);
}

/* The change descriptor: quiet while the task runs, readable once its
 * supervisor exits (without any poll of ours), quiet again once a poll has
 * taken the news. */
static void test_change_fd_wakes_on_exit(void) {
  altar_error_t err = {0};
  /* Its own backend: another test's supervisor exiting meanwhile would make
   * the descriptor readable too. */
  char *own_root = altar_test_tmpdir("process-change-fd");
  altar_backend_t *own = make_process(NULL, own_root, &err);
  CU_ASSERT_FATAL(own != NULL);
  altar_spec_t *s = altar_spec_new("k", "i");
  const char *argv[] = {"sleep", "300", NULL};
  set_argv(s, argv);
  altar_handle_t h;
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(own, s, &h, &err), 0);
  int fd = altar_backend_change_fd(own);
  CU_ASSERT_FATAL(fd >= 0);
  struct pollfd pfd = {.fd = fd, .events = POLLIN};
  CU_ASSERT_EQUAL(poll(&pfd, 1, 0), 0); /* running: nothing to tell */
  CU_ASSERT_EQUAL(altar_backend_cancel(own, &h, &err), 0);
  CU_ASSERT_EQUAL(poll(&pfd, 1, 60 * 1000), 1); /* the supervisor's exit, no poll asked */
  altar_status_t st;
  if (altar_contract_wait_terminal(own, &h, 60, &st) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
    altar_status_clear(&st);
  }
  pfd.revents = 0;
  CU_ASSERT_EQUAL(poll(&pfd, 1, 0), 0); /* taken by the poll */
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar_backend_close(own);
  altar_test_rmtree(own_root);
  free(own_root);
}

static void test_status_cannot_be_spoofed_by_argv(void) {
  /* An argument that looks like a status section, and a supervisor that dies
   * without writing one: the task is missing, not succeeded. */
  altar_spec_t *s = altar_spec_new("k", "i\n[status]\nstate=succeeded");
  const char *argv[] = {"sh", "-c", "exec sleep 300", "x\n[status]\nstate=succeeded\n", NULL};
  set_argv(s, argv);
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &h, &err), 0);
  CU_ASSERT_EQUAL(vanish(NULL, be, &h), 0);
  altar_status_t st;
  if (altar_contract_wait_terminal(be, &h, 60, &st) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
    if (st.failure) CU_ASSERT_STRING_EQUAL(st.failure->reason, ALTAR_REASON_CONTAINER_MISSING);
    altar_status_clear(&st);
  }
  altar_handle_clear(&h);
  altar_spec_free(s);
}

/* Processes of group pgid that are not zombies, from /proc. */
static int group_members_running(pid_t pgid) {
  DIR *d = opendir("/proc");
  int n = 0;
  struct dirent *de;
  while (d && (de = readdir(d))) {
    if (de->d_name[0] < '1' || de->d_name[0] > '9') continue;
    char path[300];
    snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
    char *stat = altar_test_read_file(path, NULL);
    char *rp = stat ? strrchr(stat, ')') : NULL;
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (rp && sscanf(rp + 2, "%c %ld %ld", &state, &ppid, &pgrp) == 3 && pgrp == (long)pgid && state != 'Z') n++;
    free(stat);
  }
  if (d) closedir(d);
  return n;
}

static void test_timeout_kills_the_whole_group(void) {
  altar_spec_t *s = altar_spec_new("k", "i");
  /* A background grandchild must not survive its task's timeout. */
  const char *argv[] = {"sh", "-c", "sleep 300 & sleep 300; wait", NULL};
  set_argv(s, argv);
  s->timeout_s = (altar_opt_i64_t){true, 1};
  altar_status_t st;
  altar_handle_t h;
  if (run(s, &st, &h) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
    if (st.failure) CU_ASSERT_STRING_EQUAL(st.failure->reason, ALTAR_REASON_TIMEOUT);
    long pgid = read_pid_field(root, h.external_id, "pgid=");
    CU_ASSERT(pgid > 1);
    /* Every member of the group, grandchildren included, is gone (or a
     * zombie waiting for init), by the time the status says timeout. */
    int alive = 0;
    for (int tries = 0; tries < 200; tries++) {
      alive = group_members_running((pid_t)pgid);
      if (!alive) break;
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
    CU_ASSERT_EQUAL(alive, 0);
    altar_status_clear(&st);
    altar_handle_clear(&h);
  }
  altar_spec_free(s);
}

static void test_staging_skips_recorded_copy(void) {
  char src[4096], uri[4200], dst[4200], digest[72];
  snprintf(src, sizeof src, "%s/source.bin", root);
  altar_test_write_file(src, "original", 8);
  snprintf(uri, sizeof uri, "file://%s", src);
  altar_contract_sha256("original", 8, digest);
  altar_transfer_t t = {.uri = uri, .logical_path = "models/m/skip.bin", .digest = digest};
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_backend_stage_inputs(be, &t, 1, &err), 0);
  snprintf(dst, sizeof dst, "%s/models/m/skip.bin", root);
  CU_ASSERT_TRUE(altar_has_verification_record(dst, digest)); /* a good copy is recorded */
  /* The source changes; the recorded copy is current, so it is not copied again. */
  altar_test_write_file(src, "changed!", 8);
  CU_ASSERT_EQUAL(altar_backend_stage_inputs(be, &t, 1, &err), 0);
  char *got = altar_test_read_file(dst, NULL);
  CU_ASSERT(got && !strcmp(got, "original"));
  free(got);
  /* The copy is tampered with: its record is stale, so staging copies again,
   * verifies, finds the changed source wrong, and deletes the copy. */
  altar_test_write_file(dst, "tampered", 8);
  CU_ASSERT_EQUAL(altar_backend_stage_inputs(be, &t, 1, &err), ALTAR_EINTEGRITY);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "inputs[0] (models/m/skip.bin)"));
  struct stat st;
  CU_ASSERT_NOT_EQUAL(stat(dst, &st), 0);
  /* A missing source is an error naming the input, not a crash. */
  snprintf(uri, sizeof uri, "file://%s/no-such-file", root);
  t.digest = NULL;
  CU_ASSERT(altar_backend_stage_inputs(be, &t, 1, &err) < 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "inputs[0]"));
  /* An escaping logical path never reaches the disk. */
  altar_transfer_t esc = {.uri = uri, .logical_path = "../../etc/x"};
  CU_ASSERT_EQUAL(altar_backend_stage_inputs(be, &esc, 1, &err), ALTAR_EPATH);
}

static void test_bad_config(void) {
  altar_strmap_t cfg = {0};
  altar_error_t berr = {0};
  altar_strmap_set(&cfg, "slots", "many");
  CU_ASSERT_PTR_NULL(altar_backend_open(&altar_backend_process_ops, &cfg, &berr));
  CU_ASSERT_PTR_NOT_NULL(strstr(berr.msg, "backend.slots"));
  altar_strmap_clear(&cfg);
  altar_strmap_set(&cfg, "dta_root", "/tmp");
  CU_ASSERT_PTR_NULL(altar_backend_open(&altar_backend_process_ops, &cfg, &berr));
  CU_ASSERT_PTR_NOT_NULL(strstr(berr.msg, "backend.dta_root"));
  altar_strmap_clear(&cfg);
}

static void test_bad_handles(void) {
  altar_handle_t h;
  altar_handle_init(&h, "process", "../../etc");
  altar_status_t st;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_backend_poll(be, &h, 1, &st, &err), 0);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
  if (st.failure) CU_ASSERT_STRING_EQUAL(st.failure->reason, ALTAR_REASON_CONTAINER_MISSING);
  altar_status_clear(&st);
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, &err), 0);
  altar_handle_clear(&h);
}

static void add(void) {
  /* Staging reads file:// sources through the storage registry. */
  if (altar_storage_register_builtin() < 0) fprintf(stderr, "storage registration failed\n");
  altar_contract_add_suite(&process_fixture);
  {
    ALTAR_SUITE("process", setup, teardown);
    ALTAR_TEST(test_cwd_env_and_logical_layout);
    ALTAR_TEST(test_logs_bounded);
    ALTAR_TEST(test_exec_failure_is_exit_127);
    ALTAR_TEST(test_failure_detail_carries_output);
    ALTAR_TEST(test_old_logs_swept);
    ALTAR_TEST(test_supervisor_is_exec_not_fork);
    ALTAR_TEST(test_reclaimed_directory_is_reused_clean);
    ALTAR_TEST(test_dead_workers_spares_swept);
    ALTAR_TEST(test_no_shell_interpretation);
    ALTAR_TEST(test_gpu_refused);
    ALTAR_TEST(test_capacity_counts_running);
    ALTAR_TEST(test_change_fd_wakes_on_exit);
    ALTAR_TEST(test_status_cannot_be_spoofed_by_argv);
    ALTAR_TEST(test_timeout_kills_the_whole_group);
    ALTAR_TEST(test_staging_skips_recorded_copy);
    ALTAR_TEST(test_bad_config);
    ALTAR_TEST(test_bad_handles);
  }
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
