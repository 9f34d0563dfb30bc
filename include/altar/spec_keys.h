/* altar — strict reading of specs a person wrote: every object key of a spec
 * (and of its transfers and resources) must be one the spec model knows.
 * Only the CLI's readers of spec files call this; the wire decoders stay
 * lenient, so a newer writer's extra keys never break an older reader. */
#ifndef ALTAR_SPEC_KEYS_H
#define ALTAR_SPEC_KEYS_H

#include "altar/error.h"

#include <stddef.h>

/* Checks the keys of the JSON text (invalid JSON passes: the decoder reports it): a spec
 * object, or an array of them when the text is an array. first_line is the
 * line number of text[0] in its file (1 for a whole file; the line for one
 * JSON Lines entry). On the first unknown key: ALTAR_EINVAL with
 * "SOURCE:LINE: spec: unknown key \"timeout\" (did you mean \"timeout_s\"?)";
 * paths below the spec are named ("outputs[0]: unknown key …"). */
int altar_spec_json_check_keys(const char *text, size_t len, const char *source, size_t first_line, altar_error_t *err);

/* The keys a spec, a transfer and a resources object may carry
 * (NULL-terminated). */
extern const char *const altar_spec_known_keys[];
extern const char *const altar_transfer_known_keys[];
extern const char *const altar_resources_known_keys[];

#endif
