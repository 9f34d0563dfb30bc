/* libFuzzer: the YAML group config reader on arbitrary bytes. A load either
 * fails with ECONFIG (or ENOMEM) and a message naming the file, or yields
 * specs whose every field is usable. */
#include "fuzz_target.h"
#include "altar/groups.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  altar_group_specs_t s = {0};
  altar_error_t err = {0};
  int rc = altar_group_specs_load_string((const char *)data, size, "fuzz.yaml", &s, &err);
  if (rc) {
    if (rc != ALTAR_ECONFIG && rc != ALTAR_ENOMEM) abort();
    if (rc == ALTAR_ECONFIG && strncmp(err.msg, "fuzz.yaml", 9) != 0) abort();
  } else {
    for (size_t i = 0; i < s.n; i++) {
      const altar_group_spec_t *g = &s.v[i];
      if (!g->kind || !*g->kind) abort();
      if ((unsigned)g->ready_when.rule > ALTAR_READY_ALL_EXPECTED_FOLDS) abort();
      if (g->failed_policy == ALTAR_ON_FAILED_RETRY && g->max_restarts < 1) abort();
      for (size_t j = 0; j < g->group_by.n; j++)
        if (!g->group_by.labels[j]) abort();
    }
  }
  altar_group_specs_clear(&s);
  return 0;
}
