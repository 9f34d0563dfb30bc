/* altar — plug-ins by name: one registry each for execution backends, storage
 * adapters and log transports. A value is whatever the kind's interface says
 * (a const vtable such as altar_storage_ops_t); the registry only stores the
 * pointer. cli/plugins.c fills them at start-up; everything else looks up. */
#ifndef ALTAR_REGISTRY_H
#define ALTAR_REGISTRY_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/error.h"

#include <stddef.h>

typedef enum altar_registry_kind {
  ALTAR_REGISTRY_BACKEND = 0,
  ALTAR_REGISTRY_STORAGE = 1,
  ALTAR_REGISTRY_TRANSPORT = 2,
} altar_registry_kind_t;
#define ALTAR_REGISTRY_KINDS 3

/* Entries per registry and bytes per name (without NUL). */
#define ALTAR_REGISTRY_MAX 64u
#define ALTAR_REGISTRY_NAME_MAX 63u

/* "backend", "storage", "transport". */
const char *altar_registry_kind_name(altar_registry_kind_t kind);

/* Registers ptr (borrowed; must outlive the process's use of it, normally a
 * static const vtable) under name. Registering the same name with the same
 * pointer again is a no-op, so start-up code may run twice; another pointer
 * under a taken name is ALTAR_EEXIST. Names are 1..63 bytes of [A-Za-z0-9._-].
 * Thread-safe. 0, ALTAR_EINVAL, ALTAR_EEXIST or ALTAR_ETOOBIG (full). */
int altar_registry_register(altar_registry_kind_t kind, const char *name, const void *ptr, altar_error_t *err);

/* The pointer registered under name, or NULL. Thread-safe. */
const void *altar_registry_lookup(altar_registry_kind_t kind, const char *name);

/* Same, as an error: ALTAR_ENOTFOUND with a message listing the known names
 * ("storage 'gs' is not registered (known: file, http, https, local)"). */
int altar_registry_get(altar_registry_kind_t kind, const char *name, const void **pptr, altar_error_t *err);

/* Copies up to max registered names, sorted, into names (pointers stay valid
 * while the entry stays registered). Returns how many are registered. */
size_t altar_registry_names(altar_registry_kind_t kind, const char **names, size_t max);

/* Removes name; returns whether it was there. For tests and shutdown. */
bool altar_registry_unregister(altar_registry_kind_t kind, const char *name);

ALTAR_API_END

#endif
