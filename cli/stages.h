/* A kind's stage in its pipeline: 1 for a kind no group's then/then_dead
 * names, else one more than the kind that starts it. */
#ifndef ALTAR_CLI_STAGES_H
#define ALTAR_CLI_STAGES_H

#include "altar/groups.h"

int altar_cli_stage_of(const altar_group_specs_t *groups, const char *kind);

#endif
