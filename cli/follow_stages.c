/* Following a pipeline stage by stage. The next stage's tasks are made
 * here from the settled group events exactly as the reconciler makes them
 * (the same function), so their task keys are known without asking it. */
#include "follow_stages.h"
#include "altar/followup.h"
#include "reconciler/followup_stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool has_stages(const altar_group_specs_t *groups) {
  for (size_t i = 0; i < groups->n; i++)
    if (groups->v[i].then || groups->v[i].then_dead) return true;
  return false;
}

/* The follow-up specs of x's kept events; failed ones only counted. */
static int next_specs(altar_config_t *cfg, const altar_group_specs_t *groups, const expect_t *x, altar_spec_t **pspecs,
                      size_t *pn, size_t *pfailed) {
  *pspecs = NULL;
  *pn = *pfailed = 0;
  altar_spec_t *v = calloc(x->n_events ? x->n_events : 1, sizeof *v);
  if (!v) return -1;
  size_t n = 0;
  for (size_t i = 0; i < x->n_events; i++) {
    const altar_group_event_t *g = &x->events[i];
    const altar_group_spec_t *gs = altar_group_specs_find(groups, g->kind);
    const altar_followup_t *f = altar_followup_for(gs, g);
    if (!f) continue;
    altar_spec_t *s = NULL;
    altar_error_t e = {0};
    altar_followup_manifest_t man = {0}; /* the reconciler writes it; only its digest names the task */
    int brc = altar_followup_build_manifest(f, gs, g, &s, &man, &e);
    altar_followup_manifest_clear(&man);
    if (brc) {
      (*pfailed)++;
      fprintf(stderr, "altar submit --wait: follow-up %s of group %s:%s could not be made: %s\n", f->tmpl->kind,
              g->kind, g->group_key, e.msg);
      continue;
    }
    v[n++] = *s; /* the struct moves; its members stay */
    free(s);
  }
  (void)cfg;
  *pspecs = v;
  *pn = n;
  return 0;
}

int altar_cli_follow_stages(altar_config_t *cfg, const altar_group_specs_t *groups, const char *run_id, expect_t *x,
                            long timeout_s) {
  bool chain = has_stages(groups);
  x->keep_events = chain;
  int worst = altar_cli_follow(cfg, run_id, x, timeout_s, NULL, NULL);
  expect_t cur = *x;
  memset(x, 0, sizeof *x); /* cur owns it now; x is cleared by the caller, empty */
  for (int stage = 2; chain && worst != 2 && worst != 3; stage++) {
    altar_spec_t *specs = NULL;
    size_t n = 0, failed = 0;
    if (next_specs(cfg, groups, &cur, &specs, &n, &failed)) {
      worst = 2;
      break;
    }
    altar_cli_expect_clear(&cur);
    if (!n) {
      free(specs);
      if (failed && worst == 0) worst = 1;
      break;
    }
    fprintf(stderr, "altar submit --wait: stage %d: %zu follow-up task%s of kind %s\n", stage, n, n == 1 ? "" : "s",
            specs[0].kind);
    int rc = altar_cli_expect_build(&cur, groups, cfg->topics.jobs, specs, n) ? 2 : 0;
    for (size_t i = 0; i < n; i++) altar_spec_clear(&specs[i]);
    free(specs);
    if (rc) {
      worst = 2;
      break;
    }
    cur.keep_events = true;
    rc = altar_cli_follow(cfg, run_id, &cur, timeout_s, NULL, NULL);
    if (rc > worst) worst = rc;
    if (failed && worst == 0) worst = 1;
  }
  altar_cli_expect_clear(&cur);
  return worst;
}
