/* Stage numbers from the group config (the loader refuses loops). */
#include "stages.h"
#include "altar/followup.h"

#include <string.h>

static int stage_at(const altar_group_specs_t *groups, const char *kind, size_t depth) {
  if (!groups || depth > groups->n) return 1;
  int best = 1;
  for (size_t i = 0; i < groups->n; i++) {
    const altar_followup_t *fs[2] = {groups->v[i].then, groups->v[i].then_dead};
    for (size_t k = 0; k < 2; k++) {
      if (!fs[k] || strcmp(fs[k]->tmpl->kind, kind)) continue;
      int s = stage_at(groups, groups->v[i].kind, depth + 1) + 1;
      if (s > best) best = s;
    }
  }
  return best;
}

int altar_cli_stage_of(const altar_group_specs_t *groups, const char *kind) { return stage_at(groups, kind, 0); }
