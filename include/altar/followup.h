/* altar — a group's follow-up stage: the task a group kind submits when one
 * of its groups fires (`then:`) or is dead-lettered (`then_dead:`), made
 * from a spec template, with the group's labels carried over and the
 * members' outputs as its inputs. */
#ifndef ALTAR_FOLLOWUP_H
#define ALTAR_FOLLOWUP_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/buf.h"
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
  /* Where the manifest of a group whose outputs are more than one task's
   * inputs may carry is written (a template like inputs_dir); NULL = beside
   * the group's first output: <its directory>/altar-inputs-<event_id>.jsonl. */
  char *manifest_uri;
  int config_line; /* of the template in its file */
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

/* The inputs one follow-up takes from its group's outputs: at most this
 * many, within this many bytes (by the same bound as a group event's
 * outputs). Past either, the follow-up gets one input instead: the
 * manifest listing them all (altar_followup_build_manifest). */
#define ALTAR_FOLLOWUP_MAX_INPUTS ALTAR_MAX_ARRAY
#define ALTAR_FOLLOWUP_MAX_INPUT_BYTES (ALTAR_MAX_MESSAGE / 4)

/* A follow-up's manifest: what the reconciler writes to uri before it
 * submits the follow-up, whose one input from the group it is. content:
 * one compact JSON object per output, in the event's order, with the keys
 * the inputs would have had: {"digest", "locality_key", "logical_path"
 * (<inputs_dir>/<k>/<the member's logical path>), "uri"}. */
typedef struct altar_followup_manifest {
  char *uri;
  altar_buf_t content;
} altar_followup_manifest_t;
void altar_followup_manifest_clear(altar_followup_manifest_t *m);

/* Whether g's outputs are more than f's follow-up may take as inputs. */
bool altar_followup_needs_manifest(const altar_followup_t *f, const altar_group_event_t *g);

/* As altar_followup_build; when altar_followup_needs_manifest, the
 * follow-up's inputs from the group are one file instead, the manifest
 * (*pm filled: write pm->content to pm->uri before the follow-up runs): its
 * input is {uri, logical_path <inputs_dir>/manifest.jsonl, digest of the
 * content}, and its label altar.inputs_manifest = that logical path. pm
 * NULL: such a group's follow-up is refused (ALTAR_EINVAL) as before. */
int altar_followup_build_manifest(const altar_followup_t *f, const altar_group_spec_t *gs, const altar_group_event_t *g,
                                  altar_spec_t **pout, altar_followup_manifest_t *pm, altar_error_t *err);
#define ALTAR_FOLLOWUP_MANIFEST_LABEL "altar.inputs_manifest"

/* The follow-up of g that gs declares for g's outcome (then / then_dead), or NULL. */
const altar_followup_t *altar_followup_for(const altar_group_spec_t *gs, const altar_group_event_t *g);

/* Checks the stages of specs once all are loaded: every template's kind has
 * a group spec of its own and no chain of stages comes back to a kind it
 * left. ALTAR_ECONFIG "FILE:LINE: groups.KIND.then.kind: ..." naming file. */
int altar_followup_check_chain(const altar_group_specs_t *specs, const char *file, altar_error_t *err);

ALTAR_API_END

#endif
