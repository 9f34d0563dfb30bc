/* A YAML node as a JSON value, for settings whose value is a mapping handed
 * to a plug-in as JSON text (backend.options of the python backend). */
#ifndef ALTAR_CORE_YAML_JSON_H
#define ALTAR_CORE_YAML_JSON_H

#include <jansson.h>
#include <yaml.h>

/* Mappings become objects (keys must be scalars), sequences arrays; a plain
 * scalar that reads as a YAML 1.2 core-schema null, boolean, integer or
 * float becomes that, every other scalar (and every quoted one) a string.
 * NULL when nesting passes ALTAR_MAX_DEPTH, a key is not a scalar or a key
 * repeats, or memory runs out. The caller decrefs. */
json_t *altar__yaml_to_json(yaml_document_t *doc, yaml_node_t *node);

#endif
