/* A fired group's outputs for its event: what its members wrote, read from
 * their stored specs. Internal to reconciler/. */
#ifndef ALTAR_RECONCILER_GROUP_OUTPUTS_H
#define ALTAR_RECONCILER_GROUP_OUTPUTS_H

#include "altar/arena.h"
#include "altar/groups.h"
#include "altar/ledger.h"

/* True when gs's events carry their members' outputs: a kind with a next
 * stage needs them, another only when its config asks (event_outputs), so
 * a config without stages reads no spec when a group fires. */
bool altar__group_outputs_wanted(const altar_group_spec_t *gs);

/* The outputs of members hs[0..n) (each by its stored spec), de-duplicated
 * by uri and in member order, copied into arena a. A member without a
 * stored spec adds none. An open member's spec is read where the ledger
 * holds it in memory (the RocksDB ledger: its bytes, only the outputs
 * decoded), so firing a group reads no disk for it. However many: an event too wide for one message
 * carries them in its pages (altar_encode_group_messages). ALTAR_ENOMEM. */
int altar__group_outputs(altar_ledger_t *l, const altar_handle_t *hs, size_t n, altar_arena_t *a, altar_transfer_t **pv,
                         size_t *pn, altar_error_t *err);

#endif
