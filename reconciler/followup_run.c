/* Follow-ups in the daemon: staged with their group event, guarded at start. */
#include "reconciler/followup_run.h"
#include "reconciler/followup_stage.h"

#include <stdio.h>
#include <string.h>

int altar__followup_stage(altar__outbox_t *ob, const altar_reconciler_opts_t *o, const altar_group_event_t *g,
                          altar_reconciler_stats_t *stats, altar_error_t *err) {
  /* Without stages this is one look-up of the kind. */
  const altar_group_spec_t *gs = altar_group_specs_find(o->groups, g->kind);
  if (!gs || (!gs->then && !gs->then_dead)) return ALTAR_OK;
  altar__followup_out_t f;
  int rc = altar__followup_make(o->groups, o->topics, g, &f, err);
  for (size_t i = 0; !rc && i < f.n; i++) {
    const char *hn = f.failed ? NULL : ALTAR_FOLLOWUP_HEADER;
    rc = altar__outbox_stage(ob, f.recs[i].topic, f.recs[i].key, f.recs[i].value.data, f.recs[i].value.len, hn,
                             hn ? g->event_id : NULL, NULL, err);
  }
  if (!rc && f.n) {
    stats->followups++;
    if (f.failed) {
      stats->followups_failed++;
      if (!o->quiet)
        fprintf(stderr, "altar reconciler: %s: recorded as failed (%s)\n", f.why.msg, ALTAR_FOLLOWUP_INVALID);
    }
  }
  altar__followup_out_clear(&f);
  return rc;
}

static int guard_skip(void *ctx, const char *topic, const char *key, const void *value, size_t vlen,
                      const altar_header_t *h, size_t nh, bool *pskip, altar_error_t *err) {
  altar__followup_guard_t *g = ctx;
  (void)topic, (void)value, (void)vlen;
  *pskip = false;
  bool followup = false;
  for (size_t i = 0; i < nh && !followup; i++) followup = h[i].name && !strcmp(h[i].name, ALTAR_FOLLOWUP_HEADER);
  if (!followup || !key) return ALTAR_OK;
  if (!g->loaded) {
    char topics[16][512];
    const char *names[16];
    size_t n = altar__followup_topics(g->o->groups, g->o->topics, topics, 16);
    for (size_t i = 0; i < n; i++) names[i] = topics[i];
    int rc = altar__keys_seen_read(&g->seen, g->o->transport_name, g->o->transport_props, names, n, err);
    if (rc) return altar_error_prefix(err, "reading the jobs topics for follow-ups already out");
    g->loaded = true;
  }
  *pskip = altar__keys_seen_has(&g->seen, key);
  return ALTAR_OK;
}

void altar__followup_guard_begin(altar__followup_guard_t *g, altar__outbox_t *ob, const altar_reconciler_opts_t *o) {
  memset(g, 0, sizeof *g);
  g->o = o;
  bool stages = false;
  for (size_t i = 0; i < o->groups->n && !stages; i++) stages = o->groups->v[i].then || o->groups->v[i].then_dead;
  if (!stages || !o->transport_name) return; /* nothing to guard, or no way to look */
  ob->skip = guard_skip;
  ob->skip_ctx = g;
}

void altar__followup_guard_end(altar__followup_guard_t *g, altar__outbox_t *ob, altar_reconciler_stats_t *stats) {
  stats->followups_skipped += ob->skipped;
  ob->skip = NULL;
  ob->skip_ctx = NULL;
  altar__keys_seen_free(&g->seen);
}
