/* altar — a group's follow-up stage: the task a group kind submits when one
 * of its groups fires (`then:`) or is dead-lettered (`then_dead:`), made
 * from a spec template, with the group's labels carried over and the
 * members' outputs as its inputs. */
#ifndef ALTAR_FOLLOWUP_H
#define ALTAR_FOLLOWUP_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/codec.h"
#include "altar/error.h"
#include "altar/groups.h"
#include "altar/spec.h"

/* The label every follow-up carries: the id of the group event it follows.
 * It makes the follow-up's task key a function of that event id, so one
 * group outcome can only ever name one follow-up. */
#define ALTAR_FOLLOWUP_LABEL "altar.after"

/* A template: a spec whose strings (image, command, label values, output
 * uri and logical path, inputs_dir) may hold {{NAME}} placeholders, NAME
 * being one of the kind's group_by labels or event_id, group_key, kind (the
 * group's) or inputs (the instantiated inputs_dir; not in inputs_dir).
 * Single braces are text, so shell's ${VAR} passes through. */
typedef struct altar_followup {
  altar_spec_t *tmpl;
  char *inputs_dir; /* where the members' outputs land: <inputs_dir>/<k>/<their logical path> */
  int config_line;  /* of the template in its file */
} altar_followup_t;

void altar_followup_free(altar_followup_t *f);

/* Builds the follow-up of group event g (of group spec gs) from f: the
 * template with placeholders replaced, labels = the labels every listed
 * member shares, then the template's, then ALTAR_FOLLOWUP_LABEL = event id;
 * inputs = g's outputs under inputs_dir, then the template's. The result is
 * validated (altar_spec_validate). *pout is the caller's (altar_spec_free).
 * ALTAR_EINVAL with err saying why when it cannot be made; ALTAR_ENOMEM. */
int altar_followup_build(const altar_followup_t *f, const altar_group_spec_t *gs, const altar_group_event_t *g,
                         altar_spec_t **pout, altar_error_t *err);

/* The follow-up of g that gs declares for g's outcome (then / then_dead), or NULL. */
const altar_followup_t *altar_followup_for(const altar_group_spec_t *gs, const altar_group_event_t *g);

/* Checks the stages of specs once all are loaded: every template's kind has
 * a group spec of its own and no chain of stages comes back to a kind it
 * left. ALTAR_ECONFIG "FILE:LINE: groups.KIND.then.kind: ..." naming file. */
int altar_followup_check_chain(const altar_group_specs_t *specs, const char *file, altar_error_t *err);

ALTAR_API_END

#endif
