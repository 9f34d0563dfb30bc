/* `process`: a task outlives the process that started it. A child process
 * submits tasks and is killed with SIGKILL; a new backend over the same data
 * root polls the handles, finds the tasks and their exit statuses, counts the
 * running one in its capacity and can cancel it. Also: a task whose directory
 * is removed, and the memory watchdog used where no cgroup can be made. */
#include "altar/plugin/backend.h"
#include "altar/codec.h"
#include "backend_contract.h"
#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static altar_backend_t *open_backend(const char *root, const char *memory) {
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "data_root", root);
  altar_strmap_set(&cfg, "slots", "4");
  if (memory) altar_strmap_set(&cfg, "memory", memory);
  altar_error_t berr = {0};
  altar_backend_t *be = altar_backend_open(&altar_backend_process_ops, &cfg, &berr);
  if (!be) fprintf(stderr, "open: %s\n", berr.msg);
  altar_strmap_clear(&cfg);
  return be;
}

static altar_spec_t *sh_spec(const char *script) {
  altar_spec_t *s = altar_spec_new("adopt", "img");
  altar_spec_add_arg(s, "sh");
  altar_spec_add_arg(s, "-c");
  altar_spec_add_arg(s, script);
  altar_spec_set_label(s, "job_id", "j-adopt");
  return s;
}

/* In a child: submit each script, write "<id>\n" per task to ids_path, then
 * die by SIGKILL, so nothing of ours runs at exit. */
static void starter(const char *root, const char *ids_path, const char *const *scripts, size_t n) {
  altar_backend_t *be = open_backend(root, NULL);
  if (!be) _exit(3);
  FILE *f = fopen(ids_path, "w");
  if (!f) _exit(3);
  for (size_t i = 0; i < n; i++) {
    altar_spec_t *s = sh_spec(scripts[i]);
    altar_handle_t h;
    altar_error_t err = {0};
    if (altar_backend_submit(be, s, &h, &err) < 0) _exit(4);
    fprintf(f, "%s\n", h.external_id);
  }
  fclose(f);
  raise(SIGKILL);
  _exit(5);
}

static void test_new_process_adopts_tasks(void) {
  char *root = altar_test_tmpdir("adopt");
  char ids_path[4096];
  snprintf(ids_path, sizeof ids_path, "%s/ids", root);
  /* The first two finish after their starter is dead; the third keeps running. */
  const char *const scripts[] = {"sleep 1; exit 7", "sleep 1; echo done > out.txt", "exec sleep 300"};
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) starter(root, ids_path, scripts, 3);
  int wst = 0;
  CU_ASSERT_EQUAL(waitpid(pid, &wst, 0), pid);
  CU_ASSERT_TRUE(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL);

  char *ids = altar_test_read_file(ids_path, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
  altar_handle_t h[3];
  char *save = NULL, *line = strtok_r(ids, "\n", &save);
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_PTR_NOT_NULL_FATAL(line);
    /* A restarted worker knows its tasks from its ledger: backend + id + labels. */
    altar_handle_init(&h[i], "process", line);
    altar_strmap_set(&h[i].labels, "job_id", "j-adopt");
    line = strtok_r(NULL, "\n", &save);
  }
  free(ids);

  altar_backend_t *be = open_backend(root, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_status_t st;
  if (altar_contract_wait_terminal(be, &h[0], 60, &st) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
    CU_ASSERT_PTR_NOT_NULL_FATAL(st.failure);
    CU_ASSERT_STRING_EQUAL(st.failure->reason, "exit_7");
    CU_ASSERT_TRUE(st.failure->exit_code.set && st.failure->exit_code.v == 7);
    CU_ASSERT_STRING_EQUAL(altar_strmap_get(&st.handle.labels, "job_id"), "j-adopt");
    altar_status_clear(&st);
  }
  if (altar_contract_wait_terminal(be, &h[1], 60, &st) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
    char out[4200];
    snprintf(out, sizeof out, "%s/tasks/%s/out.txt", root, h[1].external_id);
    char *text = altar_test_read_file(out, NULL);
    CU_ASSERT(text && !strcmp(text, "done\n"));
    free(text);
    altar_status_clear(&st);
  }
  /* The long one is running; polling adopts it into this backend's slots. */
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_backend_poll(be, &h[2], 1, &st, &err), 0);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_RUNNING);
  altar_status_clear(&st);
  altar_capacity_t cap;
  altar_resources_t cpu = {.count = 1};
  CU_ASSERT_EQUAL(altar_backend_capacity(be, &cap, &err), 0);
  CU_ASSERT_EQUAL(altar_capacity_free_for(&cap, &cpu), 3);
  altar_capacity_clear(&cap);
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &h[2], &err), 0);
  if (altar_contract_wait_terminal(be, &h[2], 60, &st) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
    if (st.failure) CU_ASSERT_STRING_EQUAL(st.failure->reason, "canceled");
    altar_status_clear(&st);
  }
  /* Cancel of a finished task reclaims it; afterwards it is missing. */
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &h[0], &err), 0);
  CU_ASSERT_EQUAL(altar_backend_poll(be, &h[0], 1, &st, &err), 0);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
  if (st.failure) CU_ASSERT_STRING_EQUAL(st.failure->reason, ALTAR_REASON_CONTAINER_MISSING);
  altar_status_clear(&st);
  for (int i = 0; i < 3; i++) altar_handle_clear(&h[i]);
  altar_backend_close(be);
  altar_test_rmtree(root);
  free(root);
}

