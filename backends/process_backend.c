/* `process`: the vtable, configuration, capacity, resources and paths.
 * The default backend on a machine without containers: a spec's argv runs
 * directly (no shell) in <data_root>/tasks/<id>/, and sees the logical
 * layout under data_root itself. */
#include "process_int.h"
#include "altar/grow.h"

#include "altar/pools.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- small shared helpers ---------------------------------------------- */

bool altar__proc_id_valid(const char *id) {
  size_t n = 0;
  for (const char *c = id; *c; c++, n++) {
    bool ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
              *c == '_' || *c == '.';
    if (!ok || n >= ALTAR_PROC_ID_MAX) return false;
  }
  return n > 0 && strcmp(id, ".") != 0 && strcmp(id, "..") != 0;
}

int altar__proc_task_dir(const altar_process_t *p, const char *id, char *buf, size_t size, altar_error_t *err) {
  if (!id || !altar__proc_id_valid(id))
    return altar_error_set(err, ALTAR_EINVAL, "handle.external_id: '%.80s' is not a process task id",
                           id ? id : "(null)");
  int n = snprintf(buf, size, "%s/%s", p->tasks_dir, id);
  if (n < 0 || (size_t)n >= size) return altar_error_set(err, ALTAR_ETOOBIG, "process: task directory path too long");
  return 0;
}

int altar__proc_write_file(const char *path, const char *data, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  while (len) {
    ssize_t w = write(fd, data, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      close(fd);
      return -1;
    }
    data += w;
    len -= (size_t)w;
  }
  return close(fd);
}

char *altar__proc_read_tail(int fd, bool *pwhole) {
  struct stat st;
  if (fstat(fd, &st) < 0) return NULL;
  off_t off = st.st_size > ALTAR_PROC_TAIL ? st.st_size - ALTAR_PROC_TAIL : 0;
  size_t want = (size_t)(st.st_size - off); /* no read that only finds the end */
  char *buf = malloc(ALTAR_PROC_TAIL + 1);
  if (!buf) return NULL;
  size_t len = 0;
  while (len < want) {
    ssize_t r = pread(fd, buf + len, want - len, off + (off_t)len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      free(buf);
      return NULL;
    }
    if (r == 0) break;
    len += (size_t)r;
  }
  buf[len] = '\0';
  if (pwhole) *pwhole = off == 0;
  return buf;
}

char *altar__proc_read_small(const char *path, size_t max, size_t *plen) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  char *buf = malloc(max + 1);
  size_t len = 0;
  if (buf) {
    while (len < max) {
      ssize_t r = read(fd, buf + len, max - len);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      len += (size_t)r;
    }
    buf[len] = '\0';
  }
  int saved = errno;
  close(fd);
  errno = saved;
  if (plen) *plen = len;
  return buf;
}

int altar__proc_live_add(altar_process_t *p, const char *id) {
  for (size_t i = 0; i < p->n_live; i++)
    if (!strcmp(p->live[i].id, id)) return 0;
  if (ALTAR_GROW(p->live, p->cap_live, p->n_live + 1)) return ALTAR_ENOMEM;
  snprintf(p->live[p->n_live++].id, sizeof p->live[0].id, "%s", id);
  return 0;
}

void altar__proc_live_remove(altar_process_t *p, const char *id) {
  for (size_t i = 0; i < p->n_live; i++)
    if (!strcmp(p->live[i].id, id)) {
      p->live[i] = p->live[--p->n_live];
      return;
    }
}

/* Drops a child's pidfd from the change set first: a forked supervisor may
 * hold a copy of it, which would keep it in the set after our close. */
