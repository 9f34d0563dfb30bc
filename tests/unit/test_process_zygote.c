/* `process`: the long-lived parent that forks the supervisors
 * (backends/process_zygote.c). It keeps a supervisor for one task after
 * another, each in its own environment and directory, and lets one killed
 * while idle go. Killed mid-run, the tasks it started finish and are
 * recorded, and the next task runs under a new parent; stopped
 * (hung), before or after it handed the task over, the submit is settled
 * by the task file's lock and the task runs exactly once; with its starter
 * dead it leaves, and its tasks go on; it keeps no descriptor of the
 * worker's;
 * `supervisor_start: exec` starts no parent; and the parent itself answers
 * malformed requests with an error and goes on serving. */
#include "altar/codec.h"
#include "altar/plugin/backend.h"
#include "backends/process_zygote.h"
#include "backend_contract.h"
#include "testutil.h"
#include "core/unconst.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static altar_backend_t *open_backend(const char *root, const char *start) {
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "data_root", root);
  altar_strmap_set(&cfg, "slots", "4");
  if (start) altar_strmap_set(&cfg, "supervisor_start", start);
  altar_error_t berr = {0};
  altar_backend_t *be = altar_backend_open(&altar_backend_process_ops, &cfg, &berr);
  if (!be) fprintf(stderr, "open: %s\n", berr.msg);
  altar_strmap_clear(&cfg);
  return be;
}

static altar_spec_t *sh_spec(const char *script) {
  altar_spec_t *s = altar_spec_new("zygote", "img");
  altar_spec_add_arg(s, "sh");
  altar_spec_add_arg(s, "-c");
  altar_spec_add_arg(s, script);
  altar_spec_set_label(s, "job_id", "j-zygote");
  return s;
}

/* A field of /proc/<pid>/status ("PPid", "State") as text; "" when gone. */
static void proc_field(pid_t pid, const char *name, char *out, size_t size) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
  out[0] = '\0';
  char *text = altar_test_read_file(path, NULL);
  if (!text) return;
  size_t nl = strlen(name);
  for (char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
    if (!strncmp(line, name, nl) && line[nl] == ':') {
      line += nl + 1;
      while (*line == ' ' || *line == '\t') line++;
      snprintf(out, size, "%.*s", (int)strcspn(line, "\n"), line);
      break;
    }
  free(text);
}

/* Our children named altar-zygote (at most 8) into pids; their count. */
static size_t zygotes(pid_t *pids) {
  size_t n = 0;
  DIR *d = opendir("/proc");
  struct dirent *de;
  while (d && (de = readdir(d)) && n < 8) {
    char *end;
    long pid = strtol(de->d_name, &end, 10);
    if (pid <= 0 || *end) continue;
    char name[64], ppid[32], state[32];
    proc_field((pid_t)pid, "Name", name, sizeof name);
    proc_field((pid_t)pid, "PPid", ppid, sizeof ppid);
    proc_field((pid_t)pid, "State", state, sizeof state);
    if (!strcmp(name, "altar-zygote") && atol(ppid) == (long)getpid() && state[0] != 'Z') pids[n++] = (pid_t)pid;
  }
  if (d) closedir(d);
  return n;
}

/* The supervisor's pid its task file names ("supervisor=<pid>"), waiting
 * for the line (the supervisor writes it once the command is started). */
