/* Whether a partition's segment files changed since its appender last listed
 * them. Under the append lock, an appender has to know which segment is the
 * newest, since another process may have rolled a new one; listing the
 * directory at every append cost an opendir, two getdents and a sort per
 * flush (about a tenth of the reconciler's CPU on one-shard groups).
 *
 * An inotify watch on the directory (one inotify descriptor per producer)
 * reports every segment created, renamed or removed. The kernel queues the
 * event inside the creating process's system call, before it releases the
 * append lock, so once we hold the lock every change made under it by anyone
 * is already in our queue: an empty queue means the listing still holds.
 * Nothing changes on disk or between processes of different versions. When
 * inotify is unavailable (a file system without it, the limits reached) or
 * its queue overflowed, the appender lists, as before. */
#include "transports/local_int.h"
#include "altar/grow.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <unistd.h>

#define SEGWATCH_MASK (IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF)

void altar__local_segwatch_init(lsegwatch_t *w) {
  w->open = false;
  w->fd = -1;
  w->regs = NULL;
  w->n_regs = w->cap_regs = 0;
}

void altar__local_segwatch_close(lsegwatch_t *w) {
  for (size_t i = 0; i < w->n_regs; i++) w->regs[i].a->wd = -1;
  if (w->fd >= 0) close(w->fd);
  free(w->regs);
  altar__local_segwatch_init(w);
}

static void unregister(lsegwatch_t *w, size_t i) {
  w->regs[i].a->wd = -1;
  w->regs[i].a->listed = false;
  w->regs[i] = w->regs[--w->n_regs];
}

static void mark_all(lsegwatch_t *w) {
  for (size_t i = 0; i < w->n_regs; i++) w->regs[i].a->listed = false;
}

static void note_event(lsegwatch_t *w, const struct inotify_event *ev) {
  if (ev->mask & IN_Q_OVERFLOW) {
    mark_all(w); /* events were lost: anything may have changed */
    return;
  }
  for (size_t i = 0; i < w->n_regs;) {
    if (w->regs[i].wd == ev->wd) {
      if (ev->mask & IN_IGNORED) {
        unregister(w, i); /* the directory went: watched again at the next lock */
        continue;
      }
      w->regs[i].a->listed = false;
    }
    i++;
  }
}

static void drain(lsegwatch_t *w) {
  char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
  for (;;) {
    ssize_t got = read(w->fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (got < 0 && errno != EAGAIN) mark_all(w); /* cannot tell: list */
      return;
    }
    for (ssize_t off = 0; off + (ssize_t)sizeof(struct inotify_event) <= got;) {
      const struct inotify_event *ev = (const struct inotify_event *)(buf + off);
      note_event(w, ev);
      off += (ssize_t)sizeof *ev + ev->len;
    }
  }
}

static void start_watch(lsegwatch_t *w, lappender_t *a) {
  if (ALTAR_GROW(w->regs, w->cap_regs, w->n_regs + 1)) return;
  int wd = inotify_add_watch(w->fd, a->dir, SEGWATCH_MASK);
  if (wd < 0) return;
  w->regs[w->n_regs].wd = wd;
  w->regs[w->n_regs].a = a;
  w->n_regs++;
  a->wd = wd;
}

bool altar__local_segwatch_unchanged(lappender_t *a) {
  lsegwatch_t *w = a->segwatch;
  if (!w) return false;
  if (!w->open) {
    w->open = true;
    w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  }
  if (w->fd < 0) return false;
  drain(w);
  if (a->wd < 0) {
    start_watch(w, a); /* before the listing, so nothing after it goes unheard */
    return false;
  }
  return a->listed;
}

void altar__local_segwatch_listed(lappender_t *a) { a->listed = a->wd >= 0; }

void altar__local_segwatch_forget(lappender_t *a) {
  lsegwatch_t *w = a->segwatch;
  if (!w) return;
  for (size_t i = 0; i < w->n_regs; i++)
    if (w->regs[i].a == a) {
      /* The directory stays watched if another appender shares the wd. */
      bool shared = false;
      for (size_t j = 0; j < w->n_regs; j++) shared |= j != i && w->regs[j].wd == w->regs[i].wd;
      if (!shared && w->fd >= 0) inotify_rm_watch(w->fd, w->regs[i].wd);
      unregister(w, i);
      return;
    }
}
