/* modal backend internals shared by backends/modal_*.c. Not public. */
#ifndef ALTAR_MODAL_INT_H
#define ALTAR_MODAL_INT_H

#include "altar/modal.h"
#include "altar/plugin/backend.h"

struct altar_modal {
  altar_modal_runtime_t *rt;
  char *app_name;
  char *volume_name;
  char *mount_root;
  altar_strmap_t accelerators; /* pool → Modal accelerator */
  altar_storage_t *storage;    /* borrowed; NULL: per-uri */
};

#endif