/* Submit adopts by task key: a spec whose run is alive under this data
 * root (started by a worker since killed) gets that run's handle, not a
 * second run; a finished run is run anew; reclaiming a task removes its
 * key link. */
static void test_submit_adopts_live_run_by_task_key(void) {
  char *root = altar_test_tmpdir("adopt-key");
  char ids_path[4096];
  snprintf(ids_path, sizeof ids_path, "%s/ids", root);
  const char *const scripts[] = {"exec sleep 300", "exit 0"};
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) starter(root, ids_path, scripts, 2);
  int wst = 0;
  CU_ASSERT_EQUAL(waitpid(pid, &wst, 0), pid);
  char *ids = altar_test_read_file(ids_path, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
  char first[2][80] = {{0}};
  char *save = NULL, *line = strtok_r(ids, "\n", &save);
  for (int i = 0; i < 2 && line; i++, line = strtok_r(NULL, "\n", &save))
    snprintf(first[i], sizeof first[i], "%s", line);
  free(ids);

  altar_backend_t *be = open_backend(root, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_handle_t done_h;
  altar_handle_init(&done_h, "process", first[1]);
  altar_status_t st;
  if (altar_contract_wait_terminal(be, &done_h, 60, &st) == 0) altar_status_clear(&st);

  altar_error_t err = {0};
  altar_spec_t *live = sh_spec(scripts[0]), *fin = sh_spec(scripts[1]);
  altar_handle_t a, b, c;
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, live, &a, &err), 0);
  CU_ASSERT_STRING_EQUAL(a.external_id, first[0]); /* adopted */
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, fin, &b, &err), 0);
  CU_ASSERT_STRING_NOT_EQUAL(b.external_id, first[1]); /* finished: run anew */
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, live, &c, &err), 0);
  CU_ASSERT_STRING_EQUAL(c.external_id, first[0]); /* still the one run */
  altar_handle_clear(&c);
  /* Cancelled, it is finished: the next submit starts a new run. */
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &a, &err), 0);
  if (altar_contract_wait_terminal(be, &a, 60, &st) == 0) altar_status_clear(&st);
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, live, &c, &err), 0);
  CU_ASSERT_STRING_NOT_EQUAL(c.external_id, first[0]);
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &c, &err), 0);
  if (altar_contract_wait_terminal(be, &c, 60, &st) == 0) altar_status_clear(&st);
  /* Reclaiming the finished run removes its key link. */
  char key[ALTAR_TASK_KEY_LEN + 1], link[4300];
  CU_ASSERT_EQUAL_FATAL(altar_spec_identity(live, key, &err), 0);
  snprintf(link, sizeof link, "%s/keys/%s", root, key);
  struct stat sb;
  CU_ASSERT_EQUAL(lstat(link, &sb), 0);
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &c, &err), 0); /* finished: reclaimed */
  CU_ASSERT_NOT_EQUAL(lstat(link, &sb), 0);
  altar_handle_clear(&a);
  altar_handle_clear(&b);
  altar_handle_clear(&c);
  altar_handle_clear(&done_h);
  altar_spec_free(live);
  altar_spec_free(fin);
  altar_backend_close(be);
  altar_test_rmtree(root);
  free(root);
}

