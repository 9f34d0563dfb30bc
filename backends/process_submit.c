/* `process` submit: make the task directory, take its lock, and start the
 * task's supervisor (process_spawn.c), which starts a session of its own so
 * the task outlives us. Returns once the supervisor exists (accepted). */
#include "process_int.h"

#include "altar/buf.h"
#include "altar/codec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* A fresh id per submit: a time prefix (sortable listings) and 64 random bits. */
static int new_task_id(char out[ALTAR_PROC_ID_MAX + 1]) {
  static unsigned counter;
  unsigned char rnd[8];
  if (getrandom(rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd) {
    /* Entropy not ready: pid, clock and a counter still never repeat here. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t v = ((uint64_t)getpid() << 40) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)++counter << 20);
    memcpy(rnd, &v, sizeof rnd);
  }
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  snprintf(out, ALTAR_PROC_ID_MAX + 1, "%lld-%02x%02x%02x%02x%02x%02x%02x%02x", (long long)now.tv_sec, rnd[0], rnd[1],
           rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
  return 0;
}

/* The environment: ours, with ALTAR_DATA_ROOT / ALTAR_TASK_ID / ALTAR_TASK_DIR
 * replaced. The three new strings sit at the end of the array; free those. */
static char **build_env(const altar_process_t *p, const char *id, const char *task_dir) {
  size_t n = 0;
  while (environ && environ[n]) n++;
  char **env = calloc(n + 4, sizeof *env);
  if (!env) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const char *e = environ[i];
    if (!strncmp(e, "ALTAR_DATA_ROOT=", 16) || !strncmp(e, "ALTAR_TASK_ID=", 14) || !strncmp(e, "ALTAR_TASK_DIR=", 15))
      continue;
    env[k++] = environ[i];
  }
  size_t a = strlen(p->data_root) + 17, b = strlen(id) + 15, c = strlen(task_dir) + 16;
  char *s1 = malloc(a), *s2 = malloc(b), *s3 = malloc(c);
  if (!s1 || !s2 || !s3) {
    free(s1);
    free(s2);
    free(s3);
    free(env);
    return NULL;
  }
  snprintf(s1, a, "ALTAR_DATA_ROOT=%s", p->data_root);
  snprintf(s2, b, "ALTAR_TASK_ID=%s", id);
  snprintf(s3, c, "ALTAR_TASK_DIR=%s", task_dir);
  env[k++] = s1;
  env[k++] = s2;
  env[k++] = s3;
  env[k] = NULL;
  return env;
}

static void free_env(char **env) {
  if (!env) return;
  size_t n = 0;
  while (env[n]) n++;
  for (size_t i = n >= 3 ? n - 3 : 0; i < n; i++) free(env[i]);
  free(env);
}

/* The task file's first part: what ran, for people and for a later worker.
 * One line per field, escaped (\\, \n, \r); argv elements also carry their
 * raw length.
 * Files cost inodes and inodes cost time here, so this shares the lock file. */
/* Appends s with '\\' and newlines escaped, so no line of the meta can pose
 * as the status section that follows it. */
static void append_escaped(altar_buf_t *b, const char *s) {
  for (const char *c = s ? s : ""; *c; c++) {
    if (*c == '\\') altar_buf_append(b, "\\\\", 2);
    else if (*c == '\n') altar_buf_append(b, "\\n", 2);
    else if (*c == '\r') altar_buf_append(b, "\\r", 2);
    else altar_buf_append(b, c, 1);
  }
}

static void write_meta(int fd, const altar_spec_t *spec, const altar_proc_launch_t *l, const char *key,
                       const char *id) {
  altar_buf_t b;
  altar_buf_init(&b);
  char line[128];
  /* first, at a fixed place: reclaiming the task finds its key link by it */
  altar_buf_append_str(&b, "task_key=");
  altar_buf_append_str(&b, key);
  /* second, for a lookup by key through keys/<key> (process_keys.c) */
  altar_buf_append_str(&b, "\ntask_id=");
  altar_buf_append_str(&b, id);
  altar_buf_append_str(&b, "\nimage=");
  append_escaped(&b, spec->image);
  altar_buf_append_str(&b, "\nkind=");
  append_escaped(&b, spec->kind);
  snprintf(line, sizeof line, "\ntimeout_s=%lld\nmemory_mb=%lld\nmemory_enforcement=%s\nargc=%zu\n",
           (long long)l->timeout_s, (long long)l->memory_mb,
           l->memory_mb <= 0  ? "none"
           : l->cgroup_dir[0] ? "cgroup"
                              : "watchdog",
           spec->n_command);
  altar_buf_append_str(&b, line);
  for (size_t i = 0; i < spec->n_command; i++) {
    snprintf(line, sizeof line, "arg %zu=", strlen(spec->command[i]));
    altar_buf_append_str(&b, line);
    append_escaped(&b, spec->command[i]);
    altar_buf_append_str(&b, "\n");
  }
  const char *p = (const char *)b.data;
  size_t n = b.len;
  while (p && n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    p += w;
    n -= (size_t)w;
  }
  altar_buf_free(&b);
}

static void remove_task_dir(const char *task_dir) {
  static const char *const files[] = {"task", "stdout", "stderr", "cancel", NULL};
  char path[ALTAR_PATH_BUF + 16];
  for (size_t i = 0; files[i]; i++) {
    snprintf(path, sizeof path, "%s/%s", task_dir, files[i]);
    unlink(path);
  }
  rmdir(task_dir);
}

/* The task's output goes to logs/<key>/, emptied here of an earlier run's.
 * The supervisor makes the directory at the task's first byte of output: a
 * task that writes nothing costs no directory (an inode each, which for
 * short tasks cost more than the rest of the launch). */
static void set_log_dir(const altar_process_t *p, const char *key, altar_proc_launch_t *l) {
  altar__proc_log_dir(p, key, l->log_dir, sizeof l->log_dir);
  char path[ALTAR_PATH_BUF + 16];
  snprintf(path, sizeof path, "%s/stdout", l->log_dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/stderr", l->log_dir);
  unlink(path);
}

/* Opens and locks a task file; -1 with errno. */
static int lock_task_file(const char *path) {
  int fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
    int e = errno;
    close(fd);
    errno = e;
    fd = -1;
  }
  return fd;
}

int altar__proc_submit(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *ph, altar_error_t *err) {
  altar_process_t *p = altar_backend_impl(be);
  if (!spec->command || spec->n_command == 0 || !spec->command[0] || !spec->command[0][0])
    return altar_error_set(err, ALTAR_EINVAL, "command: must name a program to run");
  int rc = altar_backend_check_resources(be, &spec->resources, err);
  if (rc < 0) return rc;
  if (spec->timeout_s.set && spec->timeout_s.v <= 0)
    return altar_error_set(err, ALTAR_EINVAL, "timeout_s: must be > 0 when set");

  char key[ALTAR_TASK_KEY_LEN + 1];
  if ((rc = altar_spec_identity(spec, key, err)) < 0) return rc;
  char id[ALTAR_PROC_ID_MAX + 1];
  /* A live run of the same task on this data root (a dead worker's, say)
   * is adopted, not started twice. */
  altar__proc_keys_lock(p);
  if (altar__proc_keys_find_live(p, key, id)) {
    rc = altar_handle_init_for_spec(ph, altar_backend_process_ops.name, id, spec);
    if (rc == 0) (void)altar__proc_live_add(p, id);
    altar__proc_keys_unlock(p);
    return rc < 0 ? altar_error_set(err, rc, "process: submit: out of memory") : 0;
  }
  new_task_id(id);
  altar_proc_launch_t *l = calloc(1, sizeof *l);
  if (!l) {
    altar__proc_keys_unlock(p);
    return altar_error_set(err, ALTAR_ENOMEM, "process: submit: out of memory");
  }
  l->lock_fd = -1;
  rc = altar__proc_task_dir(p, id, l->task_dir, sizeof l->task_dir, err);
  if (rc < 0) goto out;
  bool spare = altar__proc_spare_take(p, l->task_dir);
  if (!spare && mkdir(l->task_dir, 0755) < 0) {
    rc = altar_error_set_retriable(err, ALTAR_EBACKEND, "process: cannot create task directory '%s': %s", l->task_dir,
                                   strerror(errno));
    goto out;
  }
  set_log_dir(p, key, l);
  l->timeout_s = spec->timeout_s.set ? spec->timeout_s.v : 0;
  if (l->timeout_s > 1000000000) l->timeout_s = 1000000000; /* ~31 years: no overflow in ms */
  l->memory_mb = spec->resources.memory_mb.set ? spec->resources.memory_mb.v : 0;
  if (l->memory_mb > (1LL << 30)) l->memory_mb = 1LL << 30; /* 1 PiB: no overflow in bytes */
  l->log_cap = p->log_cap;
  l->cgroup_version = 0;
  if (l->memory_mb > 0 && p->cgroup_version) {
    snprintf(l->cgroup_dir, sizeof l->cgroup_dir, "%s/altar-%s", p->cgroup_parent, id);
    l->cgroup_version = p->cgroup_version;
  }

  /* argv points into the spec: the spec outlives the fork below. */
  char **argv = calloc(spec->n_command + 1, sizeof *argv);
  l->envp = build_env(p, id, l->task_dir);
  if (!argv || !l->envp) {
    free(argv);
    rc = altar_error_set(err, ALTAR_ENOMEM, "process: submit: out of memory");
    goto fail_dir;
  }
  for (size_t i = 0; i < spec->n_command; i++) argv[i] = spec->command[i];
  l->argv = argv;

  /* The lock is taken here, before the fork, and inherited: from the moment
   * submit returns, "lock held" means "supervisor alive". */
  char lock_path[ALTAR_PATH_BUF + 8];
  snprintf(lock_path, sizeof lock_path, "%s/task", l->task_dir);
  l->lock_fd = lock_task_file(lock_path);
  if (spare && l->lock_fd < 0) {
    /* A reader still holds the spare's file: start over with a new directory. */
    remove_task_dir(l->task_dir);
    l->lock_fd = mkdir(l->task_dir, 0755) < 0 ? -1 : lock_task_file(lock_path);
  }
  if (l->lock_fd < 0) {
    rc = altar_error_set_retriable(err, ALTAR_EBACKEND, "process: cannot lock '%s': %s", lock_path, strerror(errno));
    goto fail_dir;
  }
  write_meta(l->lock_fd, spec, l, key, id);

  /* One process per task: the supervisor, ours (poll reaps it without
   * blocking) or the long-lived parent's, until it exits; when we or that
   * parent exit first, it is re-parented and goes on. */
  altar__proc_reap(p);
  if (p->n_children == p->cap_children) {
    size_t cap = p->cap_children ? p->cap_children * 2 : 16;
    altar_proc_child_t *nc = realloc(p->children, cap * sizeof *nc);
    if (!nc) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "process: submit: out of memory");
      goto fail_dir;
    }
    p->children = nc;
    p->cap_children = cap;
  }
  altar_proc_child_t child;
  pid_t sup = altar__proc_spawn_supervisor(p, l, &child);
  if (sup < 0) {
    rc = altar_error_set_retriable(err, ALTAR_EBACKEND, "process: starting the supervisor: %s", strerror(errno));
    goto fail_dir;
  }
  /* pid 0: one runs, but which is unknown; poll reads its lock instead. */
  if (sup > 0) altar__proc_child_add(p, &child, id);
  if (l->lock_fd >= 0) close(l->lock_fd);
  l->lock_fd = -1;
  rc = altar_handle_init_for_spec(ph, altar_backend_process_ops.name, id, spec);
  if (rc < 0) {
    rc = altar_error_set(err, rc, "process: submit: out of memory");
    goto out; /* the task runs; the caller can still find it by listing */
  }
  (void)altar__proc_live_add(p, id);
  altar__proc_keys_set(p, key, id);
  rc = 0;
  goto out;
fail_dir:
  if (l->lock_fd >= 0) close(l->lock_fd);
  l->lock_fd = -1;
  remove_task_dir(l->task_dir);
out:
  altar__proc_keys_unlock(p);
  if (l->lock_fd >= 0) close(l->lock_fd);
  free(l->argv);
  free_env(l->envp);
  free(l);
  return rc;
}