static pid_t supervisor_of(const char *root, const char *id) {
  char path[4200];
  snprintf(path, sizeof path, "%s/tasks/%s/task", root, id);
  for (int i = 0; i < 6000; i++) {
    char *text = altar_test_read_file(path, NULL);
    char *at = text ? strstr(text, "\nsupervisor=") : NULL;
    pid_t pid = at ? (pid_t)atol(at + 12) : 0;
    free(text);
    if (pid > 0) return pid;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

static void expect_succeeded(altar_backend_t *be, const altar_handle_t *h) {
  altar_status_t st;
  if (altar_contract_wait_terminal(be, h, 120, &st) == 0) {
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
    if (st.failure)
      fprintf(stderr, "failed: %s: %s\n", st.failure->reason, st.failure->detail ? st.failure->detail : "");
    altar_status_clear(&st);
  }
}

static void expect_output(const char *root, const altar_spec_t *s, const char *want) {
  char key[ALTAR_TASK_KEY_LEN + 1], path[4200];
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_spec_identity(s, key, &err), 0);
  snprintf(path, sizeof path, "%s/logs/%s/stdout", root, key);
  char *text = altar_test_read_file(path, NULL);
  CU_ASSERT(text && !strcmp(text, want));
  free(text);
}

/* The parent killed while its tasks run: they finish and are recorded,
 * and the next submit starts a new parent that runs the next task. */
static void test_parent_killed_mid_run(void) {
  char *root = altar_test_tmpdir("zygote-kill");
  altar_backend_t *be = open_backend(root, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_spec_t *s[3] = {sh_spec("sleep 1; echo one"), sh_spec("sleep 1; echo two"), sh_spec("echo three")};
  altar_handle_t h[3];
  altar_error_t err = {0};
  for (int i = 0; i < 2; i++) CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s[i], &h[i], &err), 0);
  pid_t z[8];
  CU_ASSERT_EQUAL_FATAL(zygotes(z), 1);
  pid_t first = z[0];
  /* Each supervisor is the parent's child, not ours. */
  for (int i = 0; i < 2; i++) {
    pid_t sup = supervisor_of(root, h[i].external_id);
    char ppid[32];
    proc_field(sup, "PPid", ppid, sizeof ppid);
    CU_ASSERT_EQUAL(atol(ppid), (long)first);
  }
  CU_ASSERT_EQUAL(kill(first, SIGKILL), 0);
  for (int i = 0; i < 2; i++) {
    altar_status_t st;
    CU_ASSERT_EQUAL(altar_backend_poll(be, &h[i], 1, &st, &err), 0);
    CU_ASSERT_EQUAL(st.state, ALTAR_STATE_RUNNING); /* the kill did not reach them */
    altar_status_clear(&st);
  }
  for (int i = 0; i < 2; i++) expect_succeeded(be, &h[i]);
  expect_output(root, s[0], "one\n");
  expect_output(root, s[1], "two\n");
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s[2], &h[2], &err), 0);
  expect_succeeded(be, &h[2]);
  expect_output(root, s[2], "three\n");
  CU_ASSERT_EQUAL(zygotes(z), 1);
  CU_ASSERT_NOT_EQUAL(z[0], first);
  /* Our first parent was reaped at the restart: no zombie of it left. */
  char state[32];
  proc_field(first, "State", state, sizeof state);
  CU_ASSERT_EQUAL(state[0], '\0');
  for (int i = 0; i < 3; i++) {
    altar_handle_clear(&h[i]);
    altar_spec_free(s[i]);
  }
  altar_backend_close(be);
  /* Closing the backend ends its parent (and reaps it). */
  CU_ASSERT_EQUAL(zygotes(z), 0);
  altar_test_rmtree(root);
  free(root);
}

/* Entries of directory path not starting with a dot. */
static size_t entries(const char *path) {
  DIR *d = opendir(path);
  size_t n = 0;
  struct dirent *de;
  while (d && (de = readdir(d)))
    if (de->d_name[0] != '.') n++;
  if (d) closedir(d);
  return n;
}

/* How many descriptors pid has open. */
static size_t open_fds(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld/fd", (long)pid);
  return entries(path);
}

/* The task that appends "run" to <root>/runs ran exactly once. */
static void expect_ran_once(const char *root) {
  char path[4200];
  snprintf(path, sizeof path, "%s/runs", root);
  char *runs = altar_test_read_file(path, NULL);
  CU_ASSERT(runs && !strcmp(runs, "run\n"));
  free(runs);
}

