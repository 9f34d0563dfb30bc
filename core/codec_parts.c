/* msgpack forms of the model's parts that messages embed: spec, transfer,
 * resources, handle, failure, state. Keys are written in bytewise order;
 * schemas/README.md lists each field with its default. */
#include "core/codec_int.h"

#include <stdlib.h>
#include <string.h>

#define W_VOID(call) ((call), 0)

/* ---- transfer ---- */

static int wr_transfer(altar__wr_t *w, const altar_transfer_t *t) {
  altar__wr_map(w, 4);
  ALTAR__WR_FIELD(w, "digest", altar__wr_opt_str(w, t->digest));
  ALTAR__WR_FIELD(w, "locality_key", altar__wr_opt_str(w, t->locality_key));
  ALTAR__WR_FIELD(w, "logical_path", altar__wr_str(w, t->logical_path));
  ALTAR__WR_FIELD(w, "uri", altar__wr_str(w, t->uri));
  return ALTAR_OK;
}

int altar__wr_transfers(altar__wr_t *w, const altar_transfer_t *t, size_t n) {
  int rc = altar__wr_array(w, n);
  for (size_t i = 0; !rc && i < n; i++) rc = altar__wr_at_index(w, i, wr_transfer(w, &t[i]));
  return rc;
}

enum { TR_DIGEST, TR_LOCALITY_KEY, TR_LOGICAL_PATH, TR_URI };
static const char *const transfer_keys[] = {"digest", "locality_key", "logical_path", "uri", NULL};

static int rd_transfer_field(altar__rd_t *r, void *ctx, int idx, const msgpack_object *v) {
  altar_transfer_t *t = ctx;
  switch (idx) {
  case TR_DIGEST: return altar__rd_opt_str(r, v, &t->digest);
  case TR_LOCALITY_KEY: return altar__rd_opt_str(r, v, &t->locality_key);
  case TR_LOGICAL_PATH: return altar__rd_str(r, v, &t->logical_path);
  case TR_URI: return altar__rd_str(r, v, &t->uri);
  }
  return ALTAR_OK;
}

int altar__rd_transfers(altar__rd_t *r, const msgpack_object *o, altar_transfer_t **pv, size_t *pn) {
  if (o->type != MSGPACK_OBJECT_ARRAY) return altar__rd_fail(r, ALTAR_EDECODE, "expected array of transfers");
  size_t n = o->via.array.size;
  if (n > ALTAR_MAX_ARRAY) return altar__rd_fail_size(r, "array", n, ALTAR_MAX_ARRAY);
  if (!n) return ALTAR_OK;
  altar_transfer_t *t = calloc(n, sizeof *t);
  if (!t) return altar__rd_fail(r, ALTAR_ENOMEM, "out of memory");
  *pv = t;
  *pn = n; /* zeroed entries clear safely if an element fails */
  for (size_t i = 0; i < n; i++) {
    size_t old = altar__path_index(&r->path, i);
    int rc = altar__rd_struct(r, &o->via.array.ptr[i], transfer_keys, (1u << TR_LOGICAL_PATH) | (1u << TR_URI),
                              rd_transfer_field, &t[i]);
    altar__path_pop(&r->path, old);
    if (rc) return rc;
  }
  return ALTAR_OK;
}

/* ---- resources ---- */

static int wr_resources(altar__wr_t *w, const altar_resources_t *res) {
  altar__wr_map(w, 3);
  ALTAR__WR_FIELD(w, "count", W_VOID(altar__wr_i64(w, res->count)));
  ALTAR__WR_FIELD(w, "gpu", altar__wr_opt_str(w, res->gpu));
  ALTAR__WR_FIELD(w, "memory_mb", W_VOID(altar__wr_opt_i64(w, res->memory_mb)));
  return ALTAR_OK;
}

enum { RES_COUNT, RES_GPU, RES_MEMORY_MB };
static const char *const resources_keys[] = {"count", "gpu", "memory_mb", NULL};

static int rd_resources_field(altar__rd_t *r, void *ctx, int idx, const msgpack_object *v) {
  altar_resources_t *res = ctx;
  switch (idx) {
  case RES_COUNT: return altar__rd_i64(r, v, &res->count);
  case RES_GPU: return altar__rd_opt_str(r, v, &res->gpu);
  case RES_MEMORY_MB: return altar__rd_opt_i64(r, v, &res->memory_mb);
  }
  return ALTAR_OK;
}

