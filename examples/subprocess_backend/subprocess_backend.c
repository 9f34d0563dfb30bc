/* An altar plug-in built outside altar's tree: the `subprocess` execution
 * backend. It runs a task's command as a plain child process under a small
 * supervisor of its own, so a task outlives the altar that submitted it:
 *
 *   <data_root>/tasks/<id>/pid      the supervisor's pid and start time
 *   <data_root>/tasks/<id>/output   the command's stdout and stderr
 *   <data_root>/tasks/<id>/result   written once, when the task ended:
 *                                   "exit N", "signal N", "timeout", "oom", "cancelled"
 *
 * The command runs in data_root (the mount root, so logical paths work as
 * relative paths). The supervisor enforces timeout_s and memory_mb (resident
 * size, checked every 10 ms) and dies with its command. Inputs are staged and
 * their digests verified before submit ("staging"). No GPU pools.
 *
 * Build: see the Makefile beside this file (pkg-config altar). */
#include <altar/codec.h>
#include <altar/digest.h>
#include <altar/plugin/backend.h>
#include <altar/plugin/host.h>
#include <altar/storage.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

ALTAR_PLUGIN_DECLARE_ABI();

typedef struct subproc {
  char *data_root; /* absolute */
} subproc_t;

static const altar_backend_ops_t subprocess_ops;

/* ---- lifecycle ---------------------------------------------------------- */

