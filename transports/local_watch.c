/* Change notification for the local consumer: an inotify watch on the
 * directory of every partition it reads. A pass then reads only the
 * partitions something was written to since, and an idle consumer sleeps in
 * poll() until a write wakes it, instead of napping and re-reading every
 * partition: with 32 partitions a topic, the re-reading cost the reconciler
 * more than its records did, and the naps added up to 32 ms to every hop.
 *
 * Writers need not know: appends, segment rolls, truncations of a torn tail
 * and retention all change the partition's directory, which is what the
 * kernel reports. Every partition still counts as changed once per
 * LWATCH_SWEEP_MS, and always when inotify is unavailable (a file system
 * without it, the watch limit reached), so nothing depends on an event
 * arriving. */
#include "transports/local_int.h"

#include <errno.h>
#include <stdbool.h>
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#define LWATCH_SWEEP_MS 2000
#define LWATCH_MASK (IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF)

static void mark_all(lreader_t *const *rs, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (rs[i]) altar__local_reader_created(rs[i]); /* nothing heard: anything may have happened */
}

void altar__local_watch_close(local_consumer_t *c) {
  if (c->watch_open && c->watch_fd >= 0) close(c->watch_fd);
  c->watch_open = false;
  c->watch_fd = -1;
}

bool altar__local_watch_active(const local_consumer_t *c) { return c->watch_open && c->watch_fd >= 0; }

/* Marks the readers named by pending events; watches readers not watched yet
 * (each starts out changed). rs may hold NULL entries. */
void altar__local_watch_collect(local_consumer_t *c, lreader_t *const *rs, size_t n) {
  if (!c->watch_open) {
    c->watch_open = true;
    c->watch_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    c->next_sweep_ms = altar_mono_ms() + LWATCH_SWEEP_MS;
  }
  if (c->watch_fd < 0) {
    mark_all(rs, n);
    return;
  }
  int64_t now = altar_mono_ms();
  if (now >= c->next_sweep_ms) {
    mark_all(rs, n);
    c->next_sweep_ms = now + LWATCH_SWEEP_MS;
  }
  for (size_t i = 0; i < n; i++) {
    lreader_t *r = rs[i];
    if (!r || r->watch >= 0) continue;
    /* A directory not there yet is read on every pass until it is. */
    r->watch = inotify_add_watch(c->watch_fd, r->dir, LWATCH_MASK);
    altar__local_reader_created(r); /* what happened unwatched is unknown */
  }
  char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
  for (;;) {
    ssize_t got = read(c->watch_fd, buf, sizeof buf);
    if (got <= 0) {
      if (got < 0 && errno == EINTR) continue;
      break; /* EAGAIN: drained */
    }
    for (char *p = buf; p < buf + got;) {
      const struct inotify_event *ev = (const struct inotify_event *)p;
      p += sizeof *ev + ev->len;
      if (ev->mask & IN_Q_OVERFLOW) {
        mark_all(rs, n);
        continue;
      }
      bool mine = false;
      for (size_t i = 0; i < n; i++) {
        if (!rs[i] || rs[i]->watch != ev->wd) continue;
        mine = true;
        if (ev->mask & (IN_CREATE | IN_MOVED_TO | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF))
          altar__local_reader_created(rs[i]);
        else altar__local_reader_changed(rs[i]);
        /* The directory is gone (or moved): watch it anew when it is back. */
        if (ev->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) rs[i]->watch = -1;
      }
      /* A partition no longer read (revoked): stop hearing about it. */
      if (!mine && !(ev->mask & IN_IGNORED)) inotify_rm_watch(c->watch_fd, ev->wd);
    }
  }
}

/* Sleeps until an event or ms pass, whichever is first (never past the
 * next sweep). */
void altar__local_watch_wait(local_consumer_t *c, int64_t ms) {
  int64_t to_sweep = c->next_sweep_ms - altar_mono_ms();
  if (to_sweep < ms) ms = to_sweep < 0 ? 0 : to_sweep;
  struct pollfd pfd = {.fd = c->watch_fd, .events = POLLIN};
  (void)poll(&pfd, 1, (int)ms);
}
