/* A ledger made of the contract's six operations (altar/ledger.h,
 * altar_ledger_contract_open): the table below forwards them to the
 * embedder's functions and refuses the fleet's extras by name, so a caller
 * that needs more than altar_reconcile_once does learns which operation it
 * lacks instead of reading a wrong answer. */
#include "altar/plugin/ledger.h"

#include <stdlib.h>

static altar_contract_ledger_t *contract_of(const altar_ledger_t *l) { return altar_ledger_impl(l); }

static int c_open(altar_ledger_t *l, const altar_strmap_t *cfg, altar_error_t *err) {
  if (cfg && cfg->n)
    return altar_error_set(err, ALTAR_ECONFIG, "ledger contract: takes no settings (got '%s')", cfg->keys[0]);
  altar_contract_ledger_t *c = calloc(1, sizeof *c);
  if (!c) return altar_error_set(err, ALTAR_ENOMEM, "ledger contract: out of memory");
  altar_ledger_set_impl(l, c);
  return ALTAR_OK;
}
static void c_close(altar_ledger_t *l) { free(contract_of(l)); }

static int c_record(altar_ledger_t *l, const altar_handle_t *h, const char *kind, const altar_spec_t *spec,
                    const altar_record_meta_t *meta, altar_error_t *err) {
  (void)meta; /* fleet metadata (source offsets) has no place in the contract */
  return contract_of(l)->record(contract_of(l)->ctx, h, kind, spec, err);
}
static int c_open_handles(altar_ledger_t *l, altar_handle_t **phs, size_t *pn, altar_error_t *err) {
  return contract_of(l)->open_handles(contract_of(l)->ctx, phs, pn, err);
}
static int c_set_state(altar_ledger_t *l, const altar_handle_t *h, altar_state_t state, const altar_failure_t *failure,
                       altar_error_t *err) {
  return contract_of(l)->set_state(contract_of(l)->ctx, h, state, failure, err);
}
static int c_active_succeeded(altar_ledger_t *l, altar_record_t **precs, size_t *pn, altar_error_t *err) {
  return contract_of(l)->active_succeeded(contract_of(l)->ctx, precs, pn, err);
}
static int c_active_failed(altar_ledger_t *l, altar_record_t **precs, size_t *pn, altar_error_t *err) {
  return contract_of(l)->active_failed(contract_of(l)->ctx, precs, pn, err);
}
static int c_consume(altar_ledger_t *l, const altar_handle_t *hs, size_t n, altar_error_t *err) {
  return contract_of(l)->consume(contract_of(l)->ctx, hs, n, err);
}

/* ---- what the contract does not have ----------------------------------------- */

static int lacks(const char *op, altar_error_t *err) {
  return altar_error_set(err, ALTAR_ENOTSUP, "ledger contract: has no operation %s (only the contract's six)", op);
}
static int c_restart(altar_ledger_t *l, const altar_handle_t *h, altar_error_t *err) {
  (void)l, (void)h;
  return lacks("restart", err);
}
static int c_get(altar_ledger_t *l, const char *backend, const char *external_id, altar_ledger_entry_t *pout,
                 altar_error_t *err) {
  (void)l, (void)backend, (void)external_id, (void)pout;
  return lacks("get", err);
}
static const altar_ledger_entry_t *c_peek_open(altar_ledger_t *l, const char *backend, const char *external_id) {
  (void)l, (void)backend, (void)external_id;
  return NULL;
}
static const altar_ledger_entry_t *c_peek_task(altar_ledger_t *l, const char *task_key) {
  (void)l, (void)task_key;
  return NULL;
}
static int c_group_members(altar_ledger_t *l, const char *kind, const char *group_key,
                           const altar_ledger_entry_t *const **pmembers, size_t *pn, altar_error_t *err) {
  (void)l, (void)kind, (void)group_key, (void)pmembers, (void)pn;
  return lacks("group_members", err);
}
static int c_group_counts(altar_ledger_t *l, const char *kind, const char *group_key, size_t *psucceeded,
                          size_t *pfailed, altar_error_t *err) {
  (void)l, (void)kind, (void)group_key, (void)psucceeded, (void)pfailed;
  return lacks("group_counts", err);
}
static int c_foreach(altar_ledger_t *l, altar_ledger_visit_fn fn, void *ctx, altar_error_t *err) {
  (void)l, (void)fn, (void)ctx;
  return lacks("foreach", err);
}
static int c_nothing(altar_ledger_t *l, altar_error_t *err) {
  (void)l, (void)err;
  return ALTAR_OK;
}

static const altar_ledger_ops_t contract_ops = {
    .name = "contract",
    .caps = 0,           /* durability is the embedder's to say; no side keys */
    .config_keys = NULL, /* the embedder's object is configured where it is made */
    .open = c_open,
    .close = c_close,
    .record = c_record,
    .open_handles = c_open_handles,
    .set_state = c_set_state,
    .active_succeeded = c_active_succeeded,
    .active_failed = c_active_failed,
    .consume = c_consume,
    .restart = c_restart,
    .get = c_get,
    .peek_open = c_peek_open,
    .peek_task = c_peek_task,
    .group_members = c_group_members,
    .group_counts = c_group_counts,
    .foreach = c_foreach,
    .begin = c_nothing,
    .commit = c_nothing,
    .abort = c_nothing,
};

altar_ledger_t *altar_ledger_contract_open(const altar_contract_ledger_t *c, altar_error_t *err) {
  const char *miss = !c                     ? "table"
                     : !c->record           ? "record"
                     : !c->open_handles     ? "open_handles"
                     : !c->set_state        ? "set_state"
                     : !c->active_succeeded ? "active_succeeded"
                     : !c->active_failed    ? "active_failed"
                     : !c->consume          ? "consume"
                                            : NULL;
  if (miss) {
    altar_error_set(err, ALTAR_EINVAL, "ledger contract: lacks the operation %s", miss);
    return NULL;
  }
  altar_ledger_t *l = altar_ledger_open(&contract_ops, NULL, err);
  if (l) *contract_of(l) = *c;
  return l;
}
