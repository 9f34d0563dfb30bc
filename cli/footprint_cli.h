/* The CLI side of the footprint gauges: which directories each daemon
 * reports (altar/footprint.h). */
#ifndef ALTAR_CLI_FOOTPRINT_CLI_H
#define ALTAR_CLI_FOOTPRINT_CLI_H

#include "altar/config.h"
#include "altar/footprint.h"

#include <stdbool.h>

/* Starts the sampler on reg for a worker (its backend's data_root and the
 * embedded log's dir) or a reconciler (its ledger and the embedded log's
 * dir), with what transport's next retention pass deletes when it keeps a log of its own
 * (the embedded log; transport must outlive the sampler; NULL: none). NULL when reg is NULL (metrics off) or on failure, which is said on
 * stderr (prefixed with who): the daemon runs without these gauges. Stop
 * with altar_footprint_sampler_stop before the registry is freed. */
altar_footprint_sampler_t *altar_cli_footprint_start(const char *who, altar_metrics_t *reg, const altar_config_t *cfg,
                                                     bool worker, altar_transport_t *transport);

#endif
