/* A hot standby reconciler (`--standby`, ledger.standby): it owns no
 * status partition and keeps a copy of the owner's ledger beside
 * ledger.path current by applying the status topic itself, as it comes,
 * through the owner's own apply path (reconciler/daemon.c, following:
 * partitions read by assignment, no group joined, nothing committed,
 * nothing published, nothing checkpointed). A checkpoint is restored into
 * the copy only when there is no copy, it is broken, or it is behind the
 * checkpoint (records it never applied are gone). The group events the
 * copy decides stay in its outbox until the owner's are seen on the ready
 * and dead topics (reconciler/published_seen.h), then are deleted. It is
 * caught up when its offsets are within ledger.standby_caught_up_events
 * of the status topic's end. When no reconciler of its group consumes the
 * status topic any more, it reads the publish topics to their end once
 * more, moves the copy to ledger.path and hands over to the daemon, which
 * reads the status topic from the copy's offsets, and does not publish
 * again what it finds seen. Internal to reconciler/. */
#ifndef ALTAR_RECONCILER_STANDBY_H
#define ALTAR_RECONCILER_STANDBY_H

#include "altar/error.h"
#include "altar/metrics.h"
#include "altar/transport.h"
#include "reconciler/daemon.h"
#include "reconciler/published_seen.h"

#include <signal.h>
#include <stdbool.h>

typedef struct altar__standby_opts {
  const char *checkpoint_uri;   /* ledger.checkpoints (may be NULL: the copy starts empty) */
  const char *ledger_path;      /* where the ledger goes at takeover: must not exist */
  altar_transport_t *transport; /* watches the group, reads the status partitions by
                                   assignment; never subscribes */
  const char *group;            /* the reconcilers' consumer group */
  const char *status_topic;
  int poll_ms;              /* ledger.standby_poll_ms: between two looks at the group,
                                   the checkpoints and the publish topics */
  int64_t caught_up_events; /* ledger.standby_caught_up_events */
  /* What the copy is applied with: groups, topics, batch size, settled
   * cache, consumed age, the transport's name and settings (for a handle
   * of its own that reads the ready and dead topics); transport, ledger
   * and metrics are the standby's. */
  const altar_reconciler_opts_t *apply;
  /* Out: the group events seen out already that the copy had not decided
   * yet; the daemon that takes over skips them (opts.published). */
  altar__published_seen_t *published;
  volatile sig_atomic_t *stop; /* may be NULL */
  altar_metrics_t *metrics;    /* may be NULL */
  bool quiet;
} altar__standby_opts_t;

/* Stands by until the group has no live member on the status topic, then
 * moves the copy to o->ledger_path and returns 0 (with o->published
 * holding what the new owner must not publish again). ALTAR_ECANCELED when
 * *stop was set (the copy is dropped: the next start restores). A standby
 * started where no reconciler runs takes over at once. Call from one
 * thread; blocks. */
int altar__standby_wait(const altar__standby_opts_t *o, altar_error_t *err);

#endif
