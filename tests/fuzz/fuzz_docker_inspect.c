/* libFuzzer target: the docker backend's `docker inspect` JSON reader and its
 * RFC 3339 time parser on arbitrary bytes (output of another program, so
 * untrusted). Neither may crash, leak, or accept what it then misreports. */
#include "fuzz_target.h"
#include "backends/docker_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  altar_docker_info_t *infos = NULL;
  size_t n = 0;
  altar_error_t err = {0};
  if (altar__docker_parse_inspect((const char *)data, size, &infos, &n, &err) == 0) {
    for (size_t i = 0; i < n; i++) {
      /* Whatever was accepted is a valid id and a bounded status. */
      if (!altar__docker_valid_id(infos[i].id)) abort();
      if (strlen(infos[i].status) >= sizeof infos[i].status) abort();
    }
  }
  free(infos);
  char s[64];
  size_t k = size < sizeof s - 1 ? size : sizeof s - 1;
  memcpy(s, data, k);
  s[k] = '\0';
  double t;
  (void)altar__docker_parse_time(s, &t);
  return 0;
}
