/* The `process` backend's internals, shared by its files:
 *   process_backend.c    vtable, configuration, capacity, resources, paths
 *   process_submit.c     task directory, lock, launch parameters
 *   process_spawn.c      starting the supervisor (its long-lived parent, exec
 *                        from memory, or fork)
 *   process_zygote.c     the long-lived parent that forks supervisors (in the
 *                        supervisor program, not in the library)
 *   process_zygote_link.c  the backend's side of it: start, ask, restart
 *   process_supervisor.c the per-task supervisor
 *   process_supervisor_main.c  the supervisor as a program (not in the library)
 *   process_supervisor_blob.c  that program's bytes, carried in the library
 *   process_poll.c       poll and adoption from the task directory
 *   process_cancel.c     cancel
 *   process_spare.c      reclaimed task directories kept for reuse
 *   process_staging.c    stage_inputs / collect_outputs through Storage
 *   process_keys.c       adoption by task key (keys/<task key> -> task id)
 *
 * Task directory <data_root>/tasks/<id>/ (the task's cwd):
 *   task      what ran (image, argv, limits: written by submit), then the
 *             supervisor's "supervisor=<pid>" and "pgid=<pgid>" lines; it is
 *             flock'ed by the supervisor until the task's status is final
 *             (taken by submit before the supervisor gets it, so there is no
 *             window where nobody holds it)
 *   cancel    present when cancel was asked for
 * and the command's output, bounded (head + rolling tail), in
 * <data_root>/logs/<task key>/stdout and stderr: created at the first byte,
 * absent when there was none (and the directory removed at reclaim then),
 * kept after the task directory is reused (a rerun of the same task key
 * replaces them), so `altar logs` and the failure's detail read them there;
 * bounded by backends/log_retention.c.
 * At the end of the task file, the terminal status: a "[status]" line
 * and key=value lines, appended by the supervisor in one write before it
 * lets go of the lock. A reader trusts it only once the flock is free (the
 * writer is done).
 * Two inodes per task (directory, task file): on ext4 inode creation was the
 * largest cost of a short task, so nothing else is created unless needed.
 */
#ifndef ALTAR_PROCESS_INT_H
#define ALTAR_PROCESS_INT_H

#include "altar/plugin/backend.h"
#include "altar/paths.h"
#include "backends/log_retention.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ALTAR_PROC_ID_MAX 64
#define ALTAR_PROC_STATUS_MARK "[status]\n"
#define ALTAR_PROC_TAIL 8192 /* bytes at the end of the task file we read */
#define ALTAR_PROC_DEFAULT_LOG_CAP (1u << 20)
#define ALTAR_PROC_DEFAULT_SLOTS 4
#define ALTAR_PATH_BUF 4352         /* ALTAR_PATH_MAX plus room for a task suffix */
#define ALTAR_PROC_SUP_UNTRIED (-2) /* sup_fd before the first spawn */
#define ALTAR_PROC_SPARE_MAX 64     /* reclaimed task directories kept */

typedef struct altar_proc_task {
  char id[ALTAR_PROC_ID_MAX + 1];
} altar_proc_task_t;

/* A supervisor we started and have not seen exit. */
typedef struct altar_proc_child {
  pid_t pid;
  int fd;       /* readable once its status is final (-1: none): its pidfd, or,
                   from the long-lived parent, the task's end pipe (process_zygote.c) */
  bool foreign; /* forked by the long-lived parent: not ours to waitpid */
  bool exited;  /* seen by altar__proc_reap, during its pass */
  altar_proc_task_t task;
} altar_proc_child_t;

/* How supervisors are started (backend.supervisor_start). */
typedef enum {
  ALTAR_PROC_START_PARENT, /* forked by a long-lived parent; exec when it cannot */
  ALTAR_PROC_START_EXEC,   /* the supervisor program exec'd per task */
} altar_proc_start_t;

