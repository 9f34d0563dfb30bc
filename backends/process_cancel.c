/* `process` cancel: stop a running task (its supervisor records "canceled"),
 * or reclaim a finished one (its directory is removed). Idempotent: a task
 * that is gone is cancelled already. */
#include "process_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* pgid the supervisor appended to the task file, or 0. */
static pid_t read_pgid(const char *dir) {
  char path[ALTAR_PATH_BUF + 8];
  snprintf(path, sizeof path, "%s/task", dir);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char *text = altar__proc_read_tail(fd, NULL);
  close(fd);
  if (!text) return 0;
  pid_t pgid = 0;
  const char *p = strstr(text, "\npgid=");
  if (p) {
    long v = strtol(p + 6, NULL, 10);
    if (v > 1 && v < (1L << 22)) pgid = (pid_t)v;
  }
  free(text);
  return pgid;
}

static bool supervisor_alive(const char *dir) {
  char path[ALTAR_PATH_BUF + 8];
  snprintf(path, sizeof path, "%s/task", dir);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  bool alive = fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) < 0;
  if (fd >= 0) close(fd);
  return alive;
}

int altar__proc_cancel(altar_backend_t *be, const altar_handle_t *h, altar_error_t *err) {
  altar_process_t *p = altar_backend_impl(be);
  if (!h->external_id || !altar__proc_id_valid(h->external_id)) return 0; /* never ours: gone */
  char dir[ALTAR_PATH_BUF], path[ALTAR_PATH_BUF + 16];
  int rc = altar__proc_task_dir(p, h->external_id, dir, sizeof dir, err);
  if (rc < 0) return rc;
  /* The usual case, a finished task, through one descriptor of its task
   * file: the lock free (its supervisor gone), its key link forgotten, the
   * directory kept as a spare. Anything else goes the long way below. */
  snprintf(path, sizeof path, "%s/task", dir);
  int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) == 0) {
    altar__proc_keys_forget_fd(p, fd, h->external_id);
    bool kept = altar__proc_spare_put_fd(p, dir, fd);
    close(fd);
    if (!kept) altar__proc_rmtree(dir);
    altar__proc_live_remove(p, h->external_id);
    return 0;
  }
  if (fd >= 0) close(fd);
  struct stat st;
  if (stat(dir, &st) < 0) {
    altar__proc_live_remove(p, h->external_id);
    return 0;
  }
  if (supervisor_alive(dir)) {
    /* Marker first, then the kill: the supervisor checks the marker after it
     * publishes the pid file, so one of us always sees the other. */
    snprintf(path, sizeof path, "%s/cancel", dir);
    if (altar__proc_write_file(path, "1\n", 2) < 0)
      return altar_error_set_retriable(err, ALTAR_EBACKEND, "process: cancel %s: %s", h->external_id, strerror(errno));
    /* The supervisor publishes the pgid right after the spawn; a cancel that
     * comes sooner waits for it (briefly), so the kill is not left to a
     * marker that someone may delete with the directory. */
    pid_t pgid = 0;
    for (int i = 0; i < 2000 && !(pgid = read_pgid(dir)); i++) {
      if (!supervisor_alive(dir)) return 0; /* it ended and saw the marker, or is gone */
      struct timespec ts = {0, 1000 * 1000};
      nanosleep(&ts, NULL);
    }
    /* Only while the lock shows the supervisor alive is the pgid still ours. */
    if (pgid > 1 && supervisor_alive(dir)) kill(-pgid, SIGKILL);
    return 0;
  }
  /* Finished or abandoned: reclaim the directory, as a spare if it can be. */
  altar__proc_keys_forget(p, dir, h->external_id);
  if (!altar__proc_spare_put(p, dir)) altar__proc_rmtree(dir);
  altar__proc_live_remove(p, h->external_id);
  return 0;
}
