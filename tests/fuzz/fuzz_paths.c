/* libFuzzer: the path resolver on arbitrary bytes. A resolved path must lie
 * under the root and hold no "." or ".." segment; anything else must fail. */
#include "fuzz_target.h"
#include "altar/paths.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char root[] = "/mnt/volume";
  char *out = NULL;
  if (altar_path_resolven(root, (const char *)data, size, &out, NULL) == 0) {
    size_t rl = sizeof root - 1;
    if (strncmp(out, root, rl) != 0 || (out[rl] != '\0' && out[rl] != '/')) abort();
    if (strstr(out, "/../") || strstr(out, "/./") || strstr(out, "//")) abort();
    size_t n = strlen(out);
    if (n >= 3 && strcmp(out + n - 3, "/..") == 0) abort();
    if (memchr(data, '\0', size)) abort();
    free(out);
  } else if (out) {
    abort(); /* an error never hands back a path */
  }
  return 0;
}