typedef struct altar_process {
  char *data_root; /* absolute, no trailing slash */
  char *tasks_dir; /* <data_root>/tasks */
  char *logs_dir;  /* <data_root>/logs: <task key>/{stdout,stderr} */
  int64_t slots;
  char **pools; /* advertised pools (backend.pools), sharing the slots */
  size_t n_pools;
  size_t log_cap;                  /* bytes kept per stream */
  altar_log_retention_t retention; /* of <logs_dir> (backend.logs_keep, logs_keep_days) */
  char *storage;                   /* Storage adapter name used for staging */
  /* Tasks this object submitted or adopted and has not yet seen terminal;
   * capacity counts them. */
  altar_proc_task_t *live;
  size_t n_live, cap_live;
  /* Supervisors we started and have not seen exit: our children (reaped
   * without blocking in poll/capacity), or the long-lived parent's (seen
   * through their pidfds). */
  altar_proc_child_t *children;
  size_t n_children, cap_children;
  /* An epoll set over the children's pidfds (change_fd): made on first
   * ask, -1 before; change_broken once it failed (not made again). */
  int change_fd;
  bool change_broken;
  /* The supervisor program in a sealed memfd; -1: supervisors are forked. */
  int sup_fd;
  altar_proc_start_t start;
  /* The long-lived parent (process_zygote_link.c): its pid (0: none), our
   * end of its socket, its pidfd, and how many times in a row it failed. */
  pid_t zyg_pid, zyg_owner; /* zyg_owner: the process that started it */
  int zyg_sock, zyg_pidfd;
  unsigned zyg_failures;
  /* Spare task directories we made, by number (process_spare.c). */
  uint64_t spares[ALTAR_PROC_SPARE_MAX];
  size_t n_spares;
  uint64_t spare_seq;
  pid_t spare_pid; /* ours at open, in their names (a syscall saved twice a task) */
  /* keys/.lock (process_keys.c), -1 when it could not be opened (no adoption). */
  int keys_fd;
  /* Memory enforcement chosen at open: cgroup dir to nest under, or "". */
  char cgroup_parent[512];
  int cgroup_version; /* 0 none (RSS watchdog), 1 or 2 */
} altar_process_t;

/* What the supervisor needs, prepared before fork so the child only makes
 * system calls and formats numbers. */
typedef struct altar_proc_launch {
  char task_dir[ALTAR_PATH_BUF];
  char log_dir[ALTAR_PATH_BUF]; /* where stdout and stderr go */
  char **argv;                  /* NULL-terminated, borrowed */
  char **envp;                  /* NULL-terminated, owned by the caller */
  int lock_fd;                  /* flock'ed, inherited */
  int64_t timeout_s;            /* <= 0: none */
  int64_t memory_mb;            /* <= 0: none */
  size_t log_cap;
  char cgroup_dir[ALTAR_PATH_BUF]; /* "" when no cgroup */
  int cgroup_version;
  /* Every signal's action is the default already (exec'd with them reset,
   * or forked by the parent, which sets none): no reset needed. */
  bool signals_default;
} altar_proc_launch_t;

/* Runs the supervisor in the current (freshly forked or exec'd) process;
 * never returns. */
void altar__proc_supervise(const altar_proc_launch_t *l) __attribute__((noreturn));
/* Its parts, for a supervisor that runs one task after another: enter, once
 * per process (its own session, SIGCHLD blocked for a signalfd); task, once
 * per task, with the task's lock at descriptor 3 and stdin, stdout and
 * stderr on /dev/null: runs the command and appends the status; returns
 * with the lock still open (no status appended when it could not start). */
void altar__proc_supervisor_enter(const altar_proc_launch_t *l);
void altar__proc_supervise_task(const altar_proc_launch_t *l);

/* Starts the supervisor for l, which inherits l->lock_fd. Returns its pid
 * with *pchild filled (pid 0 in it: a supervisor runs, but which one is
 * unknown, see process_zygote_link.c), or -1 with errno. May replace
 * l->lock_fd by another descriptor holding the same lock. Worker thread only. */
