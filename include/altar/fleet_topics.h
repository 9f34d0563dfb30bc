/* altar — creating the fleet's topics (jobs, status, ready, dead, dlq,
 * fleet) with the partitions and lifetimes the config names. Every program
 * that may be the first to touch a fleet calls this one function, so a
 * topic never gets the broker's default lifetime because a client raced the
 * reconciler to create it (docs/state.md). */
#ifndef ALTAR_FLEET_TOPICS_H
#define ALTAR_FLEET_TOPICS_H

#include "altar/config.h"
#include "altar/error.h"
#include "altar/export.h"
#include "altar/transport.h"
ALTAR_API_BEGIN

/* Creates each missing topic; one that exists is left as it is. */
int altar_fleet_topics_ensure(altar_transport_t *t, const altar_config_t *cfg, altar_error_t *err);

ALTAR_API_END

#endif