static void test_removed_task_dir_is_missing(void) {
  char *root = altar_test_tmpdir("adopt-rm");
  altar_backend_t *be = open_backend(root, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_spec_t *s = sh_spec("exec sleep 300");
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &h, &err), 0);
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/tasks/%s", root, h.external_id);
  /* Stop it first (so nothing is left running), then remove its directory. */
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, &err), 0);
  altar_status_t st;
  if (altar_contract_wait_terminal(be, &h, 60, &st) == 0) altar_status_clear(&st);
  altar_test_rmtree(dir);
  CU_ASSERT_EQUAL(altar_backend_poll(be, &h, 1, &st, &err), 0);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
  if (st.failure) {
    CU_ASSERT_STRING_EQUAL(st.failure->reason, ALTAR_REASON_CONTAINER_MISSING);
    CU_ASSERT_FALSE(st.failure->deterministic);
  }
  altar_status_clear(&st);
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar_backend_close(be);
  altar_test_rmtree(root);
  free(root);
}

static void test_watchdog_reports_oom(void) {
  char *root = altar_test_tmpdir("adopt-oom");
  altar_backend_t *be = open_backend(root, "watchdog");
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_spec_t *s = altar_spec_new("oom", "img");
  altar_spec_add_arg(s, "perl");
  altar_spec_add_arg(s, "-e");
  altar_spec_add_arg(s, "my @a; while (1) { push @a, 'x' x 1048576 }");
  s->resources.memory_mb = (altar_opt_i64_t){true, 48};
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &h, &err), 0);
  altar_status_t st;
  if (altar_contract_wait_terminal(be, &h, 60, &st) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
    CU_ASSERT_PTR_NOT_NULL_FATAL(st.failure);
    CU_ASSERT_STRING_EQUAL(st.failure->reason, ALTAR_REASON_OOM_KILLED);
    CU_ASSERT(st.failure->detail && strstr(st.failure->detail, "supervisor"));
    CU_ASSERT_FALSE(st.failure->deterministic);
    altar_status_clear(&st);
  }
  /* A task under its limit is untouched by the watchdog. */
  altar_spec_t *ok = sh_spec("echo small");
  ok->resources.memory_mb = (altar_opt_i64_t){true, 48};
  altar_handle_t h2;
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, ok, &h2, &err), 0);
  if (altar_contract_wait_terminal(be, &h2, 60, &st) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
    altar_status_clear(&st);
  }
  altar_handle_clear(&h);
  altar_handle_clear(&h2);
  altar_spec_free(s);
  altar_spec_free(ok);
  altar_backend_close(be);
  altar_test_rmtree(root);
  free(root);
}

static void add(void) {
  ALTAR_SUITE("process_adopt", NULL, NULL);
  ALTAR_TEST(test_new_process_adopts_tasks);
  ALTAR_TEST(test_submit_adopts_live_run_by_task_key);
  ALTAR_TEST(test_removed_task_dir_is_missing);
  ALTAR_TEST(test_watchdog_reports_oom);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
