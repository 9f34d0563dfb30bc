/* Topic metadata of the local log: a topic is a directory of partition
 * directories 0..N-1, created whole in tmp/ and renamed into topics/. */
#include "transports/local_int.h"
#include "altar/grow.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void rm_tree(const char *path);

/* Staging left by a process that died mid-create: anything in tmp/ older
 * than an hour (a live create takes milliseconds). */
static void sweep_tmp(const char *tmp) {
  DIR *d = opendir(tmp);
  if (!d) return;
  int64_t cutoff = altar_wall_ms() - 3600 * 1000;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    char *p = altar__local_path(tmp, de->d_name);
    struct stat st;
    if (p && lstat(p, &st) == 0 && (int64_t)st.st_mtime * 1000 < cutoff) {
      if (S_ISDIR(st.st_mode)) rm_tree(p);
      else unlink(p);
    }
    free(p);
  }
  closedir(d);
}

int altar__local_dirs_init(const local_cfg_t *cfg, altar_error_t *err) {
  static const char *const subs[] = {"topics", "groups", "tmp"};
  int rc = altar__local_mkdirs(cfg->dir, err);
  for (size_t i = 0; !rc && i < sizeof subs / sizeof subs[0]; i++) {
    char *p = altar__local_path(cfg->dir, subs[i]);
    if (!p) return altar_error_set(err, ALTAR_ENOMEM, "dir: out of memory");
    rc = altar__local_mkdirs(p, err);
    if (!rc && i == 2) sweep_tmp(p);
    free(p);
  }
  return rc;
}

char *altar__local_part_dir(const char *root, const char *topic, int32_t partition) {
  return altar__local_pathf("%s/topics/%s/%d", root, topic, (int)partition);
}

static void rm_tree(const char *path) {
  DIR *d = opendir(path);
  if (d) {
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
      char *p = altar__local_path(path, de->d_name);
      if (!p) continue;
      struct stat st;
      if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) rm_tree(p);
      else unlink(p);
      free(p);
    }
    closedir(d);
  }
  rmdir(path);
}

int altar__local_topic_create(altar_transport_t *t, const local_cfg_t *cfg, const char *topic, int32_t partitions,
                              const local_topic_conf_t *conf, altar_error_t *err) {
  (void)t;
  int rc = altar_transport_check_name("topic", topic, err);
  if (rc) return rc;
  if (partitions < 1 || partitions > 10000)
    return altar_error_set(err, ALTAR_EINVAL, "partitions: %d outside [1, 10000]", (int)partitions);
  char *final = altar__local_pathf("%s/topics/%s", cfg->dir, topic);
  char *stage = altar__local_pathf("%s/tmp/%s.%ld.%lld", cfg->dir, topic, (long)getpid(), (long long)altar_mono_ms());
  char *topics = altar__local_path(cfg->dir, "topics");
  if (!final || !stage || !topics) {
    rc = altar_error_set(err, ALTAR_ENOMEM, "topic %s: out of memory", topic);
    goto out;
  }
  if (access(final, F_OK) == 0) {
    rc = altar_error_set(err, ALTAR_EEXIST, "topic %s: already exists", topic);
    goto out;
  }
  if (mkdir(stage, 0755) != 0) {
    rc = altar_error_set(err, ALTAR_EIO, "topic %s: staging dir: %s", topic, strerror(errno));
    goto out;
  }
  for (int32_t p = 0; p < partitions && !rc; p++) {
    char *pd = altar__local_pathf("%s/%d", stage, (int)p);
    char nm[LSEG_NAME_LEN + 1];
    altar__local_seg_name(nm, 0);
    char *seg = pd ? altar__local_path(pd, nm) : NULL;
    if (!pd || !seg) rc = altar_error_set(err, ALTAR_ENOMEM, "topic %s: out of memory", topic);
    else if (mkdir(pd, 0755) != 0)
      rc = altar_error_set(err, ALTAR_EIO, "topic %s: partition dir: %s", topic, strerror(errno));
    else {
      int fd = open(seg, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) rc = altar_error_set(err, ALTAR_EIO, "topic %s: segment: %s", topic, strerror(errno));
      else close(fd);
      if (!rc && cfg->fsync_policy != LOCAL_FSYNC_NEVER) altar__local_fsync_dir(pd);
    }
    free(seg);
    free(pd);
  }
  if (!rc && conf) rc = altar__local_topic_conf_write(stage, conf, cfg->fsync_policy != LOCAL_FSYNC_NEVER, err);
  if (!rc && cfg->fsync_policy != LOCAL_FSYNC_NEVER) altar__local_fsync_dir(stage);
  if (!rc && rename(stage, final) != 0) {
    if (errno == EEXIST || errno == ENOTEMPTY)
      rc = altar_error_set(err, ALTAR_EEXIST, "topic %s: already exists", topic);
    else rc = altar_error_set(err, ALTAR_EIO, "topic %s: rename: %s", topic, strerror(errno));
  }
  if (rc) rm_tree(stage);
  else if (cfg->fsync_policy != LOCAL_FSYNC_NEVER) altar__local_fsync_dir(topics);
out:
  free(final);
  free(stage);
  free(topics);
  return rc;
}

static bool parse_partition(const char *s, int32_t *pp) {
  size_t n = strlen(s);
  if (n == 0 || n > 5 || (n > 1 && s[0] == '0')) return false;
  int v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *pp = v;
  return true;
}

