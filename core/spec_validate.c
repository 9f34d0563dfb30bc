/* altar_spec_validate: everything a spec must satisfy before anything runs.
 * Messages name the field, e.g. "inputs[1].digest: malformed (...)". */
#include "altar/digest.h"
#include "altar/paths.h"
#include "altar/spec.h"

#include <stdio.h>
#include <string.h>

static int check_string(const char *field, const char *s, bool required, altar_error_t *err) {
  if (!s) {
    if (required) return altar_error_set(err, ALTAR_EINVAL, "%s: required", field);
    return ALTAR_OK;
  }
  size_t n = strnlen(s, (size_t)ALTAR_MAX_STRING + 1);
  if (required && n == 0) return altar_error_set(err, ALTAR_EINVAL, "%s: must not be empty", field);
  if (n > ALTAR_MAX_STRING)
    return altar_error_set(err, ALTAR_EINVAL, "%s: longer than %u bytes", field, ALTAR_MAX_STRING);
  return ALTAR_OK;
}

static int check_map(const char *field, const altar_strmap_t *m, altar_error_t *err) {
  if (!m) return ALTAR_OK;
  if (m->n > ALTAR_MAX_MAP)
    return altar_error_set(err, ALTAR_EINVAL, "%s: %zu entries, more than %u", field, m->n, ALTAR_MAX_MAP);
  char f[128];
  for (size_t i = 0; i < m->n; i++) {
    snprintf(f, sizeof f, "%s key #%zu", field, i);
    int rc = check_string(f, m->keys[i], true, err);
    if (rc) return rc;
    /* An empty value is legal; only presence and length matter. */
    snprintf(f, sizeof f, "%s[%.64s]", field, m->keys[i]);
    if (!m->vals[i]) return altar_error_set(err, ALTAR_EINVAL, "%s: required", f);
    rc = check_string(f, m->vals[i], false, err);
    if (rc) return rc;
  }
  return ALTAR_OK;
}

static int check_transfers(const char *list, const altar_transfer_t *t, size_t n, altar_error_t *err) {
  if (n > ALTAR_MAX_ARRAY)
    return altar_error_set(err, ALTAR_EINVAL, "%s: %zu entries, more than %u", list, n, ALTAR_MAX_ARRAY);
  if (n && !t) return altar_error_set(err, ALTAR_EINVAL, "%s: missing entries", list);
  char f[96];
  for (size_t i = 0; i < n; i++) {
    snprintf(f, sizeof f, "%s[%zu].uri", list, i);
    int rc = check_string(f, t[i].uri, true, err);
    if (rc) return rc;
    snprintf(f, sizeof f, "%s[%zu].logical_path", list, i);
    rc = check_string(f, t[i].logical_path, true, err);
    if (rc) return rc;
    altar_error_t perr = {0};
    if (altar_logical_path_check(t[i].logical_path, &perr))
      return altar_error_set(err, ALTAR_EINVAL, "%s: %s", f, perr.msg);
    snprintf(f, sizeof f, "%s[%zu].locality_key", list, i);
    rc = check_string(f, t[i].locality_key, false, err);
    if (rc) return rc;
    if (t[i].digest) {
      snprintf(f, sizeof f, "%s[%zu].digest", list, i);
      rc = altar_digest_check(f, t[i].digest, err);
      if (rc) return rc;
    }
  }
  return ALTAR_OK;
}

int altar_spec_validate(const altar_spec_t *spec, altar_error_t *err) {
  if (!spec) return altar_error_set(err, ALTAR_EINVAL, "spec: required");
  int rc;
  if ((rc = check_string("kind", spec->kind, true, err))) return rc;
  if ((rc = check_string("image", spec->image, true, err))) return rc;
  if (spec->n_command == 0 || !spec->command)
    return altar_error_set(err, ALTAR_EINVAL, "command: must have at least one element");
  if (spec->n_command > ALTAR_MAX_ARRAY)
    return altar_error_set(err, ALTAR_EINVAL, "command: %zu elements, more than %u", spec->n_command, ALTAR_MAX_ARRAY);
  if ((rc = check_string("command[0]", spec->command[0], true, err))) return rc;
  char f[64];
  for (size_t i = 1; i < spec->n_command; i++) {
    /* Later arguments may be empty strings; they must exist and be bounded. */
    snprintf(f, sizeof f, "command[%zu]", i);
    if (!spec->command[i]) return altar_error_set(err, ALTAR_EINVAL, "%s: required", f);
    if ((rc = check_string(f, spec->command[i], false, err))) return rc;
  }
  if ((rc = check_map("labels", &spec->labels, err))) return rc;
  if ((rc = check_transfers("inputs", spec->inputs, spec->n_inputs, err))) return rc;
  if ((rc = check_transfers("outputs", spec->outputs, spec->n_outputs, err))) return rc;
  if ((rc = check_string("resources.gpu", spec->resources.gpu, false, err))) return rc;
  if (spec->resources.gpu && !spec->resources.gpu[0])
    return altar_error_set(err, ALTAR_EINVAL, "resources.gpu: must be a pool name or absent, not empty");
  if (spec->resources.count < 1)
    return altar_error_set(err, ALTAR_EINVAL, "resources.count: %lld, must be at least 1",
                           (long long)spec->resources.count);
  if (spec->resources.memory_mb.set && spec->resources.memory_mb.v <= 0)
    return altar_error_set(err, ALTAR_EINVAL, "resources.memory_mb: %lld, must be positive when set",
                           (long long)spec->resources.memory_mb.v);
  if (spec->timeout_s.set && spec->timeout_s.v <= 0)
    return altar_error_set(err, ALTAR_EINVAL, "timeout_s: %lld, must be positive when set",
                           (long long)spec->timeout_s.v);
  if (spec->n_avoid_hosts > ALTAR_MAX_ARRAY)
    return altar_error_set(err, ALTAR_EINVAL, "avoid_hosts: %zu entries, more than %u", spec->n_avoid_hosts,
                           ALTAR_MAX_ARRAY);
  for (size_t i = 0; i < spec->n_avoid_hosts; i++) {
    snprintf(f, sizeof f, "avoid_hosts[%zu]", i);
    if ((rc = check_string(f, spec->avoid_hosts[i], true, err))) return rc;
  }
  if ((rc = check_map("plugin_identity", spec->plugin_identity, err))) return rc;
  return ALTAR_OK;
}