static int mkdirs(const char *path) {
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) return -1;
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(tmp, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

static int sp_open(altar_backend_t *be, const altar_strmap_t *cfg, altar_error_t *err) {
  const char *root = "./var/data";
  for (size_t i = 0; cfg && i < cfg->n; i++) {
    if (!strcmp(cfg->keys[i], "data_root")) {
      root = cfg->vals[i];
    } else {
      return altar_error_set(err, ALTAR_ECONFIG, "subprocess: backend.%s: unknown key (known: data_root)",
                             cfg->keys[i]);
    }
  }
  char tasks[PATH_MAX], real[PATH_MAX];
  if (snprintf(tasks, sizeof tasks, "%s/tasks", root) >= (int)sizeof tasks || mkdirs(tasks) < 0 ||
      !realpath(root, real)) {
    return altar_error_set(err, ALTAR_ECONFIG, "subprocess: backend.data_root '%s': %s", root, strerror(errno));
  }
  subproc_t *sp = calloc(1, sizeof *sp);
  if (!sp || !(sp->data_root = strdup(real))) {
    free(sp);
    return altar_error_set(err, ALTAR_ENOMEM, "subprocess: out of memory");
  }
  altar_backend_set_impl(be, sp);
  return 0;
}

static void sp_close(altar_backend_t *be) {
  subproc_t *sp = altar_backend_impl(be);
  free(sp->data_root);
  free(sp);
}

static const char *sp_mount_root(altar_backend_t *be) { return ((subproc_t *)altar_backend_impl(be))->data_root; }

static int sp_check_resources(altar_backend_t *be, const altar_resources_t *r, altar_error_t *err) {
  (void)be;
  if (r->gpu) return altar_error_set(err, ALTAR_EINVAL, "resources.gpu: subprocess serves no GPU pool ('%s')", r->gpu);
  return 0;
}

/* ---- staging: fetch through altar's storage adapters, verify ------------- */

static int stage_one(altar_backend_t *be, const altar_transfer_t *t, size_t i, altar_error_t *err) {
  char what[160];
  snprintf(what, sizeof what, "inputs[%zu] (%.120s)", i, t->logical_path ? t->logical_path : "");
  if (!t->uri || !t->logical_path)
    return altar_error_set(err, ALTAR_EINVAL, "%s: uri and logical_path are required", what);
  char *dst = NULL;
  int rc = altar_backend_resolve_path(be, t->logical_path, &dst, err);
  if (rc < 0) return altar_error_prefix(err, "%s", what), rc;
  altar_storage_t *s = NULL;
  altar_local_file_t lf = {0};
  altar_buf_t bytes = {0};
  char tmp[PATH_MAX];
  rc = altar_storage_open_for_uri(t->uri, NULL, &s, err);
  if (rc == 0) rc = altar_storage_as_local_file(s, t->uri, &lf, err);
  /* A digest covers one file: a directory source or destination fails as a
   * mismatch does, and is left alone. */
  if (rc == 0 && t->digest && (rc = altar_digest_refuse_directory(lf.path, err)) == 0)
    rc = altar_digest_refuse_directory(dst, err);
  if (rc < 0) {
    altar_error_prefix(err, "%s", what);
    goto out;
  }
  /* Storage and the data root may be one directory: a source that already
   * is the destination is the caller's file. It is checked, never replaced,
   * deleted or given a record. */
  struct stat a, b;
  if (stat(lf.path, &a) == 0 && stat(dst, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
    rc = altar_verify_transfer_digest(t, dst, false, err);
    if (rc < 0) altar_error_prefix(err, "%s", what);
    goto out;
  }
  rc = altar_storage_read_bytes(s, t->uri, &bytes, err);
  if (rc < 0) {
    altar_error_prefix(err, "%s", what);
    goto out;
  }
  char *slash = strrchr(dst, '/');
  *slash = '\0';
  int made = mkdirs(dst);
  *slash = '/';
  snprintf(tmp, sizeof tmp, "%s.staging", dst);
  int fd = made < 0 ? -1 : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0;
  for (size_t off = 0; ok && off < bytes.len;) {
    ssize_t w = write(fd, bytes.data + off, bytes.len - off);
    if (w < 0 && errno == EINTR) continue;
    ok = w > 0;
    if (ok) off += (size_t)w;
  }
  if (fd >= 0 && close(fd) < 0) ok = false;
  if (!ok || rename(tmp, dst) < 0) {
    rc = altar_error_set(err, ALTAR_ESTORAGE, "%s: cannot write '%s': %s", what, dst, strerror(errno));
    unlink(tmp);
    goto out;
  }
  /* The bytes the task will read are the ones checked; a bad copy goes. */
  rc = altar_verify_transfer_digest(t, dst, false, err);
  if (rc < 0) {
    if (rc == ALTAR_EINTEGRITY) unlink(dst);
    altar_error_prefix(err, "%s", what);
  }
out:
  altar_buf_free(&bytes);
  altar_local_file_release(&lf);
  altar_storage_close(s);
  free(dst);
  return rc;
}

static int sp_stage_inputs(altar_backend_t *be, const altar_transfer_t *ts, size_t n, altar_error_t *err) {
  for (size_t i = 0; i < n; i++) {
    int rc = stage_one(be, &ts[i], i, err);
    if (rc < 0) return rc;
  }
  return 0;
}

/* ---- the supervisor: no allocation after the fork (the forking process
 * may have other threads holding malloc's locks) --------------------------- */

static volatile sig_atomic_t cancelled;
static void on_term(int sig) {
  (void)sig;
  cancelled = 1;
}

static void put_result(int dirfd, const char *text) {
  int fd = openat(dirfd, "result.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t w = write(fd, text, strlen(text));
  close(fd);
  if (w == (ssize_t)strlen(text)) renameat(dirfd, "result.tmp", dirfd, "result");
}

/* Resident bytes of pid from /proc/<pid>/statm, or 0. */
static long long rss_bytes(pid_t pid, long page) {
  char path[64], buf[128];
  snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  char *p = strchr(buf, ' ');
  return p ? strtoll(p + 1, NULL, 10) * page : 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

typedef struct launch {
  const char *exe;       /* the command's program, found on PATH */
  char *const *argv;
  const char *cwd;
  int dirfd, outfd;
  long long timeout_s;   /* 0: none */
  long long memory_b;    /* 0: no limit */
  long page;
} launch_t;

static _Noreturn void supervise(const launch_t *l) {
  /* The forking thread's mask and ignored signals are not the task's. */
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  signal(SIGPIPE, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  struct sigaction sa = {.sa_handler = on_term};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  pid_t sup = getpid();
  pid_t cmd = fork();
  if (cmd == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* the command never outlives its supervisor */
    if (getppid() != sup) _exit(127);
    int in = open("/dev/null", O_RDONLY);
    if (in >= 0) dup2(in, 0);
    dup2(l->outfd, 1);
    dup2(l->outfd, 2);
    if (chdir(l->cwd) < 0) _exit(127);
    execve(l->exe, l->argv, environ);
    _exit(127);
  }
  if (cmd < 0) {
    put_result(l->dirfd, "exit 127");
    _exit(0);
  }
  setpgid(cmd, cmd);
  double start = now_s();
  const char *why = NULL;
  for (;;) {
    int st;
    pid_t w = waitpid(cmd, &st, WNOHANG);
    if (w == cmd) {
      char text[32];
      if (why) snprintf(text, sizeof text, "%s", why);
      else if (WIFEXITED(st)) snprintf(text, sizeof text, "exit %d", WEXITSTATUS(st));
      else snprintf(text, sizeof text, "signal %d", WTERMSIG(st));
      put_result(l->dirfd, text);
      _exit(0);
    }
    if (!why) {
      if (cancelled) why = "cancelled";
      else if (l->timeout_s > 0 && now_s() - start >= (double)l->timeout_s) why = "timeout";
      else if (l->memory_b > 0 && rss_bytes(cmd, l->page) > l->memory_b) why = "oom";
      if (why) kill(-cmd, SIGKILL);
    }
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

/* The program argv[0] names, as execvp would find it (looked up before the
 * fork, where allocation is allowed). */
static char *find_program(const char *name) {
  if (strchr(name, '/')) return strdup(name);
  const char *path = getenv("PATH");
  if (!path) path = "/usr/local/bin:/usr/bin:/bin";
  for (const char *p = path; *p;) {
    size_t len = strcspn(p, ":");
    char cand[PATH_MAX];
    if (snprintf(cand, sizeof cand, "%.*s/%s", (int)len, p, name) < (int)sizeof cand &&
        access(cand, X_OK) == 0)
      return strdup(cand);
    p += len;
    if (*p == ':') p++;
  }
  return NULL;
}

/* Start time (clock ticks since boot) of a live, non-zombie pid, or -1. */
static long long start_time(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  char *p = strrchr(buf, ')'); /* the command name may hold spaces */
  if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X') return -1;
  p += 2;
  for (int field = 3; field < 22 && p; field++) p = strchr(p + 1, ' ');
  return p ? strtoll(p + 1, NULL, 10) : -1;
}

static int sp_submit(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *phandle, altar_error_t *err) {
  subproc_t *sp = altar_backend_impl(be);
  if (!spec->n_command) return altar_error_set(err, ALTAR_EINVAL, "command: subprocess needs a command");
  char key[ALTAR_TASK_KEY_LEN + 1];
  int rc = altar_spec_identity(spec, key, err);
  if (rc < 0) return rc;
  /* A directory per submission: resubmitting a spec starts a fresh run. */
  char dir[PATH_MAX];
  if (snprintf(dir, sizeof dir, "%s/tasks/%.16s-XXXXXX", sp->data_root, key) >= (int)sizeof dir)
    return altar_error_set(err, ALTAR_ETOOBIG, "subprocess: data_root too long");
  if (!mkdtemp(dir)) return altar_error_set(err, ALTAR_EBACKEND, "subprocess: %s: %s", dir, strerror(errno));
  const char *id = strrchr(dir, '/') + 1;

  char **argv = calloc(spec->n_command + 1, sizeof *argv);
  char *exe = find_program(spec->command[0]);
  int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int outfd = dirfd < 0 ? -1 : openat(dirfd, "output", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int pipefd[2] = {-1, -1};
  if (!argv || dirfd < 0 || outfd < 0 || pipe2(pipefd, O_CLOEXEC) < 0) {
    rc = altar_error_set(err, ALTAR_EBACKEND, "subprocess: %s: %s", dir, strerror(errno));
    goto out;
  }
  for (size_t i = 0; i < spec->n_command; i++) argv[i] = spec->command[i];
  launch_t l = {
      .exe = exe ? exe : "/nonexistent/program", /* exec fails: exit 127 as a shell says */
      .argv = argv,
      .cwd = sp->data_root,
      .dirfd = dirfd,
      .outfd = outfd,
      .timeout_s = spec->timeout_s.set ? spec->timeout_s.v : 0,
      .memory_b = spec->resources.memory_mb.set ? spec->resources.memory_mb.v * 1024 * 1024 : 0,
      .page = sysconf(_SC_PAGESIZE),
  };
  /* Fork twice: the supervisor is nobody's child here, so it is reaped by
   * init and never left a zombie of ours; it reports its pid on the pipe. */
  pid_t mid = fork();
  if (mid == 0) {
    setsid();
    pid_t sup = fork();
    if (sup == 0) {
      close(pipefd[0]);
      close(pipefd[1]);
      supervise(&l);
    }
    ssize_t w = write(pipefd[1], &sup, sizeof sup);
    _exit(w == sizeof sup && sup > 0 ? 0 : 1);
  }
  close(pipefd[1]);
  pipefd[1] = -1;
  pid_t sup = -1;
  if (mid > 0) {
    while (waitpid(mid, NULL, 0) < 0 && errno == EINTR) {}
    if (read(pipefd[0], &sup, sizeof sup) != sizeof sup) sup = -1;
  }
  if (sup <= 0) {
    rc = altar_error_set(err, ALTAR_EBACKEND, "subprocess: cannot start a supervisor: %s", strerror(errno));
    goto out;
  }
  char pidline[64];
  int n = snprintf(pidline, sizeof pidline, "%d %lld\n", (int)sup, start_time(sup));
  int pfd = openat(dirfd, "pid", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (pfd < 0 || write(pfd, pidline, (size_t)n) != n) {
    kill(sup, SIGTERM);
    rc = altar_error_set(err, ALTAR_EBACKEND, "subprocess: %s/pid: %s", dir, strerror(errno));
  }
  if (pfd >= 0) close(pfd);
  if (rc == 0) rc = altar_handle_init_for_spec(phandle, subprocess_ops.name, id, spec);
out:
  if (pipefd[0] >= 0) close(pipefd[0]);
  if (pipefd[1] >= 0) close(pipefd[1]);
  if (outfd >= 0) close(outfd);
  if (dirfd >= 0) close(dirfd);
  free(exe);
  free(argv);
  return rc;
}

/* ---- poll and cancel: what the task directory says ---------------------- */

/* The directory of an external id we made; NULL for anything else (an id
 * from a log is untrusted: it must not name a path outside tasks/). */
static bool task_dir(const subproc_t *sp, const char *id, char *out, size_t size) {
  size_t len = id ? strlen(id) : 0;
  if (len < 8 || len > 64) return false;
  for (const char *p = id; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-'))
      return false;
  return snprintf(out, size, "%s/tasks/%s", sp->data_root, id) < (int)size;
}

static bool read_small(const char *dir, const char *name, char *buf, size_t size) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, buf, size - 1);
  close(fd);
  if (n < 0) return false;
  buf[n] = '\0';
  return true;
}

/* The supervisor's pid while it lives (same pid and start time), else 0. */
static pid_t live_supervisor(const char *dir) {
  char buf[64];
  int pid = 0;
  long long started = -1;
  if (!read_small(dir, "pid", buf, sizeof buf) || sscanf(buf, "%d %lld", &pid, &started) != 2 || pid <= 1)
    return 0;
  return start_time(pid) == started && started >= 0 ? pid : 0;
}

static altar_failure_t *failure_of(const char *result) {
  int v;
  if (sscanf(result, "exit %d", &v) == 1) return v ? altar_failure_for_exit(v, NULL) : NULL;
  if (sscanf(result, "signal %d", &v) == 1) { /* not by us: as a shell reports it */
    char detail[64];
    snprintf(detail, sizeof detail, "killed by signal %d", v);
    return altar_failure_for_exit(128 + v, detail);
  }
  if (!strncmp(result, "timeout", 7)) return altar_failure_for_reason(ALTAR_REASON_TIMEOUT, NULL);
  if (!strncmp(result, "oom", 3)) return altar_failure_for_reason(ALTAR_REASON_OOM_KILLED, NULL);
  if (!strncmp(result, "cancelled", 9)) return altar_failure_for_reason(ALTAR_REASON_CANCELLED, NULL);
  return altar_failure_for_reason(ALTAR_REASON_JOB_FAILED, "unreadable result");
}

static int status_of(subproc_t *sp, const altar_handle_t *h, altar_status_t *pst) {
  char dir[PATH_MAX], result[64];
  altar_state_t state = ALTAR_STATE_RUNNING;
  altar_failure_t *f = NULL;
  if (!task_dir(sp, h->external_id, dir, sizeof dir)) {
    state = ALTAR_STATE_FAILED;
    f = altar_failure_for_reason(ALTAR_REASON_CONTAINER_MISSING, "not a subprocess task id");
  } else if (read_small(dir, "result", result, sizeof result) ||
             /* ended between the two looks: the result is there now */
             (!live_supervisor(dir) && read_small(dir, "result", result, sizeof result))) {
    f = failure_of(result);
    state = f ? ALTAR_STATE_FAILED : ALTAR_STATE_SUCCEEDED;
  } else if (!live_supervisor(dir)) {
    state = ALTAR_STATE_FAILED;
    f = altar_failure_for_reason(ALTAR_REASON_CONTAINER_MISSING, "the supervisor is gone without a result");
  }
  if (state == ALTAR_STATE_FAILED && !f) return ALTAR_ENOMEM;
  return altar_status_init(pst, h, state, f);
}

static int sp_poll(altar_backend_t *be, const altar_handle_t *hs, size_t n, altar_status_t *psts,
                   altar_error_t *err) {
  for (size_t i = 0; i < n; i++) {
    int rc = status_of(altar_backend_impl(be), &hs[i], &psts[i]);
    if (rc < 0) return altar_error_set(err, rc, "subprocess: poll: out of memory");
  }
  return 0;
}

static int sp_cancel(altar_backend_t *be, const altar_handle_t *h, altar_error_t *err) {
  (void)err;
  char dir[PATH_MAX];
  if (!task_dir(altar_backend_impl(be), h->external_id, dir, sizeof dir)) return 0; /* never ours: gone */
  pid_t sup = live_supervisor(dir);
  if (sup > 0) kill(sup, SIGTERM); /* it kills the command and records "cancelled" */
  return 0;
}

static const altar_backend_ops_t subprocess_ops = {
    .name = "subprocess",
    .caps = ALTAR_BACKEND_CAP_CANCEL, /* declared bit for bit with the operations below */
    .input_digest_verification = ALTAR_VERIFY_STAGING,
    .open = sp_open,
    .close = sp_close,
    .check_resources = sp_check_resources,
    .stage_inputs = sp_stage_inputs,
    .mount_root = sp_mount_root,
    .submit = sp_submit,
    .poll = sp_poll,
    .cancel = sp_cancel,
};

int altar_plugin_init(const altar_plugin_host_t *host, altar_error_t *err) {
  return host->register_backend(host, &subprocess_ops, err);
}
