/* altar — implementing a storage adapter: what a plug-in needs beyond the user's
 * altar/storage.h.
 *
 * An adapter is a const altar_storage_ops_t registered by name in the storage
 * registry (altar/registry.h). Required operations: read_bytes and exists; a
 * table lacking one is refused (ALTAR_EINVAL naming it) at registration and
 * at open. Every other operation is optional: altar_storage_open copies the
 * table into the handle and fills each NULL slot once with its default in
 * core/storage.c (text and CSV over bytes, copy_from_local over upload, a
 * write on a read-only adapter fails with ALTAR_ENOTSUP naming the adapter).
 * Every operation takes the handle; an adapter reaches its private state with
 * altar_storage_impl(s), never s->impl. */
#ifndef ALTAR_PLUGIN_STORAGE_H
#define ALTAR_PLUGIN_STORAGE_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/plugin_keys.h"
#include "altar/storage.h"

typedef struct altar_storage_ops {
  const char *name; /* registry key ("local", "http", ...) */
  unsigned caps;    /* ALTAR_STORAGE_CAP_* */
  /* The option keys open reads, ended by ALTAR_PLUGIN_KEYS_END;
   * altar_storage_open refuses any other before open runs (with a
   * suggestion, altar/plugin_keys.h). NULL: keys are left to open (and an
   * adapter without open takes none). */
  const altar_plugin_key_t *config_keys;

  /* Optional. Builds the adapter's private state from cfg (NULL = no keys)
   * and stores it with altar_storage_set_impl(s, impl). Without it the
   * impl is NULL. */
  int (*open)(altar_storage_t *s, const altar_strmap_t *cfg, altar_error_t *err);
  /* Optional. Frees altar_storage_impl(s). */
  void (*close)(altar_storage_t *s);

  /* Required. Appends the whole file to out. ALTAR_ENOTFOUND when missing,
   * ALTAR_ETOOBIG past the adapter's size bound. */
  int (*read_bytes)(altar_storage_t *s, const char *path, altar_buf_t *out, altar_error_t *err);
  /* Required. *pexists true for a file that exists. */
  int (*exists)(altar_storage_t *s, const char *path, bool *pexists, altar_error_t *err);

  /* Optional (default: read_bytes, NUL-terminated; a NUL inside is an error). */
  int (*read_text)(altar_storage_t *s, const char *path, char **ptext, size_t *plen, altar_error_t *err);
  /* Optional (default: ALTAR_ENOTSUP). Creates or replaces the file. */
  int (*write_bytes)(altar_storage_t *s, const char *path, const void *data, size_t len, altar_error_t *err);
  /* Optional (default: write_bytes). */
  int (*write_text)(altar_storage_t *s, const char *path, const char *text, altar_error_t *err);
  /* Optional (default: ALTAR_ENOTSUP). Creates a directory and its parents. */
  int (*mkdirs)(altar_storage_t *s, const char *path, altar_error_t *err);
  /* Optional (default: the adapter's write_bytes with the whole file read
   * into memory, or ALTAR_ENOTSUP when it has none). Streams a local file
   * into storage without holding it in memory. */
  int (*upload)(altar_storage_t *s, const char *local_path, const char *dest_path, altar_error_t *err);
  /* Optional (default: upload). Copies a local file into storage; a copy onto
   * the same file does nothing. */
  int (*copy_from_local)(altar_storage_t *s, const char *local_path, const char *dest_path, altar_error_t *err);
  /* Optional (default: read_bytes into a temp file removed on release). */
  int (*as_local_file)(altar_storage_t *s, const char *path, altar_local_file_t *out, altar_error_t *err);
  /* Optional (default: read_text + altar_csv_parse). */
  int (*read_csv)(altar_storage_t *s, const char *path, char delim, const char *const *fieldnames, size_t n_fieldnames,
                  altar_csv_t *out, altar_error_t *err);
  /* Optional (default: altar_csv_format + write_text). */
  int (*write_csv)(altar_storage_t *s, const char *path, const altar_strmap_t *rows, size_t n_rows, char delim,
                   const char *const *fieldnames, size_t n_fieldnames, altar_error_t *err);
  /* Optional (default: ALTAR_ENOTSUP). Calls fn for every stored file whose
   * path starts with prefix, page after page, in the store's order. */
  int (*list)(altar_storage_t *s, const char *prefix, altar_storage_list_fn fn, void *ud, altar_error_t *err);
  /* Optional (default: ALTAR_ENOTSUP). Removes the file; one already gone
   * is ALTAR_OK (altar_storage_delete). */
  int (*delete_file)(altar_storage_t *s, const char *path, altar_error_t *err);
} altar_storage_ops_t;

/* An open storage: made by altar_storage_open, freed by altar_storage_close. */
struct altar_storage {
  altar_storage_ops_t ops;          /* the adapter's table with every optional
                                       operation filled with its default, once, at open */
  const altar_storage_ops_t *table; /* the table as registered (identity, registry) */
  void *impl;                       /* the adapter's state: altar_storage_impl */
};

/* The adapter's private state (NULL until its open stores one). */
static inline void *altar_storage_impl(const altar_storage_t *s) { return s->impl; }
/* Called from an adapter's open to keep its state for the other operations. */
static inline void altar_storage_set_impl(altar_storage_t *s, void *impl) { s->impl = impl; }

/* The built-in adapters (storage/local.c, http.c, gcs.c, s3.c), registered
 * by altar_storage_register_builtin. */
extern const altar_storage_ops_t altar_storage_local_ops;
extern const altar_storage_ops_t altar_storage_http_ops;
extern const altar_storage_ops_t altar_storage_gcs_ops;
extern const altar_storage_ops_t altar_storage_s3_ops;

ALTAR_API_END

#endif
