/* The ledger handle every implementation is reached through: the check of
 * its table, the defaults of its optional operations (filled in once here,
 * so callers never test for NULL), close, and the operations themselves:
 * one call each through the handle's copy of the table (the reconciler's
 * hot path, so nothing more). */
#include "altar/plugin/ledger.h"

#include <stdlib.h>

/* The side keyspace of a ledger that keeps none. */
static int no_aux(const char *op, altar_error_t *err) {
  return altar_error_set(err, ALTAR_ENOTSUP, "ledger.%s: this ledger keeps no side keys", op);
}
static int def_aux_put(altar_ledger_t *l, const void *key, size_t klen, const void *val, size_t vlen,
                       altar_error_t *err) {
  (void)l, (void)key, (void)klen, (void)val, (void)vlen;
  return no_aux("aux_put", err);
}
static int def_aux_del(altar_ledger_t *l, const void *key, size_t klen, altar_error_t *err) {
  (void)l, (void)key, (void)klen;
  return no_aux("aux_del", err);
}
static int def_aux_get(altar_ledger_t *l, const void *key, size_t klen, altar_buf_t *out, altar_error_t *err) {
  (void)l, (void)key, (void)klen, (void)out;
  return no_aux("aux_get", err);
}
static int def_aux_scan(altar_ledger_t *l, const void *prefix, size_t plen, altar_ledger_aux_visit_fn fn, void *ctx,
                        altar_error_t *err) {
  (void)l, (void)prefix, (void)plen, (void)fn, (void)ctx;
  return no_aux("aux_scan", err);
}

static const char *missing_op(const altar_ledger_ops_t *o) {
  if (!o->name) return "name";
  if (!o->open) return "open";
  if (!o->close) return "close";
  if (!o->record) return "record";
  if (!o->open_handles) return "open_handles";
  if (!o->set_state) return "set_state";
  if (!o->active_succeeded) return "active_succeeded";
  if (!o->active_failed) return "active_failed";
  if (!o->consume) return "consume";
  if (!o->restart) return "restart";
  if (!o->get) return "get";
  if (!o->peek_open) return "peek_open";
  if (!o->peek_task) return "peek_task";
  if (!o->group_members) return "group_members";
  if (!o->group_counts) return "group_counts";
  if (!o->foreach) return "foreach";
  if (!o->begin) return "begin";
  if (!o->commit) return "commit";
  if (!o->abort) return "abort";
  /* Half a side keyspace would break the atomicity its users count on. */
  bool some = o->aux_put || o->aux_del || o->aux_get || o->aux_scan;
  if (some && !o->aux_put) return "aux_put";
  if (some && !o->aux_del) return "aux_del";
  if (some && !o->aux_get) return "aux_get";
  if (some && !o->aux_scan) return "aux_scan";
  if (!some && (o->caps & ALTAR_LEDGER_CAP_SIDE_KEYS)) return "aux_put (caps declares side keys)";
  if (some && !(o->caps & ALTAR_LEDGER_CAP_SIDE_KEYS)) return "the ALTAR_LEDGER_CAP_SIDE_KEYS bit (it has aux_*)";
  return NULL;
}

altar_ledger_t *altar_ledger_open(const altar_ledger_ops_t *ops, const altar_strmap_t *cfg, altar_error_t *err) {
  const char *miss = ops ? missing_op(ops) : "table";
  if (miss) {
    altar_error_set(err, ALTAR_EINVAL, "ledger %s: lacks the required operation %s",
                    ops && ops->name ? ops->name : "(unnamed)", miss);
    return NULL;
  }
  if (altar_plugin_keys_check(ops->config_keys, "ledger", ops->name, cfg, err)) return NULL;
  altar_ledger_t *l = calloc(1, sizeof *l);
  if (!l) {
    altar_error_set(err, ALTAR_ENOMEM, "ledger %s: out of memory", ops->name);
    return NULL;
  }
  l->ops = *ops;
  l->table = ops;
  l->scope = l->visit_part = ALTAR_LEDGER_SCOPE_NONE;
  if (!ops->aux_put) {
    l->ops.aux_put = def_aux_put;
    l->ops.aux_del = def_aux_del;
    l->ops.aux_get = def_aux_get;
    l->ops.aux_scan = def_aux_scan;
  }
  if (l->ops.open(l, cfg, err)) {
    free(l);
    return NULL;
  }
  return l;
}

unsigned altar_ledger_caps(const altar_ledger_t *l) { return l->ops.caps; }

int32_t altar_ledger_scope(altar_ledger_t *l, int32_t partition) {
  int32_t was = l->scope;
  if (!(l->ops.caps & ALTAR_LEDGER_CAP_PARTITIONS) || partition < 0 || partition > ALTAR_LEDGER_SCOPE_MAX)
    partition = ALTAR_LEDGER_SCOPE_NONE;
  l->scope = partition;
  return was;
}

