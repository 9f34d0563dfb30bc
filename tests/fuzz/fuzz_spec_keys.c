/* libFuzzer: the strict key check of hand-written specs and the JSON error
 * position on arbitrary bytes. Either the text passes or the error names the
 * source and an unknown key; a position stays inside the text. */
#include "fuzz_target.h"
#include "altar/json_pos.h"
#include "altar/spec_keys.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  altar_error_t err = {0};
  int rc = altar_spec_json_check_keys(text, size, "f.json", 1, &err);
  if (rc && (strncmp(err.msg, "f.json:", 7) != 0 || !strstr(err.msg, "unknown key"))) abort();
  int line = 0, col = 0;
  bool comma = false;
  altar_json_error_position(text, size, size / 2, &line, &col, &comma);
  if (line < 1 || col < 1 || (size_t)line > size + 1 || (size_t)col > size + 1) abort();
  return 0;
}