/* A supervisor named altar-supervise whose parent is zygote: alive (not a
 * zombie). */
static bool kept_alive(pid_t sup, pid_t zygote) {
  char name[64], ppid[32], state[32];
  proc_field(sup, "Name", name, sizeof name);
  proc_field(sup, "PPid", ppid, sizeof ppid);
  proc_field(sup, "State", state, sizeof state);
  return !strcmp(name, "altar-supervise") && atol(ppid) == (long)zygote && state[0] && state[0] != 'Z';
}

/* One task after another runs under the same supervisor, each with its own
 * environment and directory; a kept supervisor killed while idle is not
 * handed the next task, which runs under a new one. */
static void test_supervisor_kept_for_next_task(void) {
  char *root = altar_test_tmpdir("zygote-kept");
  altar_backend_t *be = open_backend(root, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_spec_t *s[3] = {sh_spec("echo \"one $ALTAR_TASK_ID $(pwd)\""), sh_spec("echo \"two $ALTAR_TASK_ID $(pwd)\""),
                        sh_spec("echo three")};
  altar_handle_t h[3];
  pid_t sup[3];
  altar_error_t err = {0};
  char real[PATH_MAX];
  CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(root, real)); /* what the task's pwd prints */
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s[i], &h[i], &err), 0);
    sup[i] = supervisor_of(root, h[i].external_id);
    expect_succeeded(be, &h[i]);
    char want[PATH_MAX + 200];
    snprintf(want, sizeof want, "%s %s %s/tasks/%s\n", i ? "two" : "one", h[i].external_id, real, h[i].external_id);
    expect_output(root, s[i], want);
  }
  pid_t z[8];
  CU_ASSERT_EQUAL_FATAL(zygotes(z), 1);
  CU_ASSERT(sup[0] > 0);
  CU_ASSERT_EQUAL(sup[1], sup[0]);
  CU_ASSERT(kept_alive(sup[0], z[0]));
  /* Between tasks it holds stdin, stdout, stderr and its socket to the
   * parent: no lock, pipe or log of a task (it closed them before the end
   * pipe that told us the task ended). */
  CU_ASSERT_EQUAL(open_fds(sup[0]), 4);
  /* Killed while idle: its parent hears of it and starts the next task in
   * another. */
  CU_ASSERT_EQUAL(kill(sup[0], SIGKILL), 0);
  for (int i = 0; i < 6000 && kept_alive(sup[0], z[0]); i++) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s[2], &h[2], &err), 0);
  sup[2] = supervisor_of(root, h[2].external_id);
  expect_succeeded(be, &h[2]);
  expect_output(root, s[2], "three\n");
  CU_ASSERT(sup[2] > 0 && sup[2] != sup[0]);
  for (int i = 0; i < 3; i++) {
    altar_handle_clear(&h[i]);
    altar_spec_free(s[i]);
  }
  altar_backend_close(be);
  /* With its parent gone, the kept supervisor leaves too. */
  char state[32] = "?";
  for (int i = 0; i < 6000 && state[0] && state[0] != 'Z'; i++) {
    proc_field(sup[2], "State", state, sizeof state);
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  CU_ASSERT(state[0] == '\0' || state[0] == 'Z');
  altar_test_rmtree(root);
  free(root);
}

/* A hung parent (stopped) is given up after ALTAR_PROC_ZYG_REPLY_TIMEOUT_MS;
 * it never took the request, the lock says so, and the task runs once by
 * exec. */
