/* altar — the configuration keys a plug-in declares: one declaration type and
 * one check for every plug-in kind (execution backend, log transport,
 * storage adapter, ledger), so a typo is refused the same way whatever it
 * configures: by the config reader with FILE:LINE, by a --set flag, and by
 * the kind's open, each time with a "did you mean" hint.
 *
 * Each ops table starts with the same three members: name, caps (the kind's
 * ALTAR_<KIND>_CAP_* bits) and config_keys (an array of altar_plugin_key_t
 * ended by ALTAR_PLUGIN_KEYS_END; NULL = the plug-in declares none and every
 * key passes, as the kafka transport passes any librdkafka property).
 * docs/plugins.md describes the whole shape. */
#ifndef ALTAR_PLUGIN_KEYS_H
#define ALTAR_PLUGIN_KEYS_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/error.h"
#include "altar/strmap.h"

#include <stdbool.h>
#include <stddef.h>

/* One key a plug-in's open reads, as written under its section of
 * altar.yaml ("slots" under backend:, "dir" under transport:). */
typedef struct altar_plugin_key {
  const char *name;
  const char *doc; /* one line: what it sets, its unit and default (NULL: undocumented) */
} altar_plugin_key_t;

/* Ends an array of altar_plugin_key_t. */
#define ALTAR_PLUGIN_KEYS_END                                                                                          \
  { NULL, NULL }

/* How many keys the array declares (0 for NULL). */
size_t altar_plugin_keys_count(const altar_plugin_key_t *keys);

/* Whether keys lets key through: "name" always (it picks the plug-in),
 * every key when keys is NULL (undeclared), else one of the declared. When
 * not, hint (hint_size bytes, may be 0) gets " (did you mean \"X\"?)" for a
 * near miss, " (it takes none)" when nothing is declared, else
 * " (known: a, b, ...)" (cut to fit). */
bool altar_plugin_keys_allow(const altar_plugin_key_t *keys, const char *key, char *hint, size_t hint_size);

/* The refusal of key, which keys does not allow: ALTAR_ECONFIG with err
 * "<where><kind>.<key>: unknown key for the <plugin> <kind><hint>", where
 * is a prefix such as "altar.yaml:3: " or "--set " (NULL = none), kind the
 * section ("backend", "transport", "storage", "ledger") and plugin the
 * name the user gave ("docker", "local"). */
int altar_plugin_keys_refuse(const altar_plugin_key_t *keys, const char *where, const char *kind, const char *plugin,
                             const char *key, altar_error_t *err);

/* Checks every key of cfg (NULL = none) in order: 0, or the refusal of the
 * first key keys does not allow. */
int altar_plugin_keys_check(const altar_plugin_key_t *keys, const char *kind, const char *plugin,
                            const altar_strmap_t *cfg, altar_error_t *err);

ALTAR_API_END

#endif