/* ---- spec ---- */

/* avoid_hosts is placement, not identity: it never appears here. */
int altar__wr_spec(altar__wr_t *w, const altar_spec_t *s) {
  altar__wr_map(w, 9);
  ALTAR__WR_FIELD(w, "command", altar__wr_strv(w, s->command, s->n_command));
  ALTAR__WR_FIELD(w, "image", altar__wr_str(w, s->image));
  ALTAR__WR_FIELD(w, "inputs", altar__wr_transfers(w, s->inputs, s->n_inputs));
  ALTAR__WR_FIELD(w, "kind", altar__wr_str(w, s->kind));
  ALTAR__WR_FIELD(w, "labels", altar__wr_strmap(w, &s->labels));
  ALTAR__WR_FIELD(w, "outputs", altar__wr_transfers(w, s->outputs, s->n_outputs));
  ALTAR__WR_FIELD(w, "plugin_identity", altar__wr_opt_strmap(w, s->plugin_identity));
  ALTAR__WR_FIELD(w, "resources", wr_resources(w, &s->resources));
  ALTAR__WR_FIELD(w, "timeout_s", W_VOID(altar__wr_opt_i64(w, s->timeout_s)));
  return ALTAR_OK;
}

enum {
  SP_COMMAND,
  SP_IMAGE,
  SP_INPUTS,
  SP_KIND,
  SP_LABELS,
  SP_OUTPUTS,
  SP_PLUGIN_IDENTITY,
  SP_RESOURCES,
  SP_TIMEOUT_S
};
static const char *const spec_keys[] = {"command", "image",           "inputs",    "kind",      "labels",
                                        "outputs", "plugin_identity", "resources", "timeout_s", NULL};

static int rd_spec_field(altar__rd_t *r, void *ctx, int idx, const msgpack_object *v) {
  altar_spec_t *s = ctx;
  switch (idx) {
  case SP_COMMAND: return altar__rd_strv(r, v, &s->command, &s->n_command);
  case SP_IMAGE: return altar__rd_str(r, v, &s->image);
  case SP_INPUTS: return altar__rd_transfers(r, v, &s->inputs, &s->n_inputs);
  case SP_KIND: return altar__rd_str(r, v, &s->kind);
  case SP_LABELS: return altar__rd_strmap(r, v, &s->labels);
  case SP_OUTPUTS: return altar__rd_transfers(r, v, &s->outputs, &s->n_outputs);
  case SP_PLUGIN_IDENTITY: return altar__rd_opt_strmap(r, v, &s->plugin_identity);
  case SP_RESOURCES:
    /* nil means "defaults", as a missing key does (written as a map) */
    if (v->type == MSGPACK_OBJECT_NIL) {
      r->noncanon = true;
      return ALTAR_OK;
    }
    return altar__rd_struct(r, v, resources_keys, 0, rd_resources_field, &s->resources);
  case SP_TIMEOUT_S: return altar__rd_opt_i64(r, v, &s->timeout_s);
  }
  return ALTAR_OK;
}

int altar__rd_spec(altar__rd_t *r, const msgpack_object *o, altar_spec_t *s) {
  memset(s, 0, sizeof *s);
  s->resources.count = 1;
  return altar__rd_struct(r, o, spec_keys, (1u << SP_COMMAND) | (1u << SP_IMAGE) | (1u << SP_KIND), rd_spec_field, s);
}

/* ---- handle ---- */

int altar__wr_handle(altar__wr_t *w, const altar_handle_t *h) {
  altar__wr_map(w, 4);
  ALTAR__WR_FIELD(w, "backend", altar__wr_str(w, h->backend));
  ALTAR__WR_FIELD(w, "external_id", altar__wr_str(w, h->external_id));
  ALTAR__WR_FIELD(w, "labels", altar__wr_strmap(w, &h->labels));
  ALTAR__WR_FIELD(w, "plugin_identity", altar__wr_opt_strmap(w, h->plugin_identity));
  return ALTAR_OK;
}

enum { H_BACKEND, H_EXTERNAL_ID, H_LABELS, H_PLUGIN_IDENTITY };
static const char *const handle_keys[] = {"backend", "external_id", "labels", "plugin_identity", NULL};