static void close_child_fd(altar_process_t *p, altar_proc_child_t *c) {
  if (c->fd < 0) return;
  if (p->change_fd >= 0) (void)epoll_ctl(p->change_fd, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  c->fd = -1;
}

static void change_set_drop(altar_process_t *p) {
  if (p->change_fd >= 0) close(p->change_fd);
  p->change_fd = -1;
  p->change_broken = true;
}

static void change_set_add(altar_process_t *p, int fd) {
  if (p->change_fd < 0 || fd < 0) return;
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
  if (epoll_ctl(p->change_fd, EPOLL_CTL_ADD, fd, &ev) != 0 && errno != EEXIST) change_set_drop(p);
}

size_t altar__proc_reap(altar_process_t *p) {
  /* The long-lived parent's supervisors (it reaps them): one poll of their
   * pidfds for all; ours: a waitpid each, which reaps. */
  struct pollfd few[64];
  size_t nf = 0;
  for (size_t i = 0; i < p->n_children && nf < 64; i++)
    if (p->children[i].foreign && p->children[i].fd >= 0)
      few[nf++] = (struct pollfd){.fd = p->children[i].fd, .events = POLLIN};
  if (nf && poll(few, (nfds_t)nf, 0) < 0)
    for (size_t k = 0; k < nf; k++) few[k].revents = POLLERR; /* let the task files tell */
  size_t reaped = 0, k = 0;
  for (size_t i = 0; i < p->n_children; i++) {
    altar_proc_child_t *c = &p->children[i];
    bool gone;
    if (c->foreign && c->fd >= 0 && k < nf) gone = few[k++].revents != 0;
    else if (c->foreign) gone = c->fd < 0; /* beyond the 64 polled: next time */
    else {
      pid_t r = waitpid(c->pid, NULL, WNOHANG);
      gone = r == c->pid || (r < 0 && errno == ECHILD);
    }
    c->exited = gone; /* removed below */
  }
  for (size_t i = p->n_children; i-- > 0;) {
    if (!p->children[i].exited) continue;
    close_child_fd(p, &p->children[i]);
    p->children[i] = p->children[--p->n_children];
    reaped++;
  }
  return reaped;
}

bool altar__proc_child_running(const altar_process_t *p, const char *id) {
  for (size_t i = 0; i < p->n_children; i++)
    if (!strcmp(p->children[i].task.id, id)) return true;
  return false;
}

void altar__proc_child_add(altar_process_t *p, const altar_proc_child_t *c, const char *id) {
  altar_proc_child_t *slot = &p->children[p->n_children++];
  *slot = *c;
  snprintf(slot->task.id, sizeof slot->task.id, "%s", id);
  /* Readable once the task's status is final: a pidfd, once the supervisor
   * has exited (its exit drops the task file's lock); from the long-lived
   * parent, the task's end pipe, which its supervisor closes after the lock. */
  if (slot->fd < 0 && !slot->foreign) slot->fd = (int)syscall(SYS_pidfd_open, c->pid, 0);
  change_set_add(p, slot->fd);
}

/* One descriptor for all our supervisors' exits, so the worker waits on its
 * tasks and the log in one poll: made on the first ask. -1 while a child has
 * no pidfd (an adopted task, a kernel before 5.3): the caller then polls on
 * its clock, as it does for them anyway. */
int altar__proc_change_fd(altar_backend_t *be) {
  altar_process_t *p = altar_backend_impl(be);
  if (p->change_broken) return -1;
  for (size_t i = 0; i < p->n_children; i++)
    if (p->children[i].fd < 0) return -1;
  if (p->change_fd < 0) {
    p->change_fd = epoll_create1(EPOLL_CLOEXEC);
    if (p->change_fd < 0) {
      p->change_broken = true;
      return -1;
    }
    for (size_t i = 0; i < p->n_children; i++) change_set_add(p, p->children[i].fd);
  }
  return p->change_fd;
}

/* Waits for one of our supervisors to exit. Tasks adopted from an earlier
 * worker are not ours: a poller still finds them on its clock. */
int altar__proc_wait_change(altar_backend_t *be, int timeout_ms) {
  altar_process_t *p = altar_backend_impl(be);
  /* Exited ones are reaped here, so none is reported twice. */
  if (altar__proc_reap(p)) return 1;
  size_t n = p->n_children;
  struct pollfd few[64], *pfs = n <= 64 ? few : calloc(n, sizeof *pfs);
  if (!pfs) return ALTAR_ENOTSUP;
  int r = 0;
  for (size_t i = 0; i < n && r == 0; i++) {
    if (p->children[i].fd < 0) r = ALTAR_ENOTSUP; /* no pidfds here (before Linux 5.3) */
    pfs[i] = (struct pollfd){.fd = p->children[i].fd, .events = POLLIN};
  }
  if (r == 0) r = poll(pfs, (nfds_t)n, timeout_ms) > 0 ? 1 : 0;
  if (pfs != few) free(pfs);
  return r;
}

/* ---- memory enforcement: find a cgroup we may nest task groups under ----- */

/* Our own cgroup path for the v1 "memory" controller (version 1) or the v2
 * unified line (version 2), from /proc/self/cgroup. */
static bool own_cgroup(int version, char *out, size_t size) {
  char *text = altar__proc_read_small("/proc/self/cgroup", 16384, NULL);
  if (!text) return false;
  bool found = false;
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line && !found; line = strtok_r(NULL, "\n", &save)) {
    char *c1 = strchr(line, ':');
    char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) continue;
    *c2 = '\0';
    const char *ctrls = c1 + 1, *path = c2 + 1;
    bool match = false;
    if (version == 2) {
      match = ctrls[0] == '\0' && !strncmp(line, "0:", 2);
    } else {
      char tmp[256];
      snprintf(tmp, sizeof tmp, ",%s,", ctrls);
      match = strstr(tmp, ",memory,") != NULL;
    }
    if (match) {
      snprintf(out, size, "%s", path);
      found = true;
    }
  }
  free(text);
  return found;
}

