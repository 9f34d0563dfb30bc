/* `process`: spare task directories. Making and deleting two inodes per task
 * (the directory and its task file) was the largest filesystem cost of a
 * short task: on ext4 without a journal every new inode is found by
 * scanning past each inode freed in the last seconds, so the cost grew with
 * the rate of tasks. A reclaimed task's directory is emptied, its task file
 * truncated, and the pair kept under <tasks>/.spare/ (never a task id this
 * backend hands out); the next submit renames it into place. Only this
 * object's own spares are taken; destroy deletes what is left. */
#include "process_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw);

/* Everything below the directory except its regular `task` file: one read
 * of the directory (a finished task usually left nothing else there), a
 * tree walk only for a directory the task made. A walk of the whole
 * directory stat'ed every entry and cost a twentieth of the worker's CPU. */
static bool empty_but_task(const char *task_dir) {
  int dfd = open(task_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return false;
  DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return false;
  }
  bool ok = true;
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    unsigned char type = e->d_type;
    struct stat st;
    if (type == DT_UNKNOWN) { /* a file system without types in its entries */
      if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        ok = false;
        continue;
      }
      type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_LNK;
    }
    if (type == DT_REG && !strcmp(e->d_name, "task")) continue;
    if (type == DT_DIR) {
      char sub[ALTAR_PATH_BUF + 300];
      snprintf(sub, sizeof sub, "%s/%s", task_dir, e->d_name);
      nftw(sub, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
      if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) ok = false; /* not all of it went */
    } else if (unlinkat(dfd, e->d_name, 0) < 0) {
      ok = false;
    }
  }
  closedir(d);
  return ok;
}

static void spare_path(const altar_process_t *p, uint64_t seq, char *buf, size_t size) {
  snprintf(buf, size, "%s/.spare/%ld-%llu", p->tasks_dir, (long)p->spare_pid, (unsigned long long)seq);
}

bool altar__proc_spare_put(altar_process_t *p, const char *task_dir) {
  char path[ALTAR_PATH_BUF + 16];
  snprintf(path, sizeof path, "%s/task", task_dir);
  /* Only our own file: not a link the task put there to have us truncate another. */
  int fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  bool kept = altar__proc_spare_put_fd(p, task_dir, fd);
  close(fd);
  return kept;
}

bool altar__proc_spare_put_fd(altar_process_t *p, const char *task_dir, int fd) {
  if (p->n_spares >= ALTAR_PROC_SPARE_MAX) return false;
  /* Whatever the task did to its directory is undone, or it is not reused
   * (a link put in place of the task file is removed here too: it is not a
   * regular file). */
  if (chmod(task_dir, 0755) < 0 || !empty_but_task(task_dir)) return false;
  struct stat st, at;
  char path[ALTAR_PATH_BUF + 16];
  snprintf(path, sizeof path, "%s/task", task_dir);
  /* fd is still the file at task_dir/task, a regular file linked nowhere else. */
  bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 && lstat(path, &at) == 0 &&
            at.st_ino == st.st_ino && at.st_dev == st.st_dev && ftruncate(fd, 0) == 0;
  if (!ok) return false;
  char spare[ALTAR_PATH_BUF + 64];
  uint64_t seq = p->spare_seq++;
  spare_path(p, seq, spare, sizeof spare);
  if (rename(task_dir, spare) < 0) {
    if (errno != ENOENT) return false;
    char dir[ALTAR_PATH_BUF + 16];
    snprintf(dir, sizeof dir, "%s/.spare", p->tasks_dir);
    if ((mkdir(dir, 0755) < 0 && errno != EEXIST) || rename(task_dir, spare) < 0) return false;
  }
  p->spares[p->n_spares++] = seq;
  return true;
}

bool altar__proc_spare_take(altar_process_t *p, const char *task_dir) {
  while (p->n_spares) {
    char spare[ALTAR_PATH_BUF + 64];
    spare_path(p, p->spares[--p->n_spares], spare, sizeof spare);
    if (rename(spare, task_dir) == 0) return true;
  }
  return false;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)ftw;
  if (flag == FTW_DP) rmdir(path);
  else unlink(path);
  return 0;
}

void altar__proc_rmtree(const char *path) { nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

void altar__proc_spare_free(altar_process_t *p) {
  while (p->n_spares) {
    char spare[ALTAR_PATH_BUF + 64];
    spare_path(p, p->spares[--p->n_spares], spare, sizeof spare);
    altar__proc_rmtree(spare);
  }
}

void altar__proc_spare_sweep(altar_process_t *p) {
  char dir[ALTAR_PATH_BUF + 16];
  snprintf(dir, sizeof dir, "%s/.spare", p->tasks_dir);
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *de;
  while ((de = readdir(d))) {
    char *end = NULL;
    long pid = strtol(de->d_name, &end, 10);
    if (pid <= 0 || !end || *end != '-') continue;
    if (pid == (long)p->spare_pid || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    char path[ALTAR_PATH_BUF + 320];
    snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    altar__proc_rmtree(path);
  }
  closedir(d);
}
