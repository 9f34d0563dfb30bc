/* altar — Storage: reading and writing files on platform storage, whatever it
 * is (local disk, http(s), gs://, s3://), through one interface.
 *
 * A storage is opened by adapter name (or for a URI's scheme) and used through
 * the altar_storage_* operations below. Adapters are registered by name in the
 * storage registry (altar/registry.h); implementing one is
 * altar/plugin/storage.h.
 *
 * Paths are whatever the adapter understands: plain paths or file:// URIs for
 * "local", http(s):// URLs for "http", gs://BUCKET/KEY for "gs" and
 * s3://BUCKET/KEY for "s3". One storage object may be used from
 * one thread at a time. */
#ifndef ALTAR_STORAGE_H
#define ALTAR_STORAGE_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/buf.h"
#include "altar/error.h"
#include "altar/strmap.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct altar_storage altar_storage_t;

/* What an adapter can do, declared up front. */
#define ALTAR_STORAGE_CAP_READ 0x1u    /* read_*, exists, as_local_file */
#define ALTAR_STORAGE_CAP_WRITE 0x2u   /* write_*, mkdirs, upload, copy_from_local */
#define ALTAR_STORAGE_CAP_LOCAL 0x4u   /* as_local_file is the path itself, no copy */
#define ALTAR_STORAGE_CAP_LIST 0x8u    /* list */
#define ALTAR_STORAGE_CAP_DELETE 0x10u /* delete */

/* A local path for a stored file, valid until altar_local_file_release. */
typedef struct altar_local_file {
  char *path;                                   /* owned */
  void (*release)(struct altar_local_file *lf); /* deletes a temp copy; frees path */
} altar_local_file_t;

/* Rows of a delimited file: each row maps column name → value. */
typedef struct altar_csv {
  char **fields; /* column names in file order */
  size_t n_fields;
  altar_strmap_t *rows;
  size_t n_rows;
} altar_csv_t;

/* One stored file a listing found: its full path in the form the caller
 * used (e.g. "gs://bucket/key") and its size in bytes. Valid during the call. */
typedef struct altar_storage_entry {
  const char *path;
  unsigned long long size;
} altar_storage_entry_t;
/* Called once per file; a non-zero return stops the listing and is returned. */
typedef int (*altar_storage_list_fn)(const altar_storage_entry_t *e, void *ud);

/* ---- lifecycle ------------------------------------------------------------ */

/* Opens the adapter registered as name with options (may be NULL).
 * *ps is freed with altar_storage_close. ALTAR_ENOTFOUND for an unknown name,
 * ALTAR_EINVAL for an adapter lacking a required operation (named). */
int altar_storage_open(const char *name, const altar_strmap_t *options, altar_storage_t **ps, altar_error_t *err);
/* Opens the adapter for a URI's scheme: "http"/"https" for those, "file" for
 * file:// and plain paths, otherwise the scheme's name (e.g. "gs"). */
int altar_storage_open_for_uri(const char *uri, const altar_strmap_t *options, altar_storage_t **ps,
                               altar_error_t *err);
void altar_storage_close(altar_storage_t *s); /* NULL is fine */

/* Registers the built-in adapters: "local" and "file", "http" and "https",
 * "gs" (also "gcs") and "s3".
 * Idempotent; cli/plugins.c calls it. 0 or the registry's error. */
int altar_storage_register_builtin(void);

/* Python storage adapters (backends/python_storage.c, docs/python-backends.md):
 * registers one storage adapter per scheme of config_json, the text
 * altar_config_t.storage_python holds (file names the config file in
 * errors, NULL for none), each served by the altar.storage adapter the
 * scheme names through one bridge process started at first use. NULL
 * removes them. A scheme already registered is ALTAR_ECONFIG naming its
 * FILE:LINE. Configuring the same text again is a no-op; another while a
 * handle on one of them is open is ALTAR_ESTATE. Call after every other
 * adapter is registered. */
int altar_storage_python_configure(const char *config_json, const char *file, altar_error_t *err);
/* Starts the bridge and opens every adapter now, so a wrong interpreter, an
 * unknown adapter name or a constructor that raises fails at start-up
 * (ALTAR_ECONFIG, naming the scheme's FILE:LINE) rather than at a task's
 * staging. ALTAR_OK when none is configured or it is running. */
int altar_storage_python_start(altar_error_t *err);

/* ---- operations: every caller goes through these (core/storage.c) ------------ */

/* The adapter's name ("local", "http", "gs", "s3" or a plug-in's). */
const char *altar_storage_name(const altar_storage_t *s);
/* What the adapter declares it can do: ALTAR_STORAGE_CAP_*. */
unsigned altar_storage_caps(const altar_storage_t *s);
/* Appends the whole file to out. ALTAR_ENOTFOUND when missing, ALTAR_ETOOBIG
 * past the adapter's size bound. */
int altar_storage_read_bytes(altar_storage_t *s, const char *path, altar_buf_t *out, altar_error_t *err);
/* *pexists true for a file that exists. */
int altar_storage_exists(altar_storage_t *s, const char *path, bool *pexists, altar_error_t *err);
/* *ptext is NUL-terminated; caller frees. plen may be NULL. A NUL inside the
 * file is an error. */
