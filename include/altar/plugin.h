/* altar — loading plug-ins: shared objects that add execution backends,
 * storage adapters and log transports to altar without rebuilding it. This
 * is the host's side (the altar binary, an embedder); what a plug-in itself
 * writes against is altar/plugin/host.h and the other altar/plugin/ headers.
 *
 * The loader reads a plug-in's altar_plugin_abi before calling anything and
 * refuses one built for another ABI. It never unloads a plug-in that loaded:
 * the registries keep pointers into it. Where plug-ins come from: the
 * config's `plugins:` list and ALTAR_PLUGIN_PATH (README, "Plug-ins"). */
#ifndef ALTAR_PLUGIN_H
#define ALTAR_PLUGIN_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/config.h"
#include "altar/error.h"

#include <stddef.h>

/* Colon-separated files or directories (every *.so inside, in name order). */
#define ALTAR_PLUGIN_PATH_ENV "ALTAR_PLUGIN_PATH"

/* Loads one plug-in file and runs its entry point. where says who named the
 * file, for messages ("altar.yaml:7", "ALTAR_PLUGIN_PATH"; NULL = none);
 * every error names where and the file: a missing file, dlopen's own
 * message, a missing altar_plugin_abi or entry point, an ABI mismatch
 * (both ABIs), a name already registered (and by whom), a failing init.
 * A file already loaded (same real path) is a no-op. Not thread-safe: call at
 * start-up, before names are looked up. 0 or a negative code. */
int altar_plugin_load(const char *path, const char *where, altar_error_t *err);

/* Each colon-separated entry of list: a file, or a directory whose *.so
 * files are loaded in name order. Empty entries are skipped. Stops at the
 * first error. */
int altar_plugin_load_path(const char *list, const char *where, altar_error_t *err);

/* The config's `plugins:` entries (already resolved against the config
 * file's directory), each error naming its FILE:LINE. */
int altar_plugin_load_config(const altar_config_t *cfg, altar_error_t *err);

/* How many plug-in files are loaded. */
size_t altar_plugin_count(void);

ALTAR_API_END

#endif
