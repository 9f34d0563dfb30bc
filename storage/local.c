/* The "local" storage adapter (also registered as "file"): plain paths and
 * file:// URIs on the local filesystem. Writes go to a temp file in the same
 * directory and are renamed into place, so readers never see half a file. */
#include "altar/plugin/storage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_READ (1024u * 1024u * 1024u) /* read_bytes holds the file in memory */
#define COPY_CHUNK (128 * 1024)

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* A plain path is used as is; file:///p and file://localhost/p become /p with
 * %XX decoded. Caller frees *pout. */
static int to_path(const char *uri, char **pout, altar_error_t *err) {
  *pout = NULL;
  if (!uri || !*uri) return altar_error_set(err, ALTAR_EINVAL, "path: must not be empty");
  if (strncmp(uri, "file://", 7) != 0) {
    if (strstr(uri, "://")) return altar_error_set(err, ALTAR_EINVAL, "'%.200s': not a local path or file:// URI", uri);
    *pout = strdup(uri);
    return *pout ? ALTAR_OK : altar_error_set(err, ALTAR_ENOMEM, "path: out of memory");
  }
  const char *p = uri + 7;
  if (strncmp(p, "localhost/", 10) == 0) p += 9;
  if (*p != '/')
    return altar_error_set(err, ALTAR_EINVAL, "'%.200s': a file:// URI must name a local absolute path", uri);
  size_t n = strlen(p);
  char *out = malloc(n + 1);
  if (!out) return altar_error_set(err, ALTAR_ENOMEM, "path: out of memory");
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    if (p[i] == '%') {
      int hi = i + 2 < n ? hexval(p[i + 1]) : -1;
      int lo = hi >= 0 ? hexval(p[i + 2]) : -1;
      if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
        free(out);
        return altar_error_set(err, ALTAR_EINVAL, "'%.200s': bad %%-escape", uri);
      }
      out[o++] = (char)(hi * 16 + lo);
      i += 2;
    } else {
      out[o++] = p[i];
    }
  }
  out[o] = '\0';
  *pout = out;
  return ALTAR_OK;
}

/* mkdir -p. */
static int mkdirs_path(const char *path, altar_error_t *err) {
  char *p = strdup(path);
  if (!p) return altar_error_set(err, ALTAR_ENOMEM, "mkdirs: out of memory");
  size_t n = strlen(p);
  while (n > 1 && p[n - 1] == '/') p[--n] = '\0';
  int rc = ALTAR_OK;
  for (char *s = p + 1;; s++) {
    bool last = *s == '\0';
    if (*s == '/' || last) {
      char save = *s;
      *s = '\0';
      if (mkdir(p, 0777) != 0 && errno != EEXIST) {
        rc = altar_error_set(err, ALTAR_EIO, "%.300s: cannot create directory: %s", p, strerror(errno));
        break;
      }
      *s = save;
    }
    if (last) break;
  }
  struct stat st;
  if (!rc && (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)))
    rc = altar_error_set(err, ALTAR_EEXIST, "%.300s: exists and is not a directory", p);
  free(p);
  return rc;
}

/* Creates the parent directory of path when missing. */
static int ensure_parent(const char *path, altar_error_t *err) {
  const char *slash = strrchr(path, '/');
  if (!slash || slash == path) return ALTAR_OK;
  char *dir = strndup(path, (size_t)(slash - path));
  if (!dir) return altar_error_set(err, ALTAR_ENOMEM, "path: out of memory");
  struct stat st;
  int rc = stat(dir, &st) == 0 && S_ISDIR(st.st_mode) ? ALTAR_OK : mkdirs_path(dir, err);
  free(dir);
  return rc;
}

/* Opens a fresh temp file beside path; *ptmp is freed by the caller. */
static int open_temp_beside(const char *path, char **ptmp, int *pfd, altar_error_t *err) {
  static unsigned counter;
  size_t n = strlen(path) + 64;
  char *tmp = malloc(n);
  if (!tmp) return altar_error_set(err, ALTAR_ENOMEM, "path: out of memory");
  const char *slash = strrchr(path, '/');
  int dirlen = slash ? (int)(slash - path) + 1 : 0;
  for (int tries = 0; tries < 100; tries++) {
    snprintf(tmp, n, "%.*s.%s.altar-tmp.%ld.%u", dirlen, path, path + dirlen, (long)getpid(),
             __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      *ptmp = tmp;
      *pfd = fd;
      return ALTAR_OK;
    }
    if (errno != EEXIST) break;
  }
  int e = errno;
  free(tmp);
  return altar_error_set(err, e == ENOENT ? ALTAR_ENOTFOUND : ALTAR_EIO, "%.300s: cannot create: %s", path,
                         strerror(e));
}

static int write_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

