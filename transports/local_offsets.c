/* Committed offsets of the local log: one small file per (group, topic,
 * partition), replaced atomically (temp file, fsync, rename, fsync dir; a
 * batch of them shares the directory's fsync: local_committer.c).
 * File: "altar-offset 1\n<offset>\n<metadata length>\n<metadata bytes>". */
#include "transports/local_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define OFFSET_MAGIC "altar-offset 1\n"
#define OFFSET_FILE_MAX (ALTAR_COMMIT_METADATA_MAX + 128)

char *altar__local_offsets_dir(const local_cfg_t *cfg, const char *group) {
  return altar__local_pathf("%s/groups/%s/offsets", cfg->dir, group);
}

int altar__local_offset_check(int64_t offset, const char *metadata, altar_error_t *err) {
  size_t ml = metadata ? strlen(metadata) : 0;
  if (ml > ALTAR_COMMIT_METADATA_MAX)
    return altar_error_set(err, ALTAR_ETOOBIG, "commit metadata: %zu bytes, more than %d", ml,
                           ALTAR_COMMIT_METADATA_MAX);
  if (offset < 0) return altar_error_set(err, ALTAR_EINVAL, "commit offset: %lld is negative", (long long)offset);
  return 0;
}

int altar__local_offset_write(const local_cfg_t *cfg, const char *group, const char *topic, int32_t partition,
                              int64_t offset, const char *metadata, bool sync_dir, altar_error_t *err) {
  int rc = altar__local_offset_check(offset, metadata, err);
  if (rc) return rc;
  if (!metadata) metadata = "";
  size_t ml = strlen(metadata);
  char *dir = altar__local_offsets_dir(cfg, group);
  if (!dir) return altar_error_set(err, ALTAR_ENOMEM, "commit: out of memory");
  char *final = altar__local_pathf("%s/%s.%d", dir, topic, (int)partition);
  char *tmp = altar__local_pathf("%s/.%s.%d.tmp.%ld", dir, topic, (int)partition, (long)getpid());
  if (!final || !tmp) rc = altar_error_set(err, ALTAR_ENOMEM, "commit: out of memory");
  int fd = -1;
  if (!rc) {
    /* The directory is made by the first commit only, not six mkdirs each time. */
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT && (rc = altar__local_mkdirs(dir, err)) == 0)
      fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  if (!rc) {
    char head[96];
    int hl = snprintf(head, sizeof head, OFFSET_MAGIC "%lld\n%zu\n", (long long)offset, ml);
    if (fd < 0 || altar__local_write_all(fd, head, (size_t)hl) != 0 || altar__local_write_all(fd, metadata, ml) != 0 ||
        fsync(fd) != 0) {
      rc = altar_error_set_retriable(err, ALTAR_EIO, "commit %s/%s/%d: %s", group, topic, (int)partition,
                                     strerror(errno));
      if (fd >= 0) close(fd);
      unlink(tmp);
    } else {
      close(fd);
      if (rename(tmp, final) != 0 || (sync_dir && altar__local_fsync_dir(dir) != 0)) {
        rc = altar_error_set_retriable(err, ALTAR_EIO, "commit %s/%s/%d: rename: %s", group, topic, (int)partition,
                                       strerror(errno));
        unlink(tmp);
      }
    }
  }
  free(final);
  free(tmp);
  free(dir);
  return rc;
}

int altar__local_offset_read(const local_cfg_t *cfg, const char *group, const char *topic, int32_t partition,
                             int64_t *poffset, char **pmetadata, altar_error_t *err) {
  *poffset = ALTAR_OFFSET_INVALID;
  *pmetadata = NULL;
  char *path = altar__local_pathf("%s/groups/%s/offsets/%s.%d", cfg->dir, group, topic, (int)partition);
  if (!path) return altar_error_set(err, ALTAR_ENOMEM, "committed: out of memory");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    free(path);
    if (e == ENOENT) return 0;
    return altar_error_set(err, ALTAR_EIO, "committed %s/%s/%d: %s", group, topic, (int)partition, strerror(e));
  }
  char *buf = malloc(OFFSET_FILE_MAX + 1);
  ssize_t n = buf ? altar__local_pread_full(fd, buf, OFFSET_FILE_MAX + 1, 0) : -1;
  close(fd);
  int rc = 0;
  if (n < 0) {
    rc = altar_error_set(err, ALTAR_EIO, "committed %s: read failed", path);
    goto out;
  }
  if ((size_t)n > OFFSET_FILE_MAX || (size_t)n < strlen(OFFSET_MAGIC) ||
      memcmp(buf, OFFSET_MAGIC, strlen(OFFSET_MAGIC)) != 0)
    goto bad;
  buf[n] = '\0';
  char *p = buf + strlen(OFFSET_MAGIC), *end;
  errno = 0;
  long long off = strtoll(p, &end, 10);
  if (errno || end == p || *end != '\n' || off < 0) goto bad;
  p = end + 1;
  errno = 0;
  unsigned long long ml = strtoull(p, &end, 10);
  if (errno || end == p || *end != '\n' || ml > ALTAR_COMMIT_METADATA_MAX) goto bad;
  p = end + 1;
  if ((size_t)(buf + n - p) != ml || memchr(p, '\0', ml)) goto bad;
  *pmetadata = strndup(p, ml);
  if (!*pmetadata) {
    rc = altar_error_set(err, ALTAR_ENOMEM, "committed: out of memory");
    goto out;
  }
  *poffset = off;
  goto out;
bad:
  rc = altar_error_set(err, ALTAR_EDECODE, "committed offset file %s: malformed", path);
out:
  free(buf);
  free(path);
  return rc;
}
