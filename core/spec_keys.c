/* Unknown keys in a hand-written spec, with the line they are on. jansson
 * (which validates the text first) keeps no positions, so this walks the
 * valid text once: a stack of containers, each knowing which schema its
 * members follow. */
#include "altar/spec_keys.h"

#include "altar/suggest.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

const char *const altar_spec_known_keys[] = {"command", "image",           "inputs",    "kind",      "labels",
                                             "outputs", "plugin_identity", "resources", "timeout_s", NULL};
const char *const altar_transfer_known_keys[] = {"digest", "locality_key", "logical_path", "uri", NULL};
const char *const altar_resources_known_keys[] = {"count", "gpu", "memory_mb", NULL};

typedef enum {
  S_FREE = 0,  /* anything goes (labels, plugin_identity, values) */
  S_SPEC,      /* an object of spec keys */
  S_SPECS,     /* an array of specs */
  S_TRANSFER,  /* an object of transfer keys */
  S_TRANSFERS, /* an array of transfers */
  S_RESOURCES, /* an object of resources keys */
} schema_t;

#define MAX_DEPTH 64
#define KEY_MAX 128

typedef struct frame {
  bool object;
  schema_t schema;
  size_t index;      /* arrays: the element being read */
  char key[KEY_MAX]; /* objects: the member being read */
} frame_t;

static const char *const *known_of(schema_t s) {
  switch (s) {
  case S_SPEC: return altar_spec_known_keys;
  case S_TRANSFER: return altar_transfer_known_keys;
  case S_RESOURCES: return altar_resources_known_keys;
  default: return NULL;
  }
}

static schema_t member_schema(schema_t parent, const char *key) {
  if (parent == S_SPEC) {
    if (!strcmp(key, "inputs") || !strcmp(key, "outputs")) return S_TRANSFERS;
    if (!strcmp(key, "resources")) return S_RESOURCES;
  }
  return S_FREE;
}

static schema_t element_schema(schema_t parent) {
  return parent == S_SPECS ? S_SPEC : parent == S_TRANSFERS ? S_TRANSFER : S_FREE;
}

/* Where the object being read sits, e.g. "outputs[0]" or "[2].resources":
 * every container above it, named by member key or element index. */
static void path_of(const frame_t *st, int depth, char *out, size_t size) {
  size_t at = 0;
  out[0] = 0;
  for (int i = 0; i + 1 < depth && at < size; i++) {
    int n = st[i].object ? snprintf(out + at, size - at, "%s%s", at ? "." : "", st[i].key)
                         : snprintf(out + at, size - at, "[%zu]", st[i].index);
    if (n < 0) break;
    at += (size_t)n;
  }
}

int altar_spec_json_check_keys(const char *text, size_t len, const char *source, size_t first_line,
                               altar_error_t *err) {
  /* Invalid JSON is the decoder's to report, with its line and column. */
  json_error_t je;
  json_t *j = json_loadb(text, len, JSON_DECODE_ANY, &je);
  if (!j) return ALTAR_OK;
  json_decref(j);
  frame_t st[MAX_DEPTH];
  int depth = 0;
  size_t line = first_line;
  bool want_key = false;
  schema_t pending = S_FREE; /* schema of the next value */
  size_t i = 0;
  while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n')) i++;
  if (i < len) pending = text[i] == '[' ? S_SPECS : S_SPEC;
  for (; i < len; i++) {
    char c = text[i];
    if (c == '\n') {
      line++;
    } else if (c == '{' || c == '[') {
      if (depth == MAX_DEPTH) return ALTAR_OK; /* deeper than any spec part: nothing left to check */
      frame_t *f = &st[depth++];
      f->object = c == '{';
      f->schema = pending;
      f->index = 0;
      f->key[0] = 0;
      want_key = f->object;
      pending = f->object ? S_FREE : element_schema(f->schema);
    } else if (c == '}' || c == ']') {
      if (depth) depth--;
      want_key = false;
    } else if (c == ',') {
      if (depth && st[depth - 1].object) want_key = true;
      else if (depth) {
        st[depth - 1].index++;
        pending = element_schema(st[depth - 1].schema);
      }
    } else if (c == '"') {
      size_t start = ++i;
      while (i < len && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
      if (want_key && depth) {
        frame_t *f = &st[depth - 1];
        size_t n = i - start;
        snprintf(f->key, sizeof f->key, "%.*s", (int)(n < KEY_MAX ? n : KEY_MAX - 1), text + start);
        const char *const *known = known_of(f->schema);
        bool ok = !known;
        for (size_t k = 0; known && known[k] && !ok; k++)
          ok = strlen(known[k]) == n && !memcmp(known[k], text + start, n);
        if (!ok) {
          char where[256], hint[160];
          path_of(st, depth, where, sizeof where);
          altar_suggest_hint(f->key, known, hint, sizeof hint);
          return altar_error_set(err, ALTAR_EINVAL, "%s:%zu: spec%s%s: unknown key \"%s\"%s", source, line,
                                 where[0] ? " " : "", where, f->key, hint);
        }
        pending = member_schema(f->schema, f->key);
        want_key = false;
      }
    }
  }
  return ALTAR_OK;
}
