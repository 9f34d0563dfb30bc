/* libFuzzer: the Job watch's stream reader on arbitrary bytes, fed in two
 * chunks split where the input says; it must never crash or leak. */
#include "fuzz_target.h"
#include "backends/k8s_api.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  altar_k8s_watch_t *w = altar__k8s_watch_test_new();
  if (!w) return 0;
  size_t cut = size ? data[0] % (size + 1) : 0;
  bool expired = false;
  if (altar__k8s_watch_test_feed(w, (const char *)data, cut, &expired) == 0)
    altar__k8s_watch_test_feed(w, (const char *)data + cut, size - cut, &expired);
  const char *name = "job-a";
  altar_k8s_watch_view_t v;
  altar__k8s_watch_lookup(w, &name, 1, &v);
  altar__k8s_watch_close(w);
  return 0;
}
