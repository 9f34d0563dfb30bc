/* The ledger handle every implementation is reached through: the check of
 * its table, the defaults of its optional operations (filled in once here,
 * so callers never test for NULL), and close. */
#include "altar/ledger.h"

#include <stdlib.h>

/* The side keyspace of a ledger that keeps none. */
static int no_aux(const char *op, altar_error_t *err) {
  return altar_error_set(err, ALTAR_ENOTSUP, "ledger.%s: this ledger keeps no side keys", op);
}
static int def_aux_put(void *impl, const void *key, size_t klen, const void *val, size_t vlen, altar_error_t *err) {
  (void)impl, (void)key, (void)klen, (void)val, (void)vlen;
  return no_aux("aux_put", err);
}
static int def_aux_del(void *impl, const void *key, size_t klen, altar_error_t *err) {
  (void)impl, (void)key, (void)klen;
  return no_aux("aux_del", err);
}
static int def_aux_get(void *impl, const void *key, size_t klen, altar_buf_t *out, altar_error_t *err) {
  (void)impl, (void)key, (void)klen, (void)out;
  return no_aux("aux_get", err);
}
static int def_aux_scan(void *impl, const void *prefix, size_t plen, altar_ledger_aux_visit_fn fn, void *ctx,
                        altar_error_t *err) {
  (void)impl, (void)prefix, (void)plen, (void)fn, (void)ctx;
  return no_aux("aux_scan", err);
}

static const char *missing_op(const altar_ledger_ops_t *o) {
  if (!o->name) return "name";
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
  if (!o->close) return "close";
  /* Half a side keyspace would break the atomicity its users count on. */
  bool some = o->aux_put || o->aux_del || o->aux_get || o->aux_scan;
  if (some && !o->aux_put) return "aux_put";
  if (some && !o->aux_del) return "aux_del";
  if (some && !o->aux_get) return "aux_get";
  if (some && !o->aux_scan) return "aux_scan";
  return NULL;
}

altar_ledger_t *altar_ledger_wrap(const altar_ledger_ops_t *ops, void *impl, altar_error_t *err) {
  const char *miss = ops ? missing_op(ops) : "table";
  if (miss) {
    if (ops && ops->close) ops->close(impl);
    altar_error_set(err, ALTAR_EINVAL, "ledger %s: lacks the required operation %s",
                    ops && ops->name ? ops->name : "(unnamed)", miss);
    return NULL;
  }
  altar_ledger_t *l = calloc(1, sizeof *l);
  if (!l) {
    ops->close(impl);
    altar_error_set(err, ALTAR_ENOMEM, "ledger %s: out of memory", ops->name);
    return NULL;
  }
  l->ops_ = *ops;
  if (!ops->aux_put) {
    l->ops_.aux_put = def_aux_put;
    l->ops_.aux_del = def_aux_del;
    l->ops_.aux_get = def_aux_get;
    l->ops_.aux_scan = def_aux_scan;
  }
  l->ops = &l->ops_;
  l->impl = impl;
  return l;
}

void altar_ledger_close(altar_ledger_t *l) {
  if (!l) return;
  l->ops->close(l->impl);
  free(l);
}