/* Closes fd and renames tmp onto path, or removes tmp. */
static int finish_temp(int fd, char *tmp, const char *path, int rc, altar_error_t *err) {
  if (close(fd) != 0 && !rc) rc = altar_error_set(err, ALTAR_EIO, "%.300s: close failed: %s", path, strerror(errno));
  if (!rc && rename(tmp, path) != 0)
    rc = altar_error_set(err, ALTAR_EIO, "%.300s: cannot rename into place: %s", path, strerror(errno));
  if (rc) unlink(tmp);
  free(tmp);
  return rc;
}

static int local_read_bytes(altar_storage_t *s, const char *uri, altar_buf_t *out, altar_error_t *err) {
  (void)s;
  char *path;
  int rc = to_path(uri, &path, err);
  if (rc) return rc;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    rc = altar_error_set(err, errno == ENOENT || errno == ENOTDIR ? ALTAR_ENOTFOUND : ALTAR_EIO,
                         "%.300s: cannot open: %s", path, strerror(errno));
    free(path);
    return rc;
  }
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    rc = altar_error_set(err, ALTAR_EINVAL, "%.300s: is a directory", path);
  } else if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uintmax_t)st.st_size > MAX_READ) {
    rc = altar_error_set(err, ALTAR_ETOOBIG, "%.300s: %lld bytes, more than %u", path, (long long)st.st_size, MAX_READ);
  } else {
    char *chunk = malloc(COPY_CHUNK);
    if (!chunk) rc = altar_error_set(err, ALTAR_ENOMEM, "%.300s: out of memory", path);
    size_t start = out->len;
    while (!rc) {
      ssize_t n = read(fd, chunk, COPY_CHUNK);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) rc = altar_error_set(err, ALTAR_EIO, "%.300s: read failed: %s", path, strerror(errno));
      if (n <= 0) break;
      if (out->len - start + (size_t)n > MAX_READ)
        rc = altar_error_set(err, ALTAR_ETOOBIG, "%.300s: more than %u bytes", path, MAX_READ);
      else if (altar_buf_append(out, chunk, (size_t)n))
        rc = altar_error_set(err, ALTAR_ENOMEM, "%.300s: out of memory", path);
    }
    free(chunk);
  }
  close(fd);
  free(path);
  return rc;
}

static int local_exists(altar_storage_t *s, const char *uri, bool *pexists, altar_error_t *err) {
  (void)s;
  *pexists = false;
  char *path;
  int rc = to_path(uri, &path, err);
  if (rc) return rc;
  struct stat st;
  if (stat(path, &st) == 0) *pexists = true;
  else if (errno != ENOENT && errno != ENOTDIR)
    rc = altar_error_set(err, ALTAR_EIO, "%.300s: cannot stat: %s", path, strerror(errno));
  free(path);
  return rc;
}

static int local_write_bytes(altar_storage_t *s, const char *uri, const void *data, size_t len, altar_error_t *err) {
  (void)s;
  char *path, *tmp;
  int fd = -1;
  int rc = to_path(uri, &path, err);
  if (rc) return rc;
  if (!(rc = ensure_parent(path, err)) && !(rc = open_temp_beside(path, &tmp, &fd, err))) {
    if (len && write_all(fd, data, len) != 0)
      rc = altar_error_set(err, ALTAR_EIO, "%.300s: write failed: %s", path, strerror(errno));
    rc = finish_temp(fd, tmp, path, rc, err);
  }
  free(path);
  return rc;
}

static int local_mkdirs(altar_storage_t *s, const char *uri, altar_error_t *err) {
  (void)s;
  char *path;
  int rc = to_path(uri, &path, err);
  if (rc) return rc;
  rc = mkdirs_path(path, err);
  free(path);
  return rc;
}

/* Streams src into dest like cp -p: mode and times kept. A destination that
 * is a directory receives the file under its own name; a destination that
 * is the source itself (same device and inode) is left alone. */
