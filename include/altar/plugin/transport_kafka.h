/* altar — the built-in "kafka" transport (librdkafka): its ops table, in
 * the plug-in tier like every table (open it by name from altar/transport.h).
 *
 * Configuration: every key of the config map is a librdkafka property and
 * passes through unchanged (bootstrap.servers, security.protocol, ssl.*,
 * sasl.*, compression.type, client.id, ...), except:
 *   altar.timeout.ms          admin, metadata, commit and lookup calls (30000)
 *   altar.close.timeout.ms    how long close waits for deliveries (10000)
 *   altar.replication.factor  for created topics (-1 = the broker's default)
 *   dir, fsync, segment.bytes, ... the local transport's keys (they share
 *                             the `transport:` map), ignored here
 * The transport insists on enable.idempotence=true and acks=all (producer),
 * enable.auto.commit=false, enable.auto.offset.store=false and
 * partition.assignment.strategy=cooperative-sticky (consumer), and
 * partitioner=murmur2_random; a config that contradicts one of them is an
 * error naming the key. Values of secret properties (passwords, secrets,
 * private keys, JAAS/OAUTHBEARER configs) never appear in logs or errors. */
#ifndef ALTAR_PLUGIN_TRANSPORT_KAFKA_H
#define ALTAR_PLUGIN_TRANSPORT_KAFKA_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/plugin/transport.h"

/* Registered as "kafka" by cli/plugins.c; an embedder registers it with
 * altar_transport_register or opens it with altar_transport_open_ops. */
extern const altar_transport_ops_t altar_transport_kafka_ops;

ALTAR_API_END

#endif
