/* YAML node → JSON value (yaml_json.h). */
#include "core/yaml_json.h"

#include "altar/spec.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static json_t *plain_scalar(const char *s) {
  if (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL")) return json_null();
  if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) return json_true();
  if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) return json_false();
  char *end;
  errno = 0;
  long long i = strtoll(s, &end, 10);
  if (!*end && !errno) return json_integer((json_int_t)i);
  errno = 0;
  double d = strtod(s, &end);
  /* Only plain decimal numbers: "inf", "nan" and hex stay strings. */
  if (!*end && !errno && isfinite(d) && strspn(s, "+-0123456789.eE") == strlen(s)) return json_real(d);
  return json_string(s);
}

static json_t *convert(yaml_document_t *doc, yaml_node_t *n, unsigned depth) {
  if (!n || depth > ALTAR_MAX_DEPTH) return NULL;
  if (n->type == YAML_SCALAR_NODE) {
    const char *s = (const char *)n->data.scalar.value;
    return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? plain_scalar(s) : json_string(s);
  }
  if (n->type == YAML_SEQUENCE_NODE) {
    json_t *a = json_array();
    for (yaml_node_item_t *it = n->data.sequence.items.start; a && it < n->data.sequence.items.top; it++) {
      json_t *e = convert(doc, yaml_document_get_node(doc, *it), depth + 1);
      if (!e || json_array_append_new(a, e)) {
        json_decref(a);
        return NULL;
      }
    }
    return a;
  }
  if (n->type != YAML_MAPPING_NODE) return NULL;
  json_t *o = json_object();
  for (yaml_node_pair_t *p = n->data.mapping.pairs.start; o && p < n->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(doc, p->key);
    const char *key = k && k->type == YAML_SCALAR_NODE ? (const char *)k->data.scalar.value : NULL;
    json_t *v = key && !json_object_get(o, key) ? convert(doc, yaml_document_get_node(doc, p->value), depth + 1) : NULL;
    if (!v || json_object_set_new(o, key, v)) {
      json_decref(o);
      return NULL;
    }
  }
  return o;
}

json_t *altar__yaml_to_json(yaml_document_t *doc, yaml_node_t *node) { return convert(doc, node, 0); }
