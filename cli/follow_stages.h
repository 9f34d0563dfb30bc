/* submit --wait over a pipeline: after a stage settles, the next stage's
 * tasks are the follow-ups its groups made; follow them too, to the last. */
#ifndef ALTAR_CLI_FOLLOW_STAGES_H
#define ALTAR_CLI_FOLLOW_STAGES_H

#include "follow.h"

/* Follows the job from its first stage x (built, not yet followed) through
 * every stage its groups' follow-ups start, printing a line per stage.
 * Returns as altar_cli_follow, the worst of the stages. */
int altar_cli_follow_stages(altar_config_t *cfg, const altar_group_specs_t *groups, const char *run_id, expect_t *x,
                            long timeout_s);

#endif
