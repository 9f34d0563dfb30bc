/* libFuzzer: dropping managedFields from arbitrary bytes. It must stay
 * inside the text, never grow it, and, when the text is JSON, give the
 * same document with the member removed. */
#include "fuzz_target.h"
#include "backends/k8s_json_trim.h"

#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void strip(json_t *v) {
  if (json_is_object(v)) {
    json_object_del(v, "managedFields");
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) strip(x);
  } else if (json_is_array(v)) {
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) strip(x);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *t = malloc(size ? size : 1);
  if (!t) return 0;
  memcpy(t, data, size);
  size_t n = altar__k8s_json_drop_member(t, size, "managedFields");
  if (n > size) abort();
  json_t *before = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
  if (before) {
    json_t *after = json_loadb(t, n, JSON_DECODE_ANY, NULL);
    strip(before);
    if (!after || !json_equal(before, after)) abort();
    json_decref(after);
  }
  json_decref(before);
  free(t);
  return 0;
}