static void test_parent_hung_is_replaced(void) {
  char *root = altar_test_tmpdir("zygote-hung");
  altar_backend_t *be = open_backend(root, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_spec_t *a = sh_spec("echo a"), *b = sh_spec("echo run >> ../../runs; echo b");
  altar_handle_t ha, hb;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, a, &ha, &err), 0);
  expect_succeeded(be, &ha);
  pid_t z[8];
  CU_ASSERT_EQUAL_FATAL(zygotes(z), 1);
  CU_ASSERT_EQUAL(kill(z[0], SIGSTOP), 0);
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, b, &hb, &err), 0);
  expect_succeeded(be, &hb);
  expect_output(root, b, "b\n");
  expect_ran_once(root);
  char state[32];
  proc_field(z[0], "State", state, sizeof state);
  CU_ASSERT_EQUAL(state[0], '\0'); /* killed and reaped */
  altar_handle_clear(&ha);
  altar_handle_clear(&hb);
  altar_spec_free(a);
  altar_spec_free(b);
  altar_backend_close(be);
  altar_test_rmtree(root);
  free(root);
}

/* A parent that hangs after handing a task over (ALTAR_TEST_ZYGOTE_MUTE: it
 * sends no answer) is given up after ALTAR_PROC_ZYG_REPLY_TIMEOUT_MS; the
 * task ran to its end meanwhile, which leaves the lock free: the task file
 * says a supervisor started it, so it is not started again, and poll reads
 * its status. */
static void test_parent_hung_after_handover(void) {
  char *root = altar_test_tmpdir("zygote-mute");
  altar_backend_t *be = open_backend(root, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_spec_t *s = sh_spec("echo run >> ../../runs; echo muted");
  altar_handle_t h;
  altar_error_t err = {0};
  /* The parent starts at the first submit, with our environment. */
  setenv("ALTAR_TEST_ZYGOTE_MUTE", "1", 1);
  int rc = altar_backend_submit(be, s, &h, &err);
  unsetenv("ALTAR_TEST_ZYGOTE_MUTE");
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  expect_succeeded(be, &h);
  expect_output(root, s, "muted\n");
  expect_ran_once(root);
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar_backend_close(be);
  altar_test_rmtree(root);
  free(root);
}

/* The worker killed: its parent leaves (the end of its socket), and the
 * task it started goes on and is adopted by task key. */
static void test_parent_leaves_with_its_worker(void) {
  char *root = altar_test_tmpdir("zygote-worker");
  char path[4200];
  snprintf(path, sizeof path, "%s/zygote.pid", root);
  altar_spec_t *s = sh_spec("sleep 1; echo adopted");
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    altar_backend_t *be = open_backend(root, NULL);
    altar_handle_t h;
    altar_error_t err = {0};
    pid_t z[8];
    if (!be || altar_backend_submit(be, s, &h, &err) < 0 || zygotes(z) != 1) _exit(4);
    char num[32];
    int n = snprintf(num, sizeof num, "%ld", (long)z[0]);
    altar_test_write_file(path, num, (size_t)n);
    raise(SIGKILL);
    _exit(5);
  }
  int wst = 0;
  CU_ASSERT_EQUAL(waitpid(pid, &wst, 0), pid);
  CU_ASSERT_FATAL(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGKILL);
  char *text = altar_test_read_file(path, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  pid_t zpid = (pid_t)atol(text);
  free(text);
  /* It leaves (gone, or a zombie where nobody reaps orphans). */
  char state[32] = "?";
  for (int i = 0; i < 6000 && state[0] && state[0] != 'Z'; i++) {
    proc_field(zpid, "State", state, sizeof state);
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  CU_ASSERT(state[0] == '\0' || state[0] == 'Z');
  /* The task it started is alive: a submit of the same spec adopts it. */
  altar_backend_t *be = open_backend(root, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &h, &err), 0);
  expect_succeeded(be, &h);
  expect_output(root, s, "adopted\n");
  char tasks[4200];
  snprintf(tasks, sizeof tasks, "%s/tasks", root);
  CU_ASSERT_EQUAL(entries(tasks), 1); /* adopted, not run again */
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar_backend_close(be);
  altar_test_rmtree(root);
  free(root);
}

/* A lock the worker holds through a descriptor without close-on-exec is
 * not kept by the parent: once the worker closes it, it is free. */
static void test_parent_keeps_no_worker_descriptor(void) {
  char *root = altar_test_tmpdir("zygote-fds");
  char path[4200];
  snprintf(path, sizeof path, "%s/held.lock", root);
  int fd = open(path, O_RDWR | O_CREAT, 0644); /* inherited across exec */
  CU_ASSERT_FATAL(fd >= 0);
  CU_ASSERT_EQUAL_FATAL(flock(fd, LOCK_EX | LOCK_NB), 0);
  altar_backend_t *be = open_backend(root, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_spec_t *s = sh_spec("echo fds");
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &h, &err), 0);
  expect_succeeded(be, &h);
  pid_t z[8];
  CU_ASSERT_EQUAL(zygotes(z), 1); /* the parent lives on */
  close(fd);
  int again = open(path, O_RDWR | O_CLOEXEC);
  CU_ASSERT_FATAL(again >= 0);
  CU_ASSERT_EQUAL(flock(again, LOCK_EX | LOCK_NB), 0);
  close(again);
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar_backend_close(be);
  altar_test_rmtree(root);
  free(root);
}