pid_t altar__proc_spawn_supervisor(altar_process_t *p, altar_proc_launch_t *l, altar_proc_child_t *pchild);

/* posix_spawn of the supervisor program in prog_fd with argv and envp,
 * keeping keep_fd open in it; 0 with *ppid, or an errno value. */
int altar__proc_exec_program(int prog_fd, char **argv, char **envp, int keep_fd, pid_t *ppid);

/* The long-lived parent. serve: its loop, in the supervisor program, over
 * the socket sock; returns its exit status. */
int altar__proc_zygote_serve(int sock);
/* ask: has the parent (started or restarted as needed) fork a supervisor
 * for l. 0: *pchild filled (foreign; pid 0 when the parent died after the
 * fork and the lock shows a supervisor); ALTAR_PROC_ZYG_UNUSED: none was
 * started, use another way (l->lock_fd then holds the lock, perhaps through
 * a new descriptor); any other value: the errno of a failure to report. */
#define ALTAR_PROC_ZYG_UNUSED (-1)
int altar__proc_zygote_ask(altar_process_t *p, int prog_fd, altar_proc_launch_t *l, altar_proc_child_t *pchild);
/* stop: closes our end; the parent exits, and its supervisors go on. */
void altar__proc_zygote_stop(altar_process_t *p);

/* The supervisor program's bytes (*plen 0: the build carries none). */
const unsigned char *altar__proc_sup_program(size_t *plen);

/* "<tasks_dir>/<id>" into buf; ALTAR_EINVAL for an id that is not ours. */
int altar__proc_task_dir(const altar_process_t *p, const char *id, char *buf, size_t size, altar_error_t *err);
/* An id is [A-Za-z0-9._-]{1,64}, not "." or "..". */
bool altar__proc_id_valid(const char *id);

/* "<logs_dir>/<key>" into buf (key: a task key). */
void altar__proc_log_dir(const altar_process_t *p, const char *key, char *buf, size_t size);
/* The failure detail of a failed task: base, then the tails of its stderr
 * and stdout from dir, bounded by ALTAR_BOUND_DETAIL and with the worker's
 * secret environment values redacted (the task ran with that environment).
 * malloc'd; NULL when out of memory. */
char *altar__proc_detail_with_logs(const char *base, const char *dir);
/* Rewrites a finished task's kept output in dir with the values of the
 * worker's secret environment variables replaced (nothing to do, and no
 * read, when the environment holds none). */
void altar__proc_redact_logs(const char *dir);
/* Prunes kept output by p->retention (log_retention.h), never a task whose
 * supervisor is alive: at open (with the first scan of the logs directory),
 * then from poll at most once per ALTAR_LOGS_PRUNE_INTERVAL_S; mono is the
 * monotonic time (a scan when one is due). Takes the keys lock. pfacts may
 * be NULL. */
void altar__proc_logs_prune(altar_process_t *p, double mono, altar_logs_prune_facts_t *pfacts);
/* altar__proc_logs_prune when one is due at monotonic time now. */
void altar__proc_logs_prune_if_due(altar_process_t *p, double now);
/* The output of key's run is final (the run is reclaimed and was the key's
 * last): an empty directory is removed, so a run that wrote nothing keeps
 * nothing; other output is handed to retention as the newest. Called with
 * the keys lock held. */
void altar__proc_logs_kept(altar_process_t *p, const char *key);

/* Reads the task's state: terminal statuses come with *pfailure (caller
 * frees). Never blocks. */
int altar__proc_probe(const altar_process_t *p, const char *id, altar_state_t *pstate, altar_failure_t **pfailure,
                      altar_error_t *err);

