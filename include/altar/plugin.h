/* altar — plug-ins: shared objects that add execution backends, storage
 * adapters and log transports to altar without rebuilding it.
 *
 * A plug-in is a .so that exports two symbols:
 *   altar_plugin_abi   the ALTAR_PLUGIN_ABI it was compiled against
 *                      (ALTAR_PLUGIN_DECLARE_ABI() writes it);
 *   altar_plugin_init  its one entry point: registers what it brings through
 *                      the host's functions, returns 0 or a negative code with
 *                      err filled.
 * The loader reads altar_plugin_abi before calling anything and refuses a
 * plug-in built for another ABI. It never unloads a plug-in that loaded: the
 * registries keep pointers into it.
 *
 * Inside the altar binary a plug-in's calls into altar's API reach the running
 * altar (the binary exports its public API), so the registries it looks up
 * are the ones altar filled. Where plug-ins come from: the config's
 * `plugins:` list and ALTAR_PLUGIN_PATH (README, "Plug-ins"). */
#ifndef ALTAR_PLUGIN_H
#define ALTAR_PLUGIN_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/backend.h"
#include "altar/config.h"
#include "altar/error.h"
#include "altar/storage.h"
#include "altar/transport.h"

/* Raised whenever a struct a plug-in shares with altar changes layout or
 * meaning (the ops structs, the host below, the model types they pass). */
#define ALTAR_PLUGIN_ABI 1u

#define ALTAR_PLUGIN_ENTRY_SYMBOL "altar_plugin_init"
#define ALTAR_PLUGIN_ABI_SYMBOL "altar_plugin_abi"

/* Colon-separated files or directories (every *.so inside, in name order). */
#define ALTAR_PLUGIN_PATH_ENV "ALTAR_PLUGIN_PATH"

typedef struct altar_plugin_host altar_plugin_host_t;

/* What altar_plugin_init receives: altar's ABI and version, the file being
 * loaded, and the registration functions. Each registers a const vtable
 * (which must live as long as the process: a static in the plug-in) under
 * its name; a name altar or another plug-in already holds is ALTAR_EEXIST,
 * a vtable lacking a required operation ALTAR_EINVAL, err saying which. Any
 * failed registration fails the whole load, whatever init returns. Call
 * them only from inside altar_plugin_init. */
struct altar_plugin_host {
  unsigned abi;        /* ALTAR_PLUGIN_ABI of the running altar */
  const char *version; /* altar_version() of the running altar */
  const char *path;    /* the plug-in file */
  int (*register_backend)(const altar_plugin_host_t *host, const altar_backend_ops_t *ops,
                          altar_error_t *err);
  int (*register_backend_alias)(const altar_plugin_host_t *host, const char *alias,
                                const altar_backend_ops_t *ops, altar_error_t *err);
  int (*register_storage)(const altar_plugin_host_t *host, const altar_storage_ops_t *ops,
                          altar_error_t *err);
  int (*register_transport)(const altar_plugin_host_t *host, const altar_transport_ops_t *ops,
                            altar_error_t *err);
  void *loader; /* the loader's own state; plug-ins leave it alone */
};

/* ---- in a plug-in ------------------------------------------------------- */

/* The entry point every plug-in defines. */
int altar_plugin_init(const altar_plugin_host_t *host, altar_error_t *err);
typedef int (*altar_plugin_init_fn)(const altar_plugin_host_t *host, altar_error_t *err);

/* Put once at file scope in a plug-in: exports the ABI it is built for. */
#define ALTAR_PLUGIN_DECLARE_ABI()                                                                 \
  ALTAR_API extern const unsigned altar_plugin_abi;                                                \
  ALTAR_API const unsigned altar_plugin_abi = ALTAR_PLUGIN_ABI

/* ---- in a host (the altar binary, an embedder) -------------------------- */

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
