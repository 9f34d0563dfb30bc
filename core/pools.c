/* Pool topics and the size bounds of the messages a job causes. */
#include "altar/pools.h"

#include "altar/codec.h"

#include <stdio.h>
#include <string.h>

int altar_pool_check(const char *field, const char *pool, altar_error_t *err) {
  size_t n = pool ? strnlen(pool, ALTAR_POOL_NAME_MAX + 1) : 0;
  if (n == 0 || n > ALTAR_POOL_NAME_MAX)
    return altar_error_set(err, ALTAR_EINVAL, "%s: a pool name has 1 to %d bytes", field, ALTAR_POOL_NAME_MAX);
  for (size_t i = 0; i < n; i++) {
    char c = pool[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok)
      return altar_error_set(err, ALTAR_EINVAL, "%s: pool '%.64s' has a character other than [A-Za-z0-9_-] at %zu",
                             field, pool, i);
  }
  if (!strcmp(pool, ALTAR_POOL_CPU))
    return altar_error_set(err, ALTAR_EINVAL, "%s: '%s' names the CPU pool; leave resources.gpu null for CPU jobs",
                           field, ALTAR_POOL_CPU);
  return ALTAR_OK;
}

int altar_pool_topic(const char *jobs, const char *pool, char *out, size_t size, altar_error_t *err) {
  int n;
  if (!pool || !strcmp(pool, ALTAR_POOL_CPU)) {
    n = snprintf(out, size, "%s", jobs);
  } else {
    int rc = altar_pool_check("resources.gpu", pool, err);
    if (rc) return rc;
    n = snprintf(out, size, "%s.%s", jobs, pool);
  }
  if (n < 0 || (size_t)n >= size)
    return altar_error_set(err, ALTAR_ETOOBIG, "the jobs topic of pool '%s' is longer than %zu bytes",
                           pool ? pool : ALTAR_POOL_CPU, size ? size - 1 : 0);
  return ALTAR_OK;
}

bool altar_pool_of_topic(const char *jobs, const char *topic, const char **ppool) {
  size_t jl = strlen(jobs);
  *ppool = NULL;
  if (!strcmp(jobs, topic)) return true;
  if (strncmp(jobs, topic, jl) || topic[jl] != '.') return false;
  if (altar_pool_check("topic", topic + jl + 1, NULL)) return false;
  *ppool = topic + jl + 1;
  return true;
}

size_t altar_strmap_bound(const altar_strmap_t *m) {
  size_t n = 5; /* map header */
  for (size_t i = 0; m && i < m->n; i++) n += 10 + strlen(m->keys[i]) + strlen(m->vals[i]);
  return n;
}

/* The submitted event's bound for a spec encoding to spec_bytes. */
static size_t status_bound_of(const altar_spec_t *spec, size_t spec_bytes) {
  return spec_bytes + altar_strmap_bound(&spec->labels) + altar_strmap_bound(spec->plugin_identity) +
         (spec->kind ? strlen(spec->kind) : 0) + ALTAR_BOUND_STATUS_FIXED;
}

int altar_spec_status_bound(const altar_spec_t *spec, size_t *psize, altar_error_t *err) {
  altar_buf_t b = {0};
  altar_error_t e = {0};
  int rc = altar_encode_spec(spec, &b, &e);
  size_t spec_bytes = b.len;
  altar_buf_free(&b);
  if (rc == ALTAR_ETOOBIG) {
    *psize = ALTAR_MAX_MESSAGE + 1u;
    return altar_error_set(err, ALTAR_ETOOBIG, "%s", e.msg);
  }
  if (rc) {
    if (err) *err = e;
    return rc;
  }
  *psize = status_bound_of(spec, spec_bytes);
  return ALTAR_OK;
}

size_t altar_spec_group_share(const altar_spec_t *spec) {
  return ALTAR_BOUND_SHARD_FIXED + altar_strmap_bound(&spec->labels) + altar_strmap_bound(spec->plugin_identity);
}

/* The spec's field that takes the most bytes, for the error message. */
static const char *largest_field(const altar_spec_t *s, size_t *pbytes) {
  size_t cmd = 0, in = 0, out = 0;
  for (size_t i = 0; i < s->n_command; i++) cmd += strlen(s->command[i]) + 5;
  for (size_t i = 0; i < s->n_inputs; i++)
    in += strlen(s->inputs[i].uri) + strlen(s->inputs[i].logical_path) + 64 +
          (s->inputs[i].locality_key ? strlen(s->inputs[i].locality_key) : 0) +
          (s->inputs[i].digest ? strlen(s->inputs[i].digest) : 0);
  for (size_t i = 0; i < s->n_outputs; i++)
    out += strlen(s->outputs[i].uri) + strlen(s->outputs[i].logical_path) + 64 +
           (s->outputs[i].locality_key ? strlen(s->outputs[i].locality_key) : 0) +
           (s->outputs[i].digest ? strlen(s->outputs[i].digest) : 0);
  struct {
    const char *name;
    size_t bytes;
  } f[] = {{"labels", 2 * altar_strmap_bound(&s->labels)},
           {"command", cmd},
           {"inputs", in},
           {"outputs", out},
           {"plugin_identity", 2 * altar_strmap_bound(s->plugin_identity)},
           {"image", s->image ? strlen(s->image) : 0},
           {"kind", s->kind ? strlen(s->kind) : 0}};
  size_t best = 0;
  for (size_t i = 1; i < sizeof f / sizeof f[0]; i++)
    if (f[i].bytes > f[best].bytes) best = i;
  *pbytes = f[best].bytes;
  return f[best].name;
}

/* rc: how the spec's encoding went (0 or ALTAR_ETOOBIG), size: the bound. */
static int carriable(const altar_spec_t *spec, int rc, size_t size, altar_error_t *err) {
  if (!rc && size <= ALTAR_MAX_MESSAGE) return ALTAR_OK;
  size_t fb;
  const char *field = largest_field(spec, &fb);
  if (rc)
    return altar_error_set(err, ALTAR_ETOOBIG,
                           "%s: about %zu bytes; the spec alone encodes to more than the %u bytes a message may carry",
                           field, fb, ALTAR_MAX_MESSAGE);
  return altar_error_set(err, ALTAR_ETOOBIG,
                         "%s: about %zu bytes (labels count twice: in the spec and in its handle); the job's status "
                         "event would take up to %zu bytes, more than the %u bytes a message may carry",
                         field, fb, size, ALTAR_MAX_MESSAGE);
}

int altar_spec_check_carriable(const altar_spec_t *spec, altar_error_t *err) {
  size_t size = 0;
  int rc = altar_spec_status_bound(spec, &size, NULL);
  if (rc && rc != ALTAR_ETOOBIG) return altar_error_set(err, rc, "spec: cannot be encoded");
  return carriable(spec, rc, size, err);
}

int altar_spec_check_carriable_encoded(const altar_spec_t *spec, size_t spec_bytes, altar_error_t *err) {
  return carriable(spec, 0, status_bound_of(spec, spec_bytes), err);
}