int altar__local_topic_partitions(altar_transport_t *t, const local_cfg_t *cfg, const char *topic, int32_t *pn,
                                  altar_error_t *err) {
  *pn = 0;
  int rc = altar_transport_check_name("topic", topic, err);
  if (rc) return rc;
  char *td = altar__local_pathf("%s/topics/%s", cfg->dir, topic);
  if (!td) return altar_error_set(err, ALTAR_ENOMEM, "topic %s: out of memory", topic);
  DIR *d = opendir(td);
  if (!d) {
    int e = errno;
    free(td);
    if (e == ENOENT) return altar_error_set(err, ALTAR_ENOTFOUND, "topic %s: does not exist", topic);
    return altar_error_set(err, ALTAR_EIO, "topic %s: %s", topic, strerror(e));
  }
  int32_t max = -1, count = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") || !strcmp(de->d_name, LOCAL_TOPIC_CONF)) continue;
    int32_t p;
    if (!parse_partition(de->d_name, &p)) {
      altar_transport_log(t, 7, "topic dir %s: stray entry '%s' ignored", td, de->d_name);
      continue;
    }
    count++;
    if (p > max) max = p;
  }
  closedir(d);
  if (count != max + 1) {
    rc = altar_error_set(err, ALTAR_EDECODE, "topic %s: partition dirs are not 0..%d", topic, (int)max);
    free(td);
    return rc;
  }
  free(td);
  *pn = count;
  return 0;
}

void altar__local_names_free(char **names, size_t n) {
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int altar__local_topic_names(altar_transport_t *t, const local_cfg_t *cfg, char ***pnames, size_t *pn,
                             altar_error_t *err) {
  *pnames = NULL;
  *pn = 0;
  char *td = altar__local_path(cfg->dir, "topics");
  if (!td) return altar_error_set(err, ALTAR_ENOMEM, "topics: out of memory");
  DIR *d = opendir(td);
  if (!d) {
    int e = errno;
    free(td);
    return altar_error_set(err, ALTAR_EIO, "topics dir: %s", strerror(e));
  }
  char **names = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    if (altar_transport_check_name("topic", de->d_name, NULL) != 0) {
      altar_transport_log(t, 4, "topics dir %s: stray entry '%s' ignored", td, de->d_name);
      continue;
    }
    if (ALTAR_GROW(names, cap, n + 1)) {
      rc = ALTAR_ENOMEM;
      break;
    }
    if (!(names[n] = strdup(de->d_name))) {
      rc = ALTAR_ENOMEM;
      break;
    }
    n++;
  }
  closedir(d);
  free(td);
  if (rc) {
    altar__local_names_free(names, n);
    return altar_error_set(err, rc, "topics: out of memory");
  }
  if (n) qsort(names, n, sizeof *names, cmp_str);
  *pnames = names;
  *pn = n;
  return 0;
}

int altar__local_list_topics(altar_transport_t *t, const local_cfg_t *cfg, const char *topic,
                             altar_topic_list_t **plist, altar_error_t *err) {
  *plist = NULL;
  char **names = NULL;
  size_t n = 0;
  int rc;
  if (topic) {
    int32_t np;
    rc = altar__local_topic_partitions(t, cfg, topic, &np, err);
    if (rc) return rc;
    names = malloc(sizeof *names);
    if (!names || !(names[0] = strdup(topic))) {
      free(names);
      return altar_error_set(err, ALTAR_ENOMEM, "topics: out of memory");
    }
    n = 1;
  } else {
    rc = altar__local_topic_names(t, cfg, &names, &n, err);
    if (rc) return rc;
  }
  altar_topic_list_t *l = calloc(1, sizeof *l);
  if (!l || (n && !(l->topics = calloc(n, sizeof *l->topics)))) {
    free(l);
    altar__local_names_free(names, n);
    return altar_error_set(err, ALTAR_ENOMEM, "topics: out of memory");
  }
  for (size_t i = 0; i < n && !rc; i++) {
    int32_t np = 0;
    rc = altar__local_topic_partitions(t, cfg, names[i], &np, err);
    if (rc == ALTAR_ENOTFOUND && !topic) { /* deleted meanwhile */
      rc = 0;
      continue;
    }
    if (rc) break;
    altar_topic_info_t *ti = &l->topics[l->n_topics];
    ti->name = names[i];
    names[i] = NULL;
    l->n_topics++;
    ti->partitions = calloc((size_t)np, sizeof *ti->partitions);
    if (!ti->partitions) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "topics: out of memory");
      break;
    }
    for (int32_t p = 0; p < np && !rc; p++) {
      char *pd = altar__local_part_dir(cfg->dir, ti->name, p);
      if (!pd) {
        rc = altar_error_set(err, ALTAR_ENOMEM, "topics: out of memory");
        break;
      }
      int64_t b = 0, e = 0;
      for (int tries = 0; tries < 5; tries++) {
        rc = altar__local_part_offsets(t, cfg, pd, &b, &e, err);
        if (rc != ALTAR_EAGAIN) break;
      }
      free(pd);
      ti->partitions[p] = (altar_partition_info_t){p, b, e};
      ti->n_partitions++;
    }
  }
  altar__local_names_free(names, n);
  if (rc) {
    altar_topic_list_free(l);
    return rc;
  }
  *plist = l;
  return 0;
}
