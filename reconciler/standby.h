/* A standby reconciler (`--standby`, ledger.standby): it owns no status
 * partition, keeps a restored copy of the newest ledger checkpoint warm
 * beside ledger.path, restoring each newer one as it appears, and says when
 * that copy is the newest one (caught up: a takeover then only reads the
 * status events after it). When no reconciler of its group consumes the
 * status topic any more (the owner died or stopped), it moves the copy to
 * ledger.path and hands over to the daemon, which reads the status topic
 * from the offsets the copy covers. Internal to reconciler/. */
#ifndef ALTAR_RECONCILER_STANDBY_H
#define ALTAR_RECONCILER_STANDBY_H

#include "altar/error.h"
#include "altar/metrics.h"
#include "altar/transport.h"

#include <signal.h>
#include <stdbool.h>

typedef struct altar__standby_opts {
  const char *checkpoint_uri;   /* ledger.checkpoints (required) */
  const char *ledger_path;      /* where the ledger goes at takeover: must not exist */
  altar_transport_t *transport; /* watches the group and the status topic's
                                   ends; never subscribes */
  const char *group;            /* the reconcilers' consumer group */
  const char *status_topic;
  int poll_ms;                 /* ledger.standby_poll_ms: between two looks at the group and the
                  checkpoints */
  volatile sig_atomic_t *stop; /* may be NULL */
  altar_metrics_t *metrics;    /* may be NULL */
  bool quiet;
} altar__standby_opts_t;

/* Stands by until the group has no live member on the status topic, then
 * moves the warm copy (refreshed first if a newer checkpoint appeared) to
 * o->ledger_path and returns 0; with no checkpoint yet, returns 0 leaving
 * ledger_path absent (the daemon then starts as any new reconciler does).
 * ALTAR_ECANCELED when *stop was set (the warm copy stays for next time).
 * A standby started where no reconciler runs takes over at once. Call from
 * one thread; blocks. */
int altar__standby_wait(const altar__standby_opts_t *o, altar_error_t *err);

#endif