static int local_upload(altar_storage_t *s, const char *local_path, const char *dest_uri, altar_error_t *err) {
  (void)s;
  char *src = NULL, *dest = NULL, *tmp = NULL;
  int in = -1, fd = -1;
  char *chunk = NULL;
  int rc = to_path(local_path, &src, err);
  if (!rc) rc = to_path(dest_uri, &dest, err);
  if (rc) goto out;
  struct stat sst, dst;
  in = open(src, O_RDONLY | O_CLOEXEC);
  if (in < 0 || fstat(in, &sst) != 0) {
    rc = altar_error_set(err, errno == ENOENT ? ALTAR_ENOTFOUND : ALTAR_EIO, "%.300s: cannot open: %s", src,
                         strerror(errno));
    goto out;
  }
  if (!S_ISREG(sst.st_mode)) {
    rc = altar_error_set(err, ALTAR_EINVAL, "%.300s: not a regular file", src);
    goto out;
  }
  if (stat(dest, &dst) == 0 && S_ISDIR(dst.st_mode)) {
    const char *base = strrchr(src, '/');
    base = base ? base + 1 : src;
    size_t n = strlen(dest) + strlen(base) + 2;
    char *joined = malloc(n);
    if (!joined) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "path: out of memory");
      goto out;
    }
    snprintf(joined, n, "%s/%s", dest, base);
    free(dest);
    dest = joined;
  }
  if (stat(dest, &dst) == 0 && dst.st_dev == sst.st_dev && dst.st_ino == sst.st_ino) goto out;
  if ((rc = ensure_parent(dest, err)) || (rc = open_temp_beside(dest, &tmp, &fd, err))) goto out;
  chunk = malloc(COPY_CHUNK);
  if (!chunk) rc = altar_error_set(err, ALTAR_ENOMEM, "copy: out of memory");
  while (!rc) {
    ssize_t n = read(in, chunk, COPY_CHUNK);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) rc = altar_error_set(err, ALTAR_EIO, "%.300s: read failed: %s", src, strerror(errno));
    if (n <= 0) break;
    if (write_all(fd, chunk, (size_t)n) != 0)
      rc = altar_error_set(err, ALTAR_EIO, "%.300s: write failed: %s", dest, strerror(errno));
  }
  if (!rc) {
    struct timespec times[2] = {sst.st_atim, sst.st_mtim};
    (void)fchmod(fd, sst.st_mode & 07777);
    (void)futimens(fd, times);
  }
  rc = finish_temp(fd, tmp, dest, rc, err);
  fd = -1;
out:
  if (in >= 0) close(in);
  free(chunk);
  free(src);
  free(dest);
  return rc;
}

static int local_as_local_file(altar_storage_t *s, const char *uri, altar_local_file_t *out, altar_error_t *err) {
  (void)s;
  out->path = NULL;
  out->release = NULL; /* the file is ours to read, not to delete */
  char *path;
  int rc = to_path(uri, &path, err);
  if (rc) return rc;
  struct stat st;
  if (stat(path, &st) != 0) {
    rc = altar_error_set(err, errno == ENOENT || errno == ENOTDIR ? ALTAR_ENOTFOUND : ALTAR_EIO, "%.300s: %s", path,
                         strerror(errno));
    free(path);
    return rc;
  }
  out->path = path;
  return ALTAR_OK;
}

static const altar_plugin_key_t local_keys[] = {ALTAR_PLUGIN_KEYS_END}; /* it takes none */

/* A file, or an empty directory (what an object store's last key under a
 * prefix leaves behind here). Already gone is success. */
static int local_delete(altar_storage_t *s, const char *uri, altar_error_t *err) {
  (void)s;
  char *path;
  int rc = to_path(uri, &path, err);
  if (rc) return rc;
  size_t n = strlen(path);
  while (n > 1 && path[n - 1] == '/') path[--n] = '\0';
  if (unlink(path) != 0 && errno != ENOENT && errno != ENOTDIR) {
    if ((errno == EISDIR || errno == EPERM) && rmdir(path) == 0) {
      /* an empty directory */
    } else if (errno != ENOENT) {
      rc = altar_error_set(err, ALTAR_EIO, "%.300s: cannot delete: %s", path, strerror(errno));
    }
  }
  free(path);
  return rc;
}

/* ---- listing ---- */

/* The files found under a listing's base: path below it, size. */
typedef struct found_file {
  char *rel;
  unsigned long long size;
} found_file_t;
typedef struct found {
  found_file_t *v;
  size_t n, cap;
} found_t;

#define LIST_MAX_DEPTH 64

static int found_add(found_t *f, char *rel, unsigned long long size) {
  if (f->n == f->cap) {
    size_t cap = f->cap ? f->cap * 2 : 64;
    found_file_t *nv = realloc(f->v, cap * sizeof *nv);
    if (!nv) return ALTAR_ENOMEM;
    f->v = nv;
    f->cap = cap;
  }
  f->v[f->n++] = (found_file_t){rel, size};
  return ALTAR_OK;
}

/* Adds every regular file under dir (rel: its path below the base, "" or
 * ending in '/') whose relative path starts with want (the prefix's part
 * below the base); directories that cannot lead there are not entered. A
 * write's temp file (".NAME.altar-tmp.*") is not yet a file and is left out. */