/* Adoption by task key (process_keys.c). open: at backend open (-1 with errno);
 * lock/unlock: around a submit's lookup and link; find_live: the id of the
 * key's task when its supervisor is alive; set: points the key at id;
 * forget: at reclaim, removes the link of the task in task_dir if it
 * still points at id, and then hands the run's output to retention
 * (altar__proc_logs_kept). */
int altar__proc_keys_open(altar_process_t *p);
void altar__proc_keys_close(altar_process_t *p);
void altar__proc_keys_lock(altar_process_t *p);
void altar__proc_keys_unlock(altar_process_t *p);
bool altar__proc_keys_find_live(altar_process_t *p, const char *key, char id[ALTAR_PROC_ID_MAX + 1]);
void altar__proc_keys_set(altar_process_t *p, const char *key, const char *id);
void altar__proc_keys_forget(altar_process_t *p, const char *task_dir, const char *id);
/* The same with the task file open as fd (the caller closes it). */
void altar__proc_keys_forget_fd(altar_process_t *p, int fd, const char *id);

/* Reaps exited supervisors without blocking; returns how many. */
size_t altar__proc_reap(altar_process_t *p);
/* Records a supervisor just started (room made by submit beforehand); c->fd
 * < 0 on one of ours: a pidfd is opened here. */
void altar__proc_child_add(altar_process_t *p, const altar_proc_child_t *c, const char *id);
/* Whether id's supervisor is our child not yet reaped: alive as of the last
 * reap, so running, known without touching its task file. */
bool altar__proc_child_running(const altar_process_t *p, const char *id);

/* Keeps a reclaimed task's directory (its supervisor gone) for reuse:
 * emptied but for its truncated task file. False: not kept, delete it. */
/* Removes a tree without following links (best effort). */
void altar__proc_rmtree(const char *path);
bool altar__proc_spare_put(altar_process_t *p, const char *task_dir);
/* The same with the task file open as fd (writable, opened without
 * following a link); the caller closes fd. */
bool altar__proc_spare_put_fd(altar_process_t *p, const char *task_dir, int fd);
/* Renames a spare into place as task_dir; false when there is none. */
bool altar__proc_spare_take(altar_process_t *p, const char *task_dir);
/* Deletes the spares left (destroy). */
void altar__proc_spare_free(altar_process_t *p);
/* Deletes spares whose process is gone (a worker that died kept some). */
void altar__proc_spare_sweep(altar_process_t *p);

/* Live-set bookkeeping for capacity. */
int altar__proc_live_add(altar_process_t *p, const char *id);
void altar__proc_live_remove(altar_process_t *p, const char *id);

/* The last ALTAR_PROC_TAIL bytes of the file open as fd (as long as it was
 * when looked at), NUL-terminated (malloc'd, caller frees); NULL on a read
 * error. *pwhole (may be NULL) says whether that is the whole file. */
char *altar__proc_read_tail(int fd, bool *pwhole);

/* Whole-file helpers (bounded). */
int altar__proc_write_file(const char *path, const char *data, size_t len);
/* Reads at most max bytes into a NUL-terminated malloc'd buffer; NULL if
 * missing. errno preserved from open. */
char *altar__proc_read_small(const char *path, size_t max, size_t *plen);

/* Backend callbacks implemented across the files. */
int altar__proc_submit(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *ph, altar_error_t *err);
int altar__proc_poll(altar_backend_t *be, const altar_handle_t *hs, size_t n, altar_status_t *pst, altar_error_t *err);
int altar__proc_cancel(altar_backend_t *be, const altar_handle_t *h, altar_error_t *err);
int altar__proc_wait_change(altar_backend_t *be, int timeout_ms);
int altar__proc_change_fd(altar_backend_t *be);
int altar__proc_stage_inputs(altar_backend_t *be, const altar_transfer_t *ts, size_t n, altar_error_t *err);
int altar__proc_collect_outputs(altar_backend_t *be, const altar_transfer_t *ts, size_t n, altar_error_t *err);

#endif