static void choose_cgroup(altar_process_t *p, const char *mode) {
  char own[400], dir[512], probe[600];
  p->cgroup_version = 0;
  p->cgroup_parent[0] = '\0';
  if (!strcmp(mode, "watchdog")) return;
  /* v2: nest under our cgroup when it delegates the memory controller. */
  if (own_cgroup(2, own, sizeof own)) {
    snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", strcmp(own, "/") ? own : "");
    snprintf(probe, sizeof probe, "%s/cgroup.subtree_control", dir);
    char *ctl = altar__proc_read_small(probe, 4096, NULL);
    bool mem = ctl && strstr(ctl, "memory") != NULL;
    free(ctl);
    if (mem && access(dir, W_OK) == 0) {
      snprintf(p->cgroup_parent, sizeof p->cgroup_parent, "%s", dir);
      p->cgroup_version = 2;
      return;
    }
  }
  /* v1 memory controller (hybrid hosts). */
  if (own_cgroup(1, own, sizeof own)) {
    snprintf(dir, sizeof dir, "/sys/fs/cgroup/memory%s", strcmp(own, "/") ? own : "");
    snprintf(probe, sizeof probe, "%s/memory.limit_in_bytes", dir);
    if (access(probe, R_OK) == 0 && access(dir, W_OK) == 0) {
      snprintf(p->cgroup_parent, sizeof p->cgroup_parent, "%s", dir);
      p->cgroup_version = 1;
    }
  }
}

/* ---- create / destroy --------------------------------------------------- */

static int mkdir_p(const char *path) {
  char tmp[ALTAR_PATH_BUF];
  int n = snprintf(tmp, sizeof tmp, "%s", path);
  if (n < 0 || (size_t)n >= sizeof tmp) return -1;
  for (char *c = tmp + 1; *c; c++) {
    if (*c != '/') continue;
    *c = '\0';
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST) return -1;
    *c = '/';
  }
  if (mkdir(tmp, 0755) < 0 && errno != EEXIST) return -1;
  return 0;
}

static bool parse_ll(const char *s, long long min, long long max, long long *pv) {
  if (!s || !*s) return false;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (errno || *end || v < min || v > max) return false;
  *pv = v;
  return true;
}

/* backend.pools: the pools advertised ("normal" is the CPU pool), comma
 * separated; default the CPU pool alone. The process backend has no devices:
 * a GPU pool here runs its jobs as processes, which is what a test fleet or
 * a host whose tasks find their devices themselves needs. */