int altar_storage_read_text(altar_storage_t *s, const char *path, char **ptext, size_t *plen, altar_error_t *err);
/* Creates or replaces the file. ALTAR_ENOTSUP on a read-only adapter. */
int altar_storage_write_bytes(altar_storage_t *s, const char *path, const void *data, size_t len, altar_error_t *err);
int altar_storage_write_text(altar_storage_t *s, const char *path, const char *text, altar_error_t *err);
/* Creates a directory and its parents. */
int altar_storage_mkdirs(altar_storage_t *s, const char *path, altar_error_t *err);
/* Puts a local file into storage, streamed where the adapter can. */
int altar_storage_upload(altar_storage_t *s, const char *local_path, const char *dest_path, altar_error_t *err);
/* Copies a local file into storage; a copy onto the same file does nothing. */
int altar_storage_copy_from_local(altar_storage_t *s, const char *local_path, const char *dest_path,
                                  altar_error_t *err);
/* On success out->path is readable until altar_local_file_release(out). */
int altar_storage_as_local_file(altar_storage_t *s, const char *path, altar_local_file_t *out, altar_error_t *err);
/* fieldnames NULL: the first row is the header. out is cleared with
 * altar_csv_clear. */
int altar_storage_read_csv(altar_storage_t *s, const char *path, char delim, const char *const *fieldnames,
                           size_t n_fieldnames, altar_csv_t *out, altar_error_t *err);
/* fieldnames NULL: the keys of the first row, sorted. Writes a header row. */
int altar_storage_write_csv(altar_storage_t *s, const char *path, const altar_strmap_t *rows, size_t n_rows, char delim,
                            const char *const *fieldnames, size_t n_fieldnames, altar_error_t *err);
/* Calls fn for every stored file whose path starts with prefix, page after
 * page, in the store's order (ALTAR_ENOTSUP without ALTAR_STORAGE_CAP_LIST).
 * A non-zero return from fn stops the listing and is returned. */
int altar_storage_list(altar_storage_t *s, const char *prefix, altar_storage_list_fn fn, void *ud, altar_error_t *err);

/* Removes the stored file at path (ALTAR_ENOTSUP without
 * ALTAR_STORAGE_CAP_DELETE). A file already gone is success, not an error:
 * two cleaners may race for it, and a retry after a lost answer must not
 * fail. On "local" an empty directory is removed too (object stores have
 * none). */
int altar_storage_delete(altar_storage_t *s, const char *path, altar_error_t *err);

/* Releases a local file from as_local_file: a temp copy is deleted. Safe on a
 * zeroed struct and twice. */
void altar_local_file_release(altar_local_file_t *lf);

/* ---- text reader and writer ------------------------------------------------- */

/* An in-memory text file read through storage. */
typedef struct altar_text_reader altar_text_reader_t;
/* Reads path now; *pr is freed with altar_text_reader_close. */
int altar_storage_open_text(altar_storage_t *s, const char *path, altar_text_reader_t **pr, altar_error_t *err);
/* Next line without its "\n" (or "\r\n"): *pline points into the reader, is
 * NOT NUL-terminated (use *plen) and stays valid until close. Returns 1 for
 * a line, 0 at the end. */
int altar_text_reader_next_line(altar_text_reader_t *r, const char **pline, size_t *plen);
/* The whole text (NUL-terminated) and its length. */
const char *altar_text_reader_text(const altar_text_reader_t *r, size_t *plen);
void altar_text_reader_close(altar_text_reader_t *r);

/* Buffers writes in memory; altar_text_writer_close writes the buffer with
 * write_text once, altar_text_writer_abort drops it (the block failed). */
typedef struct altar_text_writer altar_text_writer_t;
/* NULL on allocation failure (err set). The writer borrows s and copies path. */
altar_text_writer_t *altar_storage_open_text_writer(altar_storage_t *s, const char *path, altar_error_t *err);
int altar_text_writer_write(altar_text_writer_t *w, const char *text, size_t len);
int altar_text_writer_printf(altar_text_writer_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Flushes and frees w (even on error). */
int altar_text_writer_close(altar_text_writer_t *w, altar_error_t *err);
void altar_text_writer_abort(altar_text_writer_t *w);

/* ---- CSV (core/csv.c) ------------------------------------------------------ */

/* The delimiter a caller passes when it has no reason to choose: tab, as the
 * contract's read_csv/write_csv default. */
#define ALTAR_CSV_DEFAULT_DELIM '\t'

/* Parses delimited text: fields may be quoted with '"' ("" inside is a quote;
 * a quoted field may hold the delimiter and newlines); rows end with \n or
 * \r\n; blank lines are skipped. With fieldnames NULL the first row names the
 * columns. A row with more fields than columns is ALTAR_EDECODE naming the
 * line; missing trailing fields read as "". Bounded by ALTAR_MAX_STRING per
 * field, ALTAR_MAX_MAP columns. */
int altar_csv_parse(const char *text, size_t len, char delim, const char *const *fieldnames, size_t n_fieldnames,
                    altar_csv_t *out, altar_error_t *err);
/* Appends a header row and one row per map, quoting fields that hold the
 * delimiter, a quote, \r or \n. A row key not among the columns is
 * ALTAR_EINVAL; a missing key writes "". Rows end with "\n". */
int altar_csv_format(const altar_strmap_t *rows, size_t n_rows, char delim, const char *const *fieldnames,
                     size_t n_fieldnames, altar_buf_t *out, altar_error_t *err);
void altar_csv_clear(altar_csv_t *csv);

ALTAR_API_END

#endif