static int walk(const char *dir, const char *rel, const char *want, int depth, found_t *f, altar_error_t *err) {
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT || errno == ENOTDIR) return ALTAR_OK;
    return altar_error_set(err, ALTAR_EIO, "%.300s: cannot list: %s", dir, strerror(errno));
  }
  int rc = ALTAR_OK;
  struct dirent *e;
  size_t rl = strlen(rel), wl = strlen(want);
  while (!rc && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (e->d_name[0] == '.' && strstr(e->d_name, ".altar-tmp.")) continue;
    size_t nl = strlen(e->d_name);
    size_t rsz = rl + nl + 2, psz = strlen(dir) + nl + 2;
    char *r = malloc(rsz), *p = malloc(psz);
    if (!r || !p) {
      free(r);
      free(p);
      rc = altar_error_set(err, ALTAR_ENOMEM, "list: out of memory");
      break;
    }
    snprintf(r, rsz, "%s%s", rel, e->d_name);
    snprintf(p, psz, "%s/%s", dir, e->d_name);
    size_t cl = rl + nl < wl ? rl + nl : wl; /* the part both have */
    struct stat st;
    if (strncmp(r, want, cl) == 0 && stat(p, &st) == 0) {
      if (S_ISDIR(st.st_mode) && depth < LIST_MAX_DEPTH) {
        r[rl + nl] = '/';
        r[rl + nl + 1] = '\0';
        rc = walk(p, r, want, depth + 1, f, err);
      } else if (S_ISREG(st.st_mode) && rl + nl >= wl) {
        if (found_add(f, r, (unsigned long long)st.st_size))
          rc = altar_error_set(err, ALTAR_ENOMEM, "list: out of memory");
        else r = NULL;
      }
    }
    free(r);
    free(p);
  }
  closedir(d);
  return rc;
}

static int cmp_found(const void *a, const void *b) {
  return strcmp(((const found_file_t *)a)->rel, ((const found_file_t *)b)->rel);
}

/* Every file whose path starts with prefix, in byte order of their paths
 * (as an object store lists keys), each named in the form of the prefix:
 * a plain path, or a file:// URI with the part below it %-escaped. */
static int local_list(altar_storage_t *s, const char *prefix, altar_storage_list_fn fn, void *ud, altar_error_t *err) {
  (void)s;
  char *path;
  int rc = to_path(prefix, &path, err);
  if (rc) return rc;
  /* The base: the prefix up to its last '/', in both forms. */
  const char *ps = strrchr(path, '/'), *us = strrchr(prefix, '/');
  char *base = ps ? strndup(path, (size_t)(ps - path) + (ps == path)) : strdup(".");
  const char *want = ps ? ps + 1 : path;
  size_t ubase = us ? (size_t)(us - prefix) + 1 : 0;
  bool uri = strncmp(prefix, "file://", 7) == 0;
  found_t f = {0};
  if (!base) rc = altar_error_set(err, ALTAR_ENOMEM, "list: out of memory");
  if (!rc) rc = walk(base, "", want, 0, &f, err);
  if (!rc && f.n) qsort(f.v, f.n, sizeof *f.v, cmp_found);
  altar_buf_t name = {0};
  for (size_t i = 0; !rc && i < f.n; i++) {
    altar_buf_reset(&name);
    bool bad = altar_buf_append(&name, prefix, ubase) != 0;
    for (const char *c = f.v[i].rel; !bad && *c; c++) {
      bool plain = !uri || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                   *c == '-' || *c == '_' || *c == '.' || *c == '~' || *c == '/';
      char esc[4];
      snprintf(esc, sizeof esc, "%%%02X", (unsigned)(unsigned char)*c);
      bad = plain ? altar_buf_append(&name, c, 1) != 0 : altar_buf_append(&name, esc, 3) != 0;
    }
    if (bad || altar_buf_append(&name, "", 1)) {
      rc = altar_error_set(err, ALTAR_ENOMEM, "list: out of memory");
      break;
    }
    altar_storage_entry_t e = {.path = (const char *)name.data, .size = f.v[i].size};
    rc = fn(&e, ud);
  }
  altar_buf_free(&name);
  for (size_t i = 0; i < f.n; i++) free(f.v[i].rel);
  free(f.v);
  free(base);
  free(path);
  return rc;
}

const altar_storage_ops_t altar_storage_local_ops = {
    .name = "local",
    .caps = ALTAR_STORAGE_CAP_READ | ALTAR_STORAGE_CAP_WRITE | ALTAR_STORAGE_CAP_LOCAL | ALTAR_STORAGE_CAP_LIST |
            ALTAR_STORAGE_CAP_DELETE,
    .config_keys = local_keys,
    .read_bytes = local_read_bytes,
    .exists = local_exists,
    .write_bytes = local_write_bytes,
    .mkdirs = local_mkdirs,
    .upload = local_upload,
    .copy_from_local = local_upload,
    .as_local_file = local_as_local_file,
    .list = local_list,
    .delete_file = local_delete,
};