static int parse_pools(altar_process_t *p, const char *list, altar_error_t *err) {
  if (!list) list = ALTAR_POOL_CPU;
  const char *s = list;
  while (*s) {
    const char *e = strchr(s, ',');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    while (n && (*s == ' ')) s++, n--;
    while (n && s[n - 1] == ' ') n--;
    char name[ALTAR_POOL_NAME_MAX + 2];
    snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name - 1 ? n : sizeof name - 1), s);
    altar_error_t bad = {0};
    if (n && strcmp(name, ALTAR_POOL_CPU) && altar_pool_check("backend.pools", name, &bad))
      return altar_error_set(err, ALTAR_ECONFIG, "%s", bad.msg);
    if (n) {
      char **np = realloc(p->pools, (p->n_pools + 1) * sizeof *np);
      if (!np || !(np[p->n_pools] = strdup(name))) {
        if (np) p->pools = np;
        return altar_error_set(err, ALTAR_ENOMEM, "backend 'process': out of memory");
      }
      p->pools = np;
      p->n_pools++;
    }
    if (!e) break;
    s = e + 1;
  }
  if (!p->n_pools) return altar_error_set(err, ALTAR_ECONFIG, "backend.pools: names no pool");
  return 0;
}

static bool serves_pool(const altar_process_t *p, const char *pool) {
  for (size_t i = 0; i < p->n_pools; i++)
    if (!strcmp(p->pools[i], pool)) return true;
  return false;
}

static void process_free(altar_process_t *p) {
  if (!p) return;
  for (size_t i = 0; i < p->n_pools; i++) free(p->pools[i]);
  free(p->pools);
  altar__proc_spare_free(p); /* before tasks_dir, which names them */
  free(p->data_root);
  free(p->tasks_dir);
  free(p->logs_dir);
  altar__log_retention_clear(&p->retention);
  free(p->storage);
  altar__proc_reap(p); /* supervisors still running stay unreaped until we exit */
  for (size_t i = 0; i < p->n_children; i++) close_child_fd(p, &p->children[i]);
  if (p->change_fd >= 0) close(p->change_fd);
  free(p->children);
  altar__proc_zygote_stop(p); /* its supervisors go on */
  free(p->live);
  if (p->sup_fd >= 0) close(p->sup_fd);
  altar__proc_keys_close(p);
  free(p);
}

static void process_close(altar_backend_t *be) {
  process_free(altar_backend_impl(be));
  altar_backend_set_impl(be, NULL);
}

/* The keys process_open reads (the config reader refuses others). */
static const altar_plugin_key_t process_keys[] = {
    {"data_root", "directory of task directories, kept output and staged inputs (default ./var/data)"},
    {"slots", "tasks at once (default 4)"},
    {"storage", "adapter for inputs and outputs: auto (by uri scheme) or an adapter name"},
    {"log_cap", "bytes of each stream kept while a task runs (default 1 MiB)"},
    {"memory", "auto (a memory cgroup when one can be made, else the RSS watchdog) or watchdog"},
    {"pools", "the pools served, comma separated (default normal)"},
    {"logs_keep", "bytes of kept task output under data_root/logs (default 1 GiB)"},
    {"logs_keep_count", "task output directories kept (default 10000)"},
    {"logs_keep_days", "days task output is kept (default 14; 0: no age bound)"},
    {"logs_keep_s", "seconds task output is kept, for tests and soaks (overrides logs_keep_days)"},
    {"supervisor_start", "parent (forked from a zygote) or exec (a fresh binary per task)"},
    ALTAR_PLUGIN_KEYS_END,
};

