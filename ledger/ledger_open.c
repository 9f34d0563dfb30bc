/* Opening a ledger directory: parents made, a held lock explained. */
#include "ledger/ledger_open.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

int altar__ledger_make_parents(const char *dir, altar_error_t *err) {
  size_t n = strlen(dir);
  char *p = strdup(dir);
  if (!p) return altar_error_set(err, ALTAR_ENOMEM, "ledger: out of memory");
  while (n > 1 && p[n - 1] == '/') p[--n] = '\0';
  char *last = strrchr(p, '/');
  int rc = 0;
  if (last && last != p) {
    *last = '\0';
    for (char *s = p + 1; !rc; s++) {
      bool end = *s == '\0';
      if (*s == '/' || end) {
        *s = '\0';
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
          rc = altar_error_set(err, ALTAR_ELEDGER, "ledger %s: cannot create its parent '%s': %s", dir, p,
                               strerror(errno));
        if (end) break;
        *s = '/';
      }
    }
  }
  free(p);
  return rc;
}

pid_t altar__ledger_lock_holder(const char *dir) {
  char path[4200];
  snprintf(path, sizeof path, "%s/LOCK", dir);
  struct stat st;
  if (stat(path, &st) < 0) return 0;
  FILE *f = fopen("/proc/locks", "r");
  if (!f) return 0;
  char line[256];
  pid_t holder = 0;
  while (!holder && fgets(line, sizeof line, f)) {
    /* "1: POSIX  ADVISORY  WRITE 4242 08:01:1234 0 EOF" */
    long pid;
    unsigned maj, min;
    unsigned long long ino;
    char *q = strstr(line, "ADVISORY");
    if (!q || !strstr(line, "POSIX")) continue;
    q += strlen("ADVISORY");
    char mode[16];
    if (sscanf(q, " %15s %ld %x:%x:%llu", mode, &pid, &maj, &min, &ino) == 5 && ino == (unsigned long long)st.st_ino &&
        maj == major(st.st_dev) && min == minor(st.st_dev) && pid > 0)
      holder = (pid_t)pid;
  }
  fclose(f);
  return holder;
}

/* The command line of pid, spaces for NULs, into buf ("" when unknown). */
static void cmdline_of(pid_t pid, char *buf, size_t size) {
  buf[0] = '\0';
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld/cmdline", (long)pid);
  FILE *f = fopen(path, "r");
  if (!f) return;
  size_t n = fread(buf, 1, size - 1, f);
  fclose(f);
  while (n && buf[n - 1] == '\0') n--;
  for (size_t i = 0; i < n; i++)
    if (buf[i] == '\0' || (unsigned char)buf[i] < 0x20) buf[i] = ' ';
  buf[n] = '\0';
}

int altar__ledger_open_error(const char *dir, const char *dberr, altar_error_t *err) {
  const char *msg = dberr ? dberr : "unknown error";
  bool locked =
      strstr(msg, "LOCK") && (strstr(msg, "Resource temporarily unavailable") ||
                              strstr(msg, "lock hold by current process") || strstr(msg, "No locks available"));
  if (!locked) return altar_error_set(err, ALTAR_ELEDGER, "ledger %s: cannot open: %s", dir, msg);
  if (strstr(msg, "lock hold by current process"))
    return altar_error_set(err, ALTAR_ELEDGER, "ledger %s: already open in this process", dir);
  pid_t pid = altar__ledger_lock_holder(dir);
  if (!pid)
    return altar_error_set(err, ALTAR_ELEDGER,
                           "ledger %s is locked by another process (another reconciler is running, "
                           "or an 'altar ledger'/'--rebuild' on it); stop it first or use another --ledger",
                           dir);
  char cmd[160];
  cmdline_of(pid, cmd, sizeof cmd);
  return altar_error_set(err, ALTAR_ELEDGER,
                         "ledger %s is locked by process %ld%s%s%s (another reconciler is running on it); "
                         "stop it first or use another --ledger",
                         dir, (long)pid, cmd[0] ? " (" : "", cmd, cmd[0] ? ")" : "");
}
