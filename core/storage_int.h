/* For storage adapters (storage/, the Python bridge in backends/): defined
 * in core/storage.c; not public API. */
#ifndef ALTAR_STORAGE_INT_H
#define ALTAR_STORAGE_INT_H

#include "altar/plugin/storage.h"

/* Creates a temp file under $TMPDIR (or /tmp) keeping path's extension;
 * out->path/out->release are set so altar_local_file_release deletes it.
 * *pfd is open for writing; the caller closes it. */
int altar__storage_mktemp(const char *path, altar_local_file_t *out, int *pfd, altar_error_t *err);

#endif