static altar_process_t *process_new(const altar_strmap_t *cfg, altar_error_t *err) {
  const char *data_root = "./var/data", *slots_s = NULL, *storage = "auto", *cap_s = NULL, *mem = "auto",
             *start = "parent";
  if (altar_plugin_keys_check(process_keys, "backend", "process", cfg, err)) return NULL;
  if (cfg) {
    if (altar_strmap_get(cfg, "data_root")) data_root = altar_strmap_get(cfg, "data_root");
    slots_s = altar_strmap_get(cfg, "slots");
    if (altar_strmap_get(cfg, "storage")) storage = altar_strmap_get(cfg, "storage");
    cap_s = altar_strmap_get(cfg, "log_cap");
    if (altar_strmap_get(cfg, "memory")) mem = altar_strmap_get(cfg, "memory");
    if (altar_strmap_get(cfg, "supervisor_start")) start = altar_strmap_get(cfg, "supervisor_start");
  }
  long long slots = ALTAR_PROC_DEFAULT_SLOTS, cap = ALTAR_PROC_DEFAULT_LOG_CAP;
  if (slots_s && !parse_ll(slots_s, 1, 100000, &slots)) {
    altar_error_set(err, ALTAR_ECONFIG, "backend.slots: '%.40s' is not an integer in [1, 100000]", slots_s);
    return NULL;
  }
  if (cap_s && !parse_ll(cap_s, 64, 1LL << 32, &cap)) {
    altar_error_set(err, ALTAR_ECONFIG, "backend.log_cap: '%.40s' is not a byte count in [64, 4 GiB]", cap_s);
    return NULL;
  }
  altar_log_retention_t retention;
  if (!altar__log_retention_parse(cfg, &retention, err)) return NULL;
  if (strcmp(mem, "auto") && strcmp(mem, "watchdog")) {
    altar_error_set(err, ALTAR_ECONFIG, "backend.memory: '%.40s' is neither 'auto' nor 'watchdog'", mem);
    return NULL;
  }
  if (strcmp(start, "parent") && strcmp(start, "exec")) {
    altar_error_set(err, ALTAR_ECONFIG, "backend.supervisor_start: '%.40s' is neither 'parent' nor 'exec'", start);
    return NULL;
  }
  if (!data_root[0] || strlen(data_root) > 3000) {
    altar_error_set(err, ALTAR_ECONFIG, "backend.data_root: must be a path of 1 to 3000 bytes");
    return NULL;
  }
  if (mkdir_p(data_root) < 0) {
    altar_error_set(err, ALTAR_ECONFIG, "backend.data_root: cannot create '%s': %s", data_root, strerror(errno));
    return NULL;
  }
  char abs[PATH_MAX];
  if (!realpath(data_root, abs)) {
    altar_error_set(err, ALTAR_ECONFIG, "backend.data_root: '%s': %s", data_root, strerror(errno));
    return NULL;
  }
  altar_process_t *p = calloc(1, sizeof *p);
  if (!p) goto nomem;
  p->sup_fd = ALTAR_PROC_SUP_UNTRIED;
  p->change_fd = -1;
  p->start = strcmp(start, "exec") ? ALTAR_PROC_START_PARENT : ALTAR_PROC_START_EXEC;
  p->zyg_sock = p->zyg_pidfd = -1;
  p->keys_fd = -1;
  p->spare_pid = getpid();
  p->slots = slots;
  p->log_cap = (size_t)cap;
  p->retention = retention;
  p->data_root = strdup(abs);
  p->storage = strdup(storage);
  size_t tl = strlen(abs) + sizeof "/tasks";
  p->tasks_dir = malloc(tl);
  if (!p->data_root || !p->storage || !p->tasks_dir) goto nomem;
  snprintf(p->tasks_dir, tl, "%s/tasks", abs);
  p->logs_dir = malloc(tl);
  if (!p->logs_dir) goto nomem;
  snprintf(p->logs_dir, tl, "%s/logs", abs);
  const char *made = p->tasks_dir;
  bool ok = mkdir(made, 0755) == 0 || errno == EEXIST;
  if (ok) ok = mkdir((made = p->logs_dir), 0755) == 0 || errno == EEXIST;
  if (!ok) {
    altar_error_set(err, ALTAR_ECONFIG, "backend.data_root: cannot create '%s': %s", made, strerror(errno));
    process_free(p);
    return NULL;
  }
  if (altar__proc_keys_open(p) < 0) {
    altar_error_set(err, ALTAR_ECONFIG, "backend.data_root: cannot create '%s/keys': %s", p->data_root,
                    strerror(errno));
    process_free(p);
    return NULL;
  }
  if (parse_pools(p, cfg ? altar_strmap_get(cfg, "pools") : NULL, err)) {
    process_free(p);
    return NULL;
  }
  choose_cgroup(p, mem);
  altar__proc_spare_sweep(p);
  struct timespec mono;
  clock_gettime(CLOCK_MONOTONIC, &mono);
  /* The first prune scans: what earlier lives left is indexed, and pruned now. */
  altar__proc_logs_prune_if_due(p, (double)mono.tv_sec + mono.tv_nsec / 1e9);
  return p;
nomem:
  altar_error_set(err, ALTAR_ENOMEM, "backend 'process': out of memory");
  process_free(p);
  return NULL;
}