static int rd_handle_field(altar__rd_t *r, void *ctx, int idx, const msgpack_object *v) {
  altar_handle_t *h = ctx;
  switch (idx) {
  case H_BACKEND:
    free(h->backend);
    h->backend = NULL;
    return altar__rd_str(r, v, &h->backend);
  case H_EXTERNAL_ID:
    free(h->external_id);
    h->external_id = NULL;
    return altar__rd_str(r, v, &h->external_id);
  case H_LABELS: return altar__rd_strmap(r, v, &h->labels);
  case H_PLUGIN_IDENTITY: return altar__rd_opt_strmap(r, v, &h->plugin_identity);
  }
  return ALTAR_OK;
}

/* Missing backend / external_id default to "", so a decoded handle never
 * holds NULL where the model promises a string. */
int altar__rd_handle(altar__rd_t *r, const msgpack_object *o, altar_handle_t *h) {
  memset(h, 0, sizeof *h);
  if (!(h->backend = strdup("")) || !(h->external_id = strdup("")))
    return altar__rd_fail(r, ALTAR_ENOMEM, "out of memory");
  return altar__rd_struct(r, o, handle_keys, 0, rd_handle_field, h);
}

/* ---- failure ---- */

int altar__wr_failure(altar__wr_t *w, const altar_failure_t *f) {
  if (!f) {
    altar__wr_nil(w);
    return ALTAR_OK;
  }
  altar__wr_map(w, 4);
  ALTAR__WR_FIELD(w, "detail", altar__wr_opt_str(w, f->detail));
  ALTAR__WR_FIELD(w, "deterministic", W_VOID(altar__wr_bool(w, f->deterministic)));
  ALTAR__WR_FIELD(w, "exit_code", W_VOID(altar__wr_opt_i64(w, f->exit_code)));
  ALTAR__WR_FIELD(w, "reason", altar__wr_str(w, f->reason));
  return ALTAR_OK;
}

enum { F_DETAIL, F_DETERMINISTIC, F_EXIT_CODE, F_REASON };
static const char *const failure_keys[] = {"detail", "deterministic", "exit_code", "reason", NULL};

static int rd_failure_field(altar__rd_t *r, void *ctx, int idx, const msgpack_object *v) {
  altar_failure_t *f = ctx;
  switch (idx) {
  case F_DETAIL: return altar__rd_opt_str(r, v, &f->detail);
  case F_DETERMINISTIC: return altar__rd_bool(r, v, &f->deterministic);
  case F_EXIT_CODE: return altar__rd_opt_i64(r, v, &f->exit_code);
  case F_REASON:
    free(f->reason);
    f->reason = NULL;
    return altar__rd_str(r, v, &f->reason);
  }
  return ALTAR_OK;
}

/* A missing reason reads as "job_failed", the generic code, as
 * altar_failure_new does; deterministic defaults to false (worth a retry). */
int altar__rd_failure(altar__rd_t *r, const msgpack_object *o, altar_failure_t **pf) {
  *pf = NULL;
  if (o->type == MSGPACK_OBJECT_NIL) return ALTAR_OK;
  if (o->type != MSGPACK_OBJECT_MAP) return altar__rd_fail(r, ALTAR_EDECODE, "expected map or nil");
  altar_failure_t *f = calloc(1, sizeof *f);
  if (!f) return altar__rd_fail(r, ALTAR_ENOMEM, "out of memory");
  *pf = f;
  if (!(f->reason = strdup(ALTAR_REASON_JOB_FAILED))) return altar__rd_fail(r, ALTAR_ENOMEM, "out of memory");
  return altar__rd_struct(r, o, failure_keys, 0, rd_failure_field, f);
}

int altar__rd_state(altar__rd_t *r, const msgpack_object *o, altar_state_t *ps) {
  if (o->type != MSGPACK_OBJECT_STR) return altar__rd_fail(r, ALTAR_EDECODE, "expected string");
  char name[16];
  size_t n = o->via.str.size;
  if (n < sizeof name) {
    memcpy(name, o->via.str.ptr, n);
    name[n] = '\0';
    if (strlen(name) == n && altar_state_parse(name, ps) == ALTAR_OK) return ALTAR_OK;
  }
  return altar__rd_fail(r, ALTAR_EDECODE, "expected one of pending, running, succeeded, failed");
}
