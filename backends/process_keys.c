/* `process` adoption by task key: <data_root>/keys/<task key> is a hard
 * link to the task file of the run last started for that key (whose first
 * lines name the key and the task id). A link costs no inode: a symlink per
 * task did, and on a file system without a journal allocating inodes next
 * to recently freed ones was a tenth of a short task's cost. Data roots of
 * earlier versions hold symlinks to the id; those are still read. A submit whose key
 * names a task whose supervisor is alive returns that task's handle instead
 * of starting a second run, so a worker taking over a dead worker's job on
 * the same data root adopts the run in progress. A finished run is not
 * adopted: the key is run anew (a retry after a failure must really run).
 * One flock on keys/.lock, held from the lookup until the new link is in
 * place, keeps two submitters of one key from both starting it. The task
 * file's first line names the key, so reclaiming a task removes its link. */
#include "process_int.h"

#include "altar/codec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEYS_DIR "keys"
#define KEY_LINE "task_key="

static bool key_valid(const char *key) {
  size_t n = 0;
  for (; key[n]; n++)
    if (!((key[n] >= '0' && key[n] <= '9') || (key[n] >= 'a' && key[n] <= 'f'))) return false;
  return n == ALTAR_TASK_KEY_LEN;
}

int altar__proc_keys_open(altar_process_t *p) {
  char path[ALTAR_PATH_BUF];
  p->keys_fd = -1;
  snprintf(path, sizeof path, "%s/" KEYS_DIR, p->data_root);
  if (mkdir(path, 0755) < 0 && errno != EEXIST) return -1;
  snprintf(path, sizeof path, "%s/" KEYS_DIR "/.lock", p->data_root);
  p->keys_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  return p->keys_fd < 0 ? -1 : 0;
}

void altar__proc_keys_close(altar_process_t *p) {
  if (p->keys_fd >= 0) close(p->keys_fd);
  p->keys_fd = -1;
}

void altar__proc_keys_lock(altar_process_t *p) {
  while (p->keys_fd >= 0 && flock(p->keys_fd, LOCK_EX) < 0 && errno == EINTR) {}
}

void altar__proc_keys_unlock(altar_process_t *p) {
  if (p->keys_fd >= 0) flock(p->keys_fd, LOCK_UN);
}

/* The id of the run keys/<key> names, read from the linked task file's
 * second line; false when that file is another key's (a stale link to a
 * recycled task file) or unreadable. */
static bool linked_id(int fd, const char *key, char id[ALTAR_PROC_ID_MAX + 1]) {
  char head[sizeof KEY_LINE + ALTAR_TASK_KEY_LEN + sizeof "\ntask_id=" + ALTAR_PROC_ID_MAX + 2];
  ssize_t n = pread(fd, head, sizeof head - 1, 0);
  size_t kl = sizeof KEY_LINE - 1;
  if (n < (ssize_t)(kl + ALTAR_TASK_KEY_LEN) || memcmp(head, KEY_LINE, kl) ||
      memcmp(head + kl, key, ALTAR_TASK_KEY_LEN))
    return false;
  head[n] = '\0';
  const char *p = head + kl + ALTAR_TASK_KEY_LEN;
  if (strncmp(p, "\ntask_id=", 9)) return false;
  p += 9;
  size_t il = strcspn(p, "\n");
  if (il == 0 || il > ALTAR_PROC_ID_MAX || p[il] != '\n') return false;
  memcpy(id, p, il);
  id[il] = '\0';
  return altar__proc_id_valid(id);
}

bool altar__proc_keys_find_live(altar_process_t *p, const char *key, char id[ALTAR_PROC_ID_MAX + 1]) {
  if (!key_valid(key)) return false;
  char path[ALTAR_PATH_BUF + 80];
  snprintf(path, sizeof path, "%s/" KEYS_DIR "/%s", p->data_root, key);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) {
    /* The supervisor holds the task file's lock while it lives. */
    bool live = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK && linked_id(fd, key, id);
    close(fd);
    return live;
  }
  if (errno != ELOOP) return false;
  ssize_t n = readlink(path, id, ALTAR_PROC_ID_MAX); /* an earlier version's symlink */
  if (n <= 0) return false;
  id[n] = '\0';
  if (!altar__proc_id_valid(id)) return false;
  altar_state_t st;
  altar_failure_t *f = NULL;
  int rc = altar__proc_probe(p, id, &st, &f, NULL);
  altar_failure_free(f);
  return rc == 0 && !altar_state_terminal(st);
}

void altar__proc_keys_set(altar_process_t *p, const char *key, const char *id) {
  if (!key_valid(key)) return;
  char path[ALTAR_PATH_BUF + 80], dir[ALTAR_PATH_BUF], task[ALTAR_PATH_BUF + 16];
  if (altar__proc_task_dir(p, id, dir, sizeof dir, NULL) < 0) return;
  snprintf(path, sizeof path, "%s/" KEYS_DIR "/%s", p->data_root, key);
  snprintf(task, sizeof task, "%s/task", dir);
  /* Under keys/.lock, which every reader of the link takes too: nobody
   * sees the moment between the calls. A key's first run has no link to
   * replace: one call then. */
  if (link(task, path) < 0 && errno == EEXIST) {
    unlink(path);
    (void)link(task, path);
  }
}

void altar__proc_keys_forget(altar_process_t *p, const char *task_dir, const char *id) {
  char path[ALTAR_PATH_BUF + 80];
  snprintf(path, sizeof path, "%s/task", task_dir);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  altar__proc_keys_forget_fd(p, fd, id);
  close(fd);
}

void altar__proc_keys_forget_fd(altar_process_t *p, int fd, const char *id) {
  char path[ALTAR_PATH_BUF + 80];
  char line[sizeof KEY_LINE + ALTAR_TASK_KEY_LEN + 1];
  ssize_t n = pread(fd, line, sizeof line - 1, 0);
  struct stat own;
  bool have_own = fstat(fd, &own) == 0;
  if (n < (ssize_t)(sizeof line - 1) || memcmp(line, KEY_LINE, sizeof KEY_LINE - 1)) return;
  line[n] = '\0';
  const char *key = line + sizeof KEY_LINE - 1;
  line[sizeof KEY_LINE - 1 + ALTAR_TASK_KEY_LEN] = '\0';
  if (!key_valid(key)) return;
  snprintf(path, sizeof path, "%s/" KEYS_DIR "/%s", p->data_root, key);
  altar__proc_keys_lock(p);
  struct stat ln;
  bool forgot = false;
  if (lstat(path, &ln) == 0) {
    if (S_ISLNK(ln.st_mode)) { /* an earlier version's symlink to the id */
      char cur[ALTAR_PROC_ID_MAX + 1];
      ssize_t k = readlink(path, cur, ALTAR_PROC_ID_MAX);
      if (k > 0) {
        cur[k] = '\0';
        forgot = !strcmp(cur, id) && unlink(path) == 0;
      }
    } else if (have_own && ln.st_ino == own.st_ino && ln.st_dev == own.st_dev) {
      forgot = unlink(path) == 0; /* still this run's, not a newer one's */
    }
  }
  /* This run's output is the key's last: the kept-output index learns of it. */
  if (forgot) altar__proc_logs_kept(p, key);
  altar__proc_keys_unlock(p);
}