/* supervisor_start: exec runs tasks with no parent; a value not known is
 * refused naming the key. */
static void test_exec_mode(void) {
  char *root = altar_test_tmpdir("zygote-exec");
  altar_backend_t *be = open_backend(root, "exec");
  CU_ASSERT_PTR_NOT_NULL_FATAL(be);
  altar_spec_t *s = sh_spec("echo exec");
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &h, &err), 0);
  pid_t z[8];
  CU_ASSERT_EQUAL(zygotes(z), 0);
  expect_succeeded(be, &h);
  expect_output(root, s, "exec\n");
  altar_handle_clear(&h);
  altar_spec_free(s);
  altar_backend_close(be);

  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "data_root", root);
  altar_strmap_set(&cfg, "supervisor_start", "zygote");
  altar_error_t berr = {0};
  CU_ASSERT_PTR_NULL(altar_backend_open(&altar_backend_process_ops, &cfg, &berr));
  CU_ASSERT_PTR_NOT_NULL(strstr(berr.msg, "backend.supervisor_start"));
  altar_strmap_clear(&cfg);
  altar_test_rmtree(root);
  free(root);
}

/* The request and its reply over a socket, the parent run as the program. */
static void ask_raw(int sock, const void *req, size_t len, int fd, altar_proc_zyg_rep_t *prep) {
  struct iovec iov = {.iov_base = ALTAR__UNCONST(req), .iov_len = len};
  union {
    struct cmsghdr h;
    char b[CMSG_SPACE(sizeof(int))];
  } ctl;
  memset(&ctl, 0, sizeof ctl);
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
  if (fd >= 0) {
    m.msg_control = ctl.b;
    m.msg_controllen = sizeof ctl.b;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  CU_ASSERT_EQUAL(sendmsg(sock, &m, 0), (ssize_t)len);
  memset(prep, 0, sizeof *prep);
  CU_ASSERT_EQUAL(recv(sock, prep, sizeof *prep, 0), (ssize_t)sizeof *prep);
}

/* Malformed requests get EINVAL (or EMSGSIZE) and no supervisor; the parent
 * goes on serving, and leaves at the end of its socket. */
static void test_parent_refuses_malformed_requests(void) {
  char bin[4096];
  snprintf(bin, sizeof bin, "%s", altar_test_altar_bin());
  char prog[4200];
  snprintf(prog, sizeof prog, "%s/altar_supervisor", dirname(bin));
  int sv[2];
  CU_ASSERT_EQUAL_FATAL(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    close(sv[0]);
    char num[16];
    snprintf(num, sizeof num, "%d", sv[1]);
    execl(prog, "altar-supervisor", "--zygote", num, (char *)NULL);
    _exit(127);
  }
  close(sv[1]);
  int devnull = open("/dev/null", O_RDWR);
  CU_ASSERT_FATAL(devnull >= 0);
  altar_proc_zyg_rep_t rep;
  altar_proc_zyg_req_t rq = {.magic = ALTAR_PROC_ZYG_MAGIC, .argc = 1, .log_cap = 4096};
  char buf[512];
  /* too short */
  ask_raw(sv[0], "x", 1, devnull, &rep);
  CU_ASSERT(rep.pid == -1 && rep.err == EINVAL);
  /* no lock descriptor */
  memcpy(buf, &rq, sizeof rq);
  memcpy(buf + sizeof rq, "/tmp\0\0/tmp\0true\0", 16);
  ask_raw(sv[0], buf, sizeof rq + 16, -1, &rep);
  CU_ASSERT(rep.pid == -1 && rep.err == EINVAL);
  /* strings missing: argc says 1, none follows */
  ask_raw(sv[0], buf, sizeof rq + 11, devnull, &rep);
  CU_ASSERT(rep.pid == -1 && rep.err == EINVAL);
  /* an unterminated string */
  ask_raw(sv[0], buf, sizeof rq + 15, devnull, &rep);
  CU_ASSERT(rep.pid == -1 && rep.err == EINVAL);
  /* counts past the bytes */
  altar_proc_zyg_req_t big = rq;
  big.argc = 0xffffffffu;
  big.envc = 0xffffffffu;
  memcpy(buf, &big, sizeof big);
  ask_raw(sv[0], buf, sizeof big + 16, devnull, &rep);
  CU_ASSERT(rep.pid == -1 && rep.err == EINVAL);
  /* another layout */
  altar_proc_zyg_req_t old = rq;
  old.magic = 1;
  memcpy(buf, &old, sizeof old);
  ask_raw(sv[0], buf, sizeof old + 16, devnull, &rep);
  CU_ASSERT(rep.pid == -1 && rep.err == EINVAL);
  /* a log_cap out of range */
  altar_proc_zyg_req_t cap = rq;
  cap.log_cap = 1;
  memcpy(buf, &cap, sizeof cap);
  ask_raw(sv[0], buf, sizeof cap + 16, devnull, &rep);
  CU_ASSERT(rep.pid == -1 && rep.err == EINVAL);
  /* larger than any request may be */
  size_t huge_len = ALTAR_PROC_ZYG_MSG_MAX + 16;
  char *huge = calloc(1, huge_len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(huge);
  memcpy(huge, &rq, sizeof rq);
  int snd = (int)huge_len * 2;
  setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &snd, sizeof snd);
  struct iovec iov = {.iov_base = huge, .iov_len = huge_len};
  struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
  if (sendmsg(sv[0], &m, 0) == (ssize_t)huge_len) {
    CU_ASSERT_EQUAL(recv(sv[0], &rep, sizeof rep, 0), (ssize_t)sizeof rep);
    CU_ASSERT(rep.pid == -1 && rep.err == EMSGSIZE);
  }
  free(huge);
  /* Still serving: the end of the socket ends it, with status 0. */
  close(sv[0]);
  close(devnull);
  int wst = 0;
  CU_ASSERT_EQUAL(waitpid(pid, &wst, 0), pid);
  CU_ASSERT(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
}

static void add(void) {
  ALTAR_SUITE("process_zygote", NULL, NULL);
  ALTAR_TEST(test_parent_killed_mid_run);
  ALTAR_TEST(test_supervisor_kept_for_next_task);
  ALTAR_TEST(test_parent_hung_is_replaced);
  ALTAR_TEST(test_parent_hung_after_handover);
  ALTAR_TEST(test_parent_leaves_with_its_worker);
  ALTAR_TEST(test_parent_keeps_no_worker_descriptor);
  ALTAR_TEST(test_exec_mode);
  ALTAR_TEST(test_parent_refuses_malformed_requests);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
