/* altar — reading a whole small file (or stdin) under a size bound. */
#ifndef ALTAR_FILE_READ_H
#define ALTAR_FILE_READ_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/error.h"

#include <stddef.h>

/* Reads all of `path` ("-" is stdin) when it holds at most `max` bytes.
 * Returns the bytes NUL-terminated (caller frees) with their count in *plen,
 * or NULL with err naming `what` (e.g. "--token-file x" or just the path):
 * ENOTFOUND when it cannot be opened, ETOOBIG with its size and the bound,
 * EIO on a read error, ENOMEM. The buffer grows with what is read, so a
 * large bound costs nothing for a small file. */
char *altar_file_read(const char *path, const char *what, size_t max, size_t *plen, altar_error_t *err);

ALTAR_API_END

#endif
