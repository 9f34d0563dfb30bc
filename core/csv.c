/* Delimited text (CSV, TSV) to rows of column → value maps and back. Quoting
 * follows the common dialect: '"' around a field, "" for a quote inside. */
#include "altar/spec.h"
#include "altar/storage.h"
#include "altar/grow.h"

#include <stdlib.h>
#include <string.h>

void altar_csv_clear(altar_csv_t *csv) {
  if (!csv) return;
  for (size_t i = 0; i < csv->n_fields; i++) free(csv->fields[i]);
  free(csv->fields);
  for (size_t i = 0; i < csv->n_rows; i++) altar_strmap_clear(&csv->rows[i]);
  free(csv->rows);
  memset(csv, 0, sizeof *csv);
}

/* One parsed record: its fields, reused between rows. */
typedef struct record {
  char **f;
  size_t n, cap;
} record_t;

static void record_reset(record_t *r) {
  for (size_t i = 0; i < r->n; i++) free(r->f[i]);
  r->n = 0;
}

static int record_push(record_t *r, altar_buf_t *field) {
  if (ALTAR_GROW(r->f, r->cap, r->n + 1)) return ALTAR_ENOMEM;
  char *s = altar_buf_detach(field);
  if (!s) return ALTAR_ENOMEM;
  r->f[r->n++] = s;
  return ALTAR_OK;
}

static int add_row(altar_csv_t *out, const record_t *r, size_t line, altar_error_t *err) {
  if (r->n > out->n_fields)
    return altar_error_set(err, ALTAR_EDECODE, "line %zu: %zu fields but only %zu columns", line, r->n, out->n_fields);
  altar_strmap_t *rows = realloc(out->rows, (out->n_rows + 1) * sizeof *rows);
  if (!rows) return altar_error_set(err, ALTAR_ENOMEM, "csv: out of memory");
  out->rows = rows;
  altar_strmap_t *m = &rows[out->n_rows];
  altar_strmap_init(m);
  out->n_rows++;
  for (size_t i = 0; i < out->n_fields; i++)
    if (altar_strmap_set(m, out->fields[i], i < r->n ? r->f[i] : ""))
      return altar_error_set(err, ALTAR_ENOMEM, "csv: out of memory");
  return ALTAR_OK;
}

static int set_header(altar_csv_t *out, const char *const *names, size_t n, altar_error_t *err) {
  if (n > ALTAR_MAX_MAP)
    return altar_error_set(err, ALTAR_ETOOBIG, "csv header: %zu columns, more than %u", n, ALTAR_MAX_MAP);
  out->fields = calloc(n ? n : 1, sizeof *out->fields);
  if (!out->fields) return altar_error_set(err, ALTAR_ENOMEM, "csv: out of memory");
  for (size_t i = 0; i < n; i++) {
    out->fields[i] = strdup(names[i]);
    if (!out->fields[i]) return altar_error_set(err, ALTAR_ENOMEM, "csv: out of memory");
    out->n_fields = i + 1;
  }
  return ALTAR_OK;
}

/* Ends a record: the first one may be the header, blank lines are skipped. */
static int end_record(altar_csv_t *out, record_t *r, bool *pneed_header, bool any_quoted, size_t line,
                      altar_error_t *err) {
  int rc = ALTAR_OK;
  bool blank = r->n == 1 && r->f[0][0] == '\0' && !any_quoted;
  if (!blank) {
    if (*pneed_header) {
      rc = set_header(out, (const char *const *)r->f, r->n, err); /* adds const: no -Wcast-qual */
      *pneed_header = false;
    } else {
      rc = add_row(out, r, line, err);
    }
  }
  record_reset(r);
  return rc;
}

