/* Which live members of a local group consume a topic: read from the
 * members' files (one subscribed topic a line, local_group.c), a file
 * counting only while its owner holds its lock. Read-only: a dead
 * member's file is left for the group's own members to remove. */
#include "transports/local_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#define MEMBER_FILE_MAX 65536

static bool lists_topic(const char *buf, const char *topic) {
  size_t tl = strlen(topic);
  for (const char *s = buf; *s;) {
    const char *nl = strchr(s, '\n');
    size_t l = nl ? (size_t)(nl - s) : strlen(s);
    if (l == tl && !memcmp(s, topic, tl)) return true;
    if (!nl) break;
    s = nl + 1;
  }
  return false;
}

int altar__local_topic_members(altar_transport_t *t, const char *group, const char *topic, int timeout_ms, size_t *pn,
                               altar_error_t *err) {
  (void)timeout_ms;
  *pn = 0;
  int rc = altar_transport_check_name("group", group, err);
  if (!rc) rc = altar_transport_check_name("topic", topic, err);
  if (rc) return rc;
  local_t *l = altar_transport_impl(t);
  char *md = altar__local_pathf("%s/groups/%s/members", l->cfg.dir, group);
  if (!md) return altar_error_set(err, ALTAR_ENOMEM, "topic_members: out of memory");
  DIR *d = opendir(md);
  if (!d) {
    int e = errno;
    free(md);
    if (e == ENOENT) return ALTAR_OK; /* nobody ever joined */
    return altar_error_set(err, ALTAR_EIO, "group %s: members: %s", group, strerror(e));
  }
  char *buf = malloc(MEMBER_FILE_MAX + 1);
  if (!buf) rc = altar_error_set(err, ALTAR_ENOMEM, "topic_members: out of memory");
  struct dirent *de;
  while (!rc && (de = readdir(d)) != NULL) {
    size_t n = strlen(de->d_name);
    if (n <= 7 || strcmp(de->d_name + n - 7, ".member")) continue;
    char *p = altar__local_path(md, de->d_name);
    int fd = p ? open(p, O_RDONLY | O_CLOEXEC) : -1;
    free(p);
    if (fd < 0) continue;
    /* Lockable: its owner is gone. flock locks belong to open files, so a
     * member in this very process still conflicts with this descriptor. */
    bool live = flock(fd, LOCK_SH | LOCK_NB) != 0;
    if (!live) flock(fd, LOCK_UN);
    if (live) {
      ssize_t got = altar__local_pread_full(fd, buf, MEMBER_FILE_MAX, 0);
      buf[got > 0 ? got : 0] = '\0';
      if (lists_topic(buf, topic)) (*pn)++;
    }
    close(fd);
  }
  free(buf);
  closedir(d);
  free(md);
  return rc;
}
