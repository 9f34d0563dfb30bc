/* Resident memory and disk use (altar/footprint.h). */
#include "altar/footprint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

uint64_t altar_footprint_rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long long size = 0, resident = 0;
  int got = f ? fscanf(f, "%llu %llu", &size, &resident) : 0;
  if (f) fclose(f);
  long page = sysconf(_SC_PAGESIZE);
  return got == 2 && page > 0 ? (uint64_t)resident * (uint64_t)page : 0;
}

/* Depth of the trees we walk is small (data_root/logs/<key>/stdout); a
 * deeper tree is counted down to this depth and marked truncated. */
#define DU_MAX_DEPTH 32

static void walk(int dfd, dev_t dev, int depth, size_t max, altar_du_t *du) {
  DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return;
  }
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    if (du->entries >= max) {
      du->truncated = true;
      break;
    }
    struct stat st;
    if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) continue; /* gone meanwhile */
    du->entries++;
    du->bytes += (uint64_t)st.st_blocks * 512;
    if (!S_ISDIR(st.st_mode) || st.st_dev != dev) continue;
    if (depth >= DU_MAX_DEPTH) {
      du->truncated = true;
      continue;
    }
    int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) walk(fd, dev, depth + 1, max, du);
  }
  closedir(d);
}

int altar_footprint_du(const char *path, size_t max_entries, altar_du_t *pout, altar_error_t *err) {
  *pout = (altar_du_t){0};
  struct stat st;
  if (lstat(path, &st) < 0)
    return altar_error_set(err, errno == ENOENT ? ALTAR_ENOTFOUND : ALTAR_EIO, "%s: %s", path, strerror(errno));
  pout->entries = 1;
  pout->bytes = (uint64_t)st.st_blocks * 512;
  if (!S_ISDIR(st.st_mode)) return ALTAR_OK;
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return altar_error_set(err, ALTAR_EIO, "%s: %s", path, strerror(errno));
  walk(fd, st.st_dev, 1, max_entries ? max_entries : 1, pout);
  return ALTAR_OK;
}
