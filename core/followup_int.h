/* Internal to core/: the follow-up template's YAML parser, called by the
 * group config loader for `then:` and `then_dead:`. */
#ifndef ALTAR_CORE_FOLLOWUP_INT_H
#define ALTAR_CORE_FOLLOWUP_INT_H

#include "altar/followup.h"

#include <yaml.h>

/* Parses template node n (at path, e.g. "groups.train.then") of doc read
 * from file; placeholders are checked against gb. *pout is the caller's
 * (altar_followup_free). ALTAR_ECONFIG "FILE:LINE: PATH.FIELD: ...". */
int altar__followup_parse(yaml_document_t *doc, const char *file, const yaml_node_t *n, const char *path,
                          const altar_group_by_t *gb, altar_followup_t **pout, altar_error_t *err);

#endif