int altar_csv_parse(const char *text, size_t len, char delim, const char *const *fieldnames, size_t n_fieldnames,
                    altar_csv_t *out, altar_error_t *err) {
  memset(out, 0, sizeof *out);
  if (delim == '"' || delim == '\n' || delim == '\r' || delim == '\0')
    return altar_error_set(err, ALTAR_EINVAL, "csv: delimiter may not be a quote, a newline or NUL");
  record_t r = {0};
  altar_buf_t field = {0};
  int rc = ALTAR_OK;
  bool need_header = fieldnames == NULL;
  if (fieldnames) rc = set_header(out, fieldnames, n_fieldnames, err);
  size_t line = 1, rec_line = 1;
  bool in_quotes = false, quoted = false, any_quoted = false;
  size_t i = 0;
  while (!rc && i <= len) {
    bool at_end = i == len;
    char c = at_end ? '\n' : text[i];
    if (in_quotes) {
      if (at_end) {
        rc = altar_error_set(err, ALTAR_EDECODE, "line %zu: quoted field not closed", rec_line);
        break;
      }
      if (c == '"') {
        if (i + 1 < len && text[i + 1] == '"') {
          if (altar_buf_append(&field, "\"", 1)) rc = ALTAR_ENOMEM;
          i += 2;
        } else {
          in_quotes = false;
          i++;
        }
        continue;
      }
      if (c == '\n') line++;
      if (altar_buf_append(&field, &c, 1)) rc = ALTAR_ENOMEM;
      i++;
    } else if (c == '"' && field.len == 0 && !quoted) {
      in_quotes = quoted = any_quoted = true;
      i++;
    } else if (c == delim || c == '\n' || (c == '\r' && i + 1 < len && text[i + 1] == '\n')) {
      if (record_push(&r, &field)) {
        rc = ALTAR_ENOMEM;
        break;
      }
      quoted = false;
      if (c != delim) {
        if (at_end && r.n == 1 && r.f[0][0] == '\0' && !any_quoted) { /* no final newline issue */
          record_reset(&r);
          break;
        }
        rc = end_record(out, &r, &need_header, any_quoted, rec_line, err);
        any_quoted = false;
        if (c == '\r') i++;
        line++;
        rec_line = line;
      }
      i++;
    } else {
      if (altar_buf_append(&field, &c, 1)) rc = ALTAR_ENOMEM;
      i++;
    }
    if (!rc && field.len > ALTAR_MAX_STRING)
      rc = altar_error_set(err, ALTAR_ETOOBIG, "line %zu: a field is longer than %u bytes", rec_line, ALTAR_MAX_STRING);
  }
  if (rc == ALTAR_ENOMEM) altar_error_set(err, ALTAR_ENOMEM, "csv: out of memory");
  record_reset(&r);
  free(r.f);
  altar_buf_free(&field);
  if (rc) altar_csv_clear(out);
  return rc;
}

static int put_field(altar_buf_t *out, const char *v, char delim, bool lone) {
  bool quote = (lone && !*v) || strchr(v, delim) || strpbrk(v, "\"\r\n");
  if (!quote) return altar_buf_append_str(out, v);
  int rc = altar_buf_append(out, "\"", 1);
  for (const char *p = v; !rc && *p; p++)
    rc = *p == '"' ? altar_buf_append(out, "\"\"", 2) : altar_buf_append(out, p, 1);
  return rc ? rc : altar_buf_append(out, "\"", 1);
}

int altar_csv_format(const altar_strmap_t *rows, size_t n_rows, char delim, const char *const *fieldnames,
                     size_t n_fieldnames, altar_buf_t *out, altar_error_t *err) {
  if (delim == '"' || delim == '\n' || delim == '\r' || delim == '\0')
    return altar_error_set(err, ALTAR_EINVAL, "csv: delimiter may not be a quote, a newline or NUL");
  if (!fieldnames) {
    if (n_rows == 0) return ALTAR_OK;
    fieldnames = (const char *const *)rows[0].keys;
    n_fieldnames = rows[0].n;
  }
  if (n_fieldnames == 0) return altar_error_set(err, ALTAR_EINVAL, "csv: no columns");
  bool lone = n_fieldnames == 1;
  int rc = ALTAR_OK;
  for (size_t j = 0; !rc && j < n_fieldnames; j++) {
    if (j) rc = altar_buf_append(out, &delim, 1);
    if (!rc) rc = put_field(out, fieldnames[j], delim, lone);
  }
  if (!rc) rc = altar_buf_append(out, "\n", 1);
  for (size_t i = 0; !rc && i < n_rows; i++) {
    for (size_t k = 0; k < rows[i].n; k++) {
      bool known = false;
      for (size_t j = 0; j < n_fieldnames && !known; j++) known = strcmp(rows[i].keys[k], fieldnames[j]) == 0;
      if (!known)
        return altar_error_set(err, ALTAR_EINVAL, "csv row %zu: key '%.100s' is not a column", i, rows[i].keys[k]);
    }
    for (size_t j = 0; !rc && j < n_fieldnames; j++) {
      if (j) rc = altar_buf_append(out, &delim, 1);
      const char *v = altar_strmap_get(&rows[i], fieldnames[j]);
      if (!rc) rc = put_field(out, v ? v : "", delim, lone);
    }
    if (!rc) rc = altar_buf_append(out, "\n", 1);
  }
  if (rc) return altar_error_set(err, ALTAR_ENOMEM, "csv: out of memory");
  return ALTAR_OK;
}