int32_t altar_ledger_scope_get(const altar_ledger_t *l) { return l->scope; }

int32_t altar_ledger_visit_partition(const altar_ledger_t *l) { return l->visit_part; }

void altar_ledger_close(altar_ledger_t *l) {
  if (!l) return;
  l->ops.close(l);
  free(l);
}

int altar_ledger_record(altar_ledger_t *l, const altar_handle_t *h, const char *kind, const altar_spec_t *spec,
                        altar_error_t *err) {
  return l->ops.record(l, h, kind, spec, NULL, err);
}
int altar_ledger_record_meta(altar_ledger_t *l, const altar_handle_t *h, const char *kind, const altar_spec_t *spec,
                             const altar_record_meta_t *meta, altar_error_t *err) {
  return l->ops.record(l, h, kind, spec, meta, err);
}
int altar_ledger_open_handles(altar_ledger_t *l, altar_handle_t **phs, size_t *pn, altar_error_t *err) {
  return l->ops.open_handles(l, phs, pn, err);
}
int altar_ledger_set_state(altar_ledger_t *l, const altar_handle_t *h, altar_state_t state,
                           const altar_failure_t *failure, altar_error_t *err) {
  return l->ops.set_state(l, h, state, failure, err);
}
int altar_ledger_active_succeeded(altar_ledger_t *l, altar_record_t **precs, size_t *pn, altar_error_t *err) {
  return l->ops.active_succeeded(l, precs, pn, err);
}
int altar_ledger_active_failed(altar_ledger_t *l, altar_record_t **precs, size_t *pn, altar_error_t *err) {
  return l->ops.active_failed(l, precs, pn, err);
}
int altar_ledger_consume(altar_ledger_t *l, const altar_handle_t *hs, size_t n, altar_error_t *err) {
  return l->ops.consume(l, hs, n, err);
}
int altar_ledger_restart(altar_ledger_t *l, const altar_handle_t *h, altar_error_t *err) {
  return l->ops.restart(l, h, err);
}
int altar_ledger_get(altar_ledger_t *l, const char *backend, const char *external_id, altar_ledger_entry_t *pout,
                     altar_error_t *err) {
  return l->ops.get(l, backend, external_id, pout, err);
}
const altar_ledger_entry_t *altar_ledger_peek_open(altar_ledger_t *l, const char *backend, const char *external_id) {
  return l->ops.peek_open(l, backend, external_id);
}
const altar_ledger_entry_t *altar_ledger_peek_task(altar_ledger_t *l, const char *task_key) {
  return l->ops.peek_task(l, task_key);
}
int altar_ledger_group_members(altar_ledger_t *l, const char *kind, const char *group_key,
                               const altar_ledger_entry_t *const **pmembers, size_t *pn, altar_error_t *err) {
  return l->ops.group_members(l, kind, group_key, pmembers, pn, err);
}
int altar_ledger_group_counts(altar_ledger_t *l, const char *kind, const char *group_key, size_t *psucceeded,
                              size_t *pfailed, altar_error_t *err) {
  return l->ops.group_counts(l, kind, group_key, psucceeded, pfailed, err);
}
int altar_ledger_foreach(altar_ledger_t *l, altar_ledger_visit_fn fn, void *ctx, altar_error_t *err) {
  return l->ops.foreach (l, fn, ctx, err);
}
int altar_ledger_begin(altar_ledger_t *l, altar_error_t *err) { return l->ops.begin(l, err); }
int altar_ledger_commit(altar_ledger_t *l, altar_error_t *err) { return l->ops.commit(l, err); }
int altar_ledger_abort(altar_ledger_t *l, altar_error_t *err) { return l->ops.abort(l, err); }
int altar_ledger_aux_put(altar_ledger_t *l, const void *key, size_t klen, const void *val, size_t vlen,
                         altar_error_t *err) {
  return l->ops.aux_put(l, key, klen, val, vlen, err);
}
int altar_ledger_aux_del(altar_ledger_t *l, const void *key, size_t klen, altar_error_t *err) {
  return l->ops.aux_del(l, key, klen, err);
}
int altar_ledger_aux_get(altar_ledger_t *l, const void *key, size_t klen, altar_buf_t *out, altar_error_t *err) {
  return l->ops.aux_get(l, key, klen, out, err);
}
int altar_ledger_aux_scan(altar_ledger_t *l, const void *prefix, size_t plen, altar_ledger_aux_visit_fn fn, void *ctx,
                          altar_error_t *err) {
  return l->ops.aux_scan(l, prefix, plen, fn, ctx, err);
}
