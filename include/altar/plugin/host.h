/* altar — what a plug-in exports and what it is given: a plug-in is a .so
 * that exports two symbols,
 *   altar_plugin_abi   the ALTAR_PLUGIN_ABI it was compiled against
 *                      (ALTAR_PLUGIN_DECLARE_ABI() writes it);
 *   altar_plugin_init  its one entry point: registers what it brings through
 *                      the host's functions, returns 0 or a negative code with
 *                      err filled.
 * Inside the altar binary a plug-in's calls into altar's API reach the running
 * altar (the binary exports its public API), so the registries it looks up
 * are the ones altar filled. Loading is altar/plugin.h. */
#ifndef ALTAR_PLUGIN_HOST_H
#define ALTAR_PLUGIN_HOST_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/error.h"
#include "altar/plugin/backend.h"
#include "altar/plugin/storage.h"
#include "altar/plugin/transport.h"

/* Raised whenever a struct a plug-in shares with altar changes layout or
 * meaning (the ops structs, the host below, the model types they pass). */
#define ALTAR_PLUGIN_ABI 8u

#define ALTAR_PLUGIN_ENTRY_SYMBOL "altar_plugin_init"
#define ALTAR_PLUGIN_ABI_SYMBOL "altar_plugin_abi"

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
  int (*register_backend)(const altar_plugin_host_t *host, const altar_backend_ops_t *ops, altar_error_t *err);
  int (*register_backend_alias)(const altar_plugin_host_t *host, const char *alias, const altar_backend_ops_t *ops,
                                altar_error_t *err);
  int (*register_storage)(const altar_plugin_host_t *host, const altar_storage_ops_t *ops, altar_error_t *err);
  int (*register_transport)(const altar_plugin_host_t *host, const altar_transport_ops_t *ops, altar_error_t *err);
  void *loader; /* the loader's own state; plug-ins leave it alone */
};

/* The entry point every plug-in defines. */
int altar_plugin_init(const altar_plugin_host_t *host, altar_error_t *err);
typedef int (*altar_plugin_init_fn)(const altar_plugin_host_t *host, altar_error_t *err);

/* Put once at file scope in a plug-in: exports the ABI it is built for. */
#define ALTAR_PLUGIN_DECLARE_ABI()                                                                                     \
  ALTAR_API extern const unsigned altar_plugin_abi;                                                                    \
  ALTAR_API const unsigned altar_plugin_abi = ALTAR_PLUGIN_ABI

ALTAR_API_END

#endif