/* ops.open: the impl from process_new, its message as the error. */
static int process_open(altar_backend_t *be, const altar_strmap_t *cfg, altar_error_t *err) {
  void *impl = process_new(cfg, err);
  if (!impl) return err->code;
  altar_backend_set_impl(be, impl);
  return 0;
}

/* ---- capacity, resources, paths ----------------------------------------- */

static int process_capacity(altar_backend_t *be, altar_capacity_t *pcap, altar_error_t *err) {
  altar_process_t *p = altar_backend_impl(be);
  altar__proc_reap(p);
  /* Refresh the live set: finished (or vanished) tasks free their slot. */
  for (size_t i = p->n_live; i-- > 0;) {
    altar_state_t st;
    altar_failure_t *f = NULL;
    char id[ALTAR_PROC_ID_MAX + 1];
    snprintf(id, sizeof id, "%s", p->live[i].id);
    if (altar__proc_child_running(p, id)) continue;
    if (altar__proc_probe(p, id, &st, &f, NULL) < 0 || altar_state_terminal(st)) altar__proc_live_remove(p, id);
    altar_failure_free(f);
  }
  int64_t free_slots = p->slots - (int64_t)p->n_live;
  if (free_slots < 0) free_slots = 0;
  /* The pools share the slots. */
  for (size_t i = 0; i < p->n_pools; i++) {
    int rc = altar_capacity_set(pcap, p->pools[i], free_slots);
    if (rc < 0) return altar_error_set(err, rc, "process: capacity: out of memory");
  }
  return 0;
}

static int process_check_resources(altar_backend_t *be, const altar_resources_t *r, altar_error_t *err) {
  altar_process_t *p = altar_backend_impl(be);
  const char *pool = r->gpu ? r->gpu : ALTAR_POOL_CPU;
  if (!serves_pool(p, pool)) {
    char list[512] = "";
    size_t at = 0;
    for (size_t i = 0; i < p->n_pools && at < sizeof list; i++) {
      int n = snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", p->pools[i]);
      if (n > 0) at += (size_t)n;
    }
    return altar_error_set(err, ALTAR_EINVAL,
                           "resources.gpu: backend 'process' serves pool(s) %s, not '%.80s' (backend.pools)", list,
                           pool);
  }
  if (r->memory_mb.set && r->memory_mb.v <= 0)
    return altar_error_set(err, ALTAR_EINVAL, "resources.memory_mb: must be > 0");
  return 0;
}

static const char *process_mount_root(altar_backend_t *be) {
  altar_process_t *p = altar_backend_impl(be);
  return p->data_root;
}

/* From the kept-output index poll and reclaim maintain: no directory read. */
static int process_kept_logs(altar_backend_t *be, altar_kept_logs_t *pkept) {
  altar_process_t *p = altar_backend_impl(be);
  altar__log_retention_kept_logs(&p->retention, (double)time(NULL), pkept);
  return ALTAR_OK;
}

const altar_backend_ops_t altar_backend_process_ops = {
    .name = "process",
    .caps = ALTAR_BACKEND_CAP_CAPACITY | ALTAR_BACKEND_CAP_CANCEL | ALTAR_BACKEND_CAP_WAIT_CHANGE |
            ALTAR_BACKEND_CAP_ADOPT | ALTAR_BACKEND_CAP_LOGS,
    .config_keys = process_keys,
    .input_digest_verification = ALTAR_VERIFY_STAGING,
    .open = process_open,
    .close = process_close,
    .capacity = process_capacity,
    .check_resources = process_check_resources,
    .stage_inputs = altar__proc_stage_inputs,
    .collect_outputs = altar__proc_collect_outputs,
    .mount_root = process_mount_root,
    .submit = altar__proc_submit,
    .poll = altar__proc_poll,
    .wait_change = altar__proc_wait_change,
    .change_fd = altar__proc_change_fd,
    .cancel = altar__proc_cancel,
    .kept_logs = process_kept_logs,
};
