/* libFuzzer: the CSV decoder on arbitrary bytes, with both delimiters; what
 * parses must format and parse back to the same rows. */
#include "fuzz_target.h"
#include "altar/storage.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void roundtrip(const uint8_t *data, size_t size, char delim) {
  altar_csv_t a;
  if (altar_csv_parse((const char *)data, size, delim, NULL, 0, &a, NULL)) return;
  altar_buf_t b = {0};
  if (a.n_fields && !altar_csv_format(a.rows, a.n_rows, delim, (const char *const *)a.fields, a.n_fields, &b, NULL)) {
    altar_csv_t c;
    /* Duplicate column names collapse in the maps, so compare only when unique. */
    bool unique = true;
    for (size_t i = 0; i < a.n_fields && unique; i++)
      for (size_t j = i + 1; j < a.n_fields && unique; j++) unique = strcmp(a.fields[i], a.fields[j]) != 0;
    if (unique && !altar_csv_parse((const char *)b.data, b.len, delim, NULL, 0, &c, NULL)) {
      if (c.n_rows != a.n_rows) abort();
      for (size_t i = 0; i < a.n_rows; i++)
        if (!altar_strmap_equal(&a.rows[i], &c.rows[i])) abort();
      altar_csv_clear(&c);
    }
  }
  altar_buf_free(&b);
  altar_csv_clear(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  roundtrip(data, size, ',');
  roundtrip(data, size, '\t');
  return 0;
}
