/* The durable outbox: stage inside the ledger batch, publish after it,
 * delete on acknowledgement. */
#include "reconciler/outbox.h"
#include "altar/grow.h"

#include <inttypes.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEQ_KEY "q"

static void seq_key(uint64_t seq, char out[24]) { snprintf(out, 24, "o/%016" PRIx64, seq); }

int altar__outbox_del_ref(altar_ledger_t *l, uint64_t ref, altar_error_t *err) {
  char k[24];
  seq_key(altar__outbox_ref_seq(ref), k);
  int32_t was = altar_ledger_scope(l, altar__outbox_ref_part(ref));
  int rc = altar_ledger_aux_del(l, k, strlen(k), err);
  altar_ledger_scope(l, was);
  return rc;
}

void altar__outbox_forget_from(altar__outbox_t *ob, uint64_t seq) {
  size_t n = 0;
  for (size_t i = 0; i < ob->n_staged; i++)
    if (altar__outbox_ref_seq(ob->staged[i]) < seq) ob->staged[n++] = ob->staged[i];
  ob->n_staged = n;
  ob->next_seq = seq;
}

void altar__outbox_close(altar__outbox_t *ob) {
  free(ob->staged);
  ob->staged = NULL;
  ob->n_staged = ob->cap_staged = 0;
}

int altar__outbox_open(altar__outbox_t *ob, altar_ledger_t *l, altar_transport_t *t, altar_error_t *err) {
  memset(ob, 0, sizeof *ob);
  ob->ledger = l;
  ob->transport = t;
  altar_buf_t b = {0};
  int32_t was = altar_ledger_scope(l, ALTAR_LEDGER_SCOPE_NONE); /* the ledger's one counter */
  int rc = altar_ledger_aux_get(l, SEQ_KEY, 1, &b, err);
  altar_ledger_scope(l, was);
  if (rc == ALTAR_OK) {
    if (b.len != 16) rc = altar_error_set(err, ALTAR_ELEDGER, "outbox: corrupt sequence key");
    else ob->next_seq = strtoull((const char *)b.data, NULL, 16);
  } else if (rc == ALTAR_ENOTFOUND) {
    rc = ALTAR_OK;
  }
  altar_buf_free(&b);
  return rc;
}

/* Entry value: msgpack [topic, key|nil, value(bin), (hdr_name|nil, hdr_value|nil)...]: at
 * least one header pair (nil, nil when none), so entries written before
 * headers came in threes read the same way. */
static int write_str_or_nil(msgpack_packer *pk, const char *s) {
  if (!s) return msgpack_pack_nil(pk);
  size_t n = strlen(s);
  return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, s, n);
}

int altar__outbox_stage(altar__outbox_t *ob, const char *topic, const char *key, const void *value, size_t vlen,
                        const char *hdr_name, const char *hdr_value, uint64_t *pseq, altar_error_t *err) {
  altar_header_t h = {hdr_name, hdr_value, hdr_value ? strlen(hdr_value) : 0};
  return altar__outbox_stage_headers(ob, topic, key, value, vlen, hdr_name ? &h : NULL, hdr_name ? 1 : 0, pseq, err);
}

int altar__outbox_stage_headers(altar__outbox_t *ob, const char *topic, const char *key, const void *value, size_t vlen,
                                const altar_header_t *hdrs, size_t n_hdrs, uint64_t *pseq, altar_error_t *err) {
  if (n_hdrs > ALTAR_OUTBOX_MAX_HEADERS) return altar_error_set(err, ALTAR_EINVAL, "outbox: too many headers");
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  size_t pairs = n_hdrs ? n_hdrs : 1;
  int bad = msgpack_pack_array(&pk, 3 + 2 * pairs) || write_str_or_nil(&pk, topic) || write_str_or_nil(&pk, key) ||
            msgpack_pack_bin(&pk, vlen) || msgpack_pack_bin_body(&pk, value, vlen);
  for (size_t i = 0; i < n_hdrs && !bad; i++) {
    bad = write_str_or_nil(&pk, hdrs[i].name) || msgpack_pack_str(&pk, hdrs[i].value_len) ||
          msgpack_pack_str_body(&pk, hdrs[i].value, hdrs[i].value_len);
  }
  if (!n_hdrs && !bad) bad = msgpack_pack_nil(&pk) || msgpack_pack_nil(&pk);
  if (bad) {
    msgpack_sbuffer_destroy(&sb);
    return altar_error_set(err, ALTAR_ENOMEM, "outbox: out of memory");
  }
  char k[24], seqv[17];
  seq_key(ob->next_seq, k);
  snprintf(seqv, sizeof seqv, "%016" PRIx64, ob->next_seq + 1);
  /* The entry under the scope's partition, the counter under none. */
  int32_t part = altar_ledger_scope_get(ob->ledger);
  int rc = altar_ledger_aux_put(ob->ledger, k, strlen(k), sb.data, sb.size, err);
  if (!rc) {
    altar_ledger_scope(ob->ledger, ALTAR_LEDGER_SCOPE_NONE);
    rc = altar_ledger_aux_put(ob->ledger, SEQ_KEY, 1, seqv, 16, err);
    altar_ledger_scope(ob->ledger, part);
  }
  msgpack_sbuffer_destroy(&sb);
  if (!rc && ALTAR_GROW(ob->staged, ob->cap_staged, ob->n_staged + 1))
    rc = altar_error_set(err, ALTAR_ENOMEM, "outbox: out of memory");
  if (rc) return rc;
  ob->staged[ob->n_staged++] = altar__outbox_ref(part, ob->next_seq);
  if (pseq) *pseq = ob->next_seq;
  ob->next_seq++;
  return ALTAR_OK;
}

typedef struct pub_opaque pub_opaque_t;

/* Entries are collected first and produced after the scan: producing may
 * serve delivery reports, whose deletes must not run under a live iterator. */
typedef struct pub_ctx {
  altar__outbox_t *ob;
  uint64_t from;
  int32_t part; /* of the entry visited: the scan's, or the reference's */
  int rc;
  altar_error_t *err;
  pub_opaque_t **v;
  size_t n, cap;
} pub_ctx_t;

/* What a delivery report needs to delete the entry and tell the caller. */
struct pub_opaque {
  altar__outbox_t *ob;
  uint64_t seq; /* its reference: sequence number and partition */
  char *topic;
  altar_buf_t value;
  altar_buf_t raw; /* the stored entry, to send again after a failure */
  int attempts;
};

static int produce_entry(altar__outbox_t *ob, pub_opaque_t *po, altar_error_t *err);

static int visit_publish(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  pub_ctx_t *pc = ctx;
  if (klen != 18) return 0;
  char hex[17];
  memcpy(hex, (const char *)key + 2, 16);
  hex[16] = 0;
  uint64_t seq = strtoull(hex, NULL, 16);
  if (seq < pc->from) return 0;
  pub_opaque_t *po = calloc(1, sizeof *po);
  if (!po || altar_buf_append(&po->raw, val, vlen)) {
    free(po);
    pc->rc = altar_error_set(pc->err, ALTAR_ENOMEM, "outbox: out of memory");
    return 1;
  }
  po->ob = pc->ob;
  po->seq = altar__outbox_ref(pc->part < -1 ? altar_ledger_visit_partition(pc->ob->ledger) : pc->part, seq);
  if (ALTAR_GROW(pc->v, pc->cap, pc->n + 1)) {
    altar_buf_free(&po->raw);
    free(po);
    pc->rc = altar_error_set(pc->err, ALTAR_ENOMEM, "outbox: out of memory");
    return 1;
  }
  pc->v[pc->n++] = po;
  return 0;
}

static void opaque_free(pub_opaque_t *po) {
  if (!po) return;
  free(po->topic);
  altar_buf_free(&po->value);
  altar_buf_free(&po->raw);
  free(po);
}

static char *obj_str(const msgpack_object *o) {
  if (o->type != MSGPACK_OBJECT_STR) return NULL;
  return strndup(o->via.str.ptr, o->via.str.size);
}

static int produce_entry(altar__outbox_t *ob, pub_opaque_t *po, altar_error_t *err) {
  msgpack_unpacked up;
  msgpack_unpacked_init(&up);
  int rc = ALTAR_OK;
  char *key = NULL, *hn[ALTAR_OUTBOX_MAX_HEADERS] = {0}, *hv[ALTAR_OUTBOX_MAX_HEADERS] = {0};
  altar_header_t h[ALTAR_OUTBOX_MAX_HEADERS];
  size_t nh = 0;
  if (msgpack_unpack_next(&up, (const char *)po->raw.data, po->raw.len, NULL) != MSGPACK_UNPACK_SUCCESS ||
      up.data.type != MSGPACK_OBJECT_ARRAY || up.data.via.array.size < 5 || up.data.via.array.size % 2 == 0 ||
      up.data.via.array.size > 3 + 2 * ALTAR_OUTBOX_MAX_HEADERS ||
      up.data.via.array.ptr[2].type != MSGPACK_OBJECT_BIN) {
    rc = altar_error_set(err, ALTAR_ELEDGER, "outbox: corrupt entry %" PRIu64, altar__outbox_ref_seq(po->seq));
    goto out;
  }
  const msgpack_object *a = up.data.via.array.ptr;
  free(po->topic);
  po->topic = obj_str(&a[0]);
  key = obj_str(&a[1]);
  for (size_t i = 3; i + 1 < up.data.via.array.size; i += 2) {
    if (a[i].type == MSGPACK_OBJECT_NIL) continue;
    hn[nh] = obj_str(&a[i]);
    hv[nh] = obj_str(&a[i + 1]);
    if (!hn[nh] || !hv[nh]) {
      free(hn[nh]);
      free(hv[nh]);
      rc = altar_error_set(err, ALTAR_ELEDGER, "outbox: corrupt header in entry %" PRIu64,
                           altar__outbox_ref_seq(po->seq));
      goto out;
    }
    h[nh] = (altar_header_t){hn[nh], hv[nh], strlen(hv[nh])};
    nh++;
  }
  if (ob->skip && po->topic) {
    bool skip = false;
    rc = ob->skip(ob->skip_ctx, po->topic, key, a[2].via.bin.ptr, a[2].via.bin.size, h, nh, &skip, err);
    if (!rc && skip) {
      rc = altar__outbox_del_ref(ob->ledger, po->seq, err);
      if (!rc) ob->skipped++;
      opaque_free(po);
      po = NULL;
    }
    if (rc || skip) goto out;
  }
  if (ob->hold && po->topic) {
    rc = ob->hold(ob->hold_ctx, po->seq, po->topic, a[2].via.bin.ptr, a[2].via.bin.size, err);
    opaque_free(po);
    po = NULL;
    goto out;
  }
  altar_buf_reset(&po->value);
  if (!po->topic || altar_buf_append(&po->value, a[2].via.bin.ptr, a[2].via.bin.size)) {
    rc = altar_error_set(err, ALTAR_ENOMEM, "outbox: out of memory");
    goto out;
  }
  altar_produce_rec_t rec = {
      .topic = po->topic,
      .partition = ALTAR_PARTITION_ANY,
      .key = key,
      .key_len = key ? strlen(key) : 0,
      .value = po->value.data,
      .value_len = po->value.len,
      .headers = nh ? h : NULL,
      .n_headers = nh,
      .opaque = po,
  };
  for (int tries = 0;; tries++) {
    rc = altar_transport_produce(ob->transport, &rec, err);
    if (rc == ALTAR_EAGAIN && tries < 1000) {
      altar_transport_poll(ob->transport, 10);
      continue;
    }
    break;
  }
  if (rc == ALTAR_OK) ob->in_flight++;
out:
  free(key);
  for (size_t i = 0; i < nh; i++) {
    free(hn[i]);
    free(hv[i]);
  }
  msgpack_unpacked_destroy(&up);
  if (rc && po) opaque_free(po);
  return rc;
}

void altar__outbox_on_delivery(altar_transport_t *t, const altar_delivery_t *dr, void *ctx) {
  (void)t;
  (void)ctx;
  pub_opaque_t *po = dr->opaque;
  if (!po) return;
  altar__outbox_t *ob = po->ob;
  ob->in_flight--;
  if (dr->err) {
    altar_error_t e = {0};
    if (++po->attempts < 10) {
      pub_opaque_t *again = calloc(1, sizeof *again);
      if (again && !altar_buf_append(&again->raw, po->raw.data, po->raw.len)) {
        again->ob = ob;
        again->seq = po->seq;
        again->attempts = po->attempts;
        opaque_free(po);
        if (produce_entry(ob, again, &e) == ALTAR_OK) return;
      } else {
        free(again);
        opaque_free(po);
      }
    } else {
      opaque_free(po);
    }
    if (!ob->fatal) {
      ob->fatal = ALTAR_ETRANSPORT;
      altar_error_set(&ob->fatal_err, ALTAR_ETRANSPORT, "outbox: publishing failed for good: %s",
                      dr->errstr ? dr->errstr : "delivery failed");
    }
    return;
  }
  altar_error_t e = {0};
  if (altar__outbox_del_ref(ob->ledger, po->seq, &e) != ALTAR_OK && !ob->fatal) {
    ob->fatal = e.code ? e.code : ALTAR_ELEDGER;
    ob->fatal_err = e;
  }
  ob->published++;
  if (ob->on_published) ob->on_published(ob->on_published_ctx, po->topic, po->value.data, po->value.len);
  opaque_free(po);
}

/* from_seq 0: every stored entry (scope: which partition's, NONE for all). */
static int publish(altar__outbox_t *ob, uint64_t from_seq, int32_t scope, altar_error_t *err) {
  pub_ctx_t pc = {.ob = ob, .from = from_seq, .err = err, .part = -2};
  int rc = ALTAR_OK;
  int32_t was = altar_ledger_scope(ob->ledger, scope);
  if (from_seq == 0) {
    /* Start-up: whatever a previous life left, every partition's, in order. */
    rc = altar_ledger_aux_scan(ob->ledger, "o/", 2, visit_publish, &pc, err);
  } else {
    /* After a batch: just the entries it staged, by key, each under its
     * partition. A prefix scan here would walk every acknowledged (deleted)
     * entry's tombstone each time. */
    altar_buf_t b = {0};
    for (size_t i = 0; !rc && !pc.rc && i < ob->n_staged; i++) {
      uint64_t seq = altar__outbox_ref_seq(ob->staged[i]);
      if (seq < from_seq || seq >= ob->next_seq) continue; /* an aborted batch's */
      char k[24];
      seq_key(seq, k);
      altar_buf_reset(&b);
      pc.part = altar__outbox_ref_part(ob->staged[i]);
      altar_ledger_scope(ob->ledger, pc.part);
      rc = altar_ledger_aux_get(ob->ledger, k, strlen(k), &b, err);
      if (rc == ALTAR_ENOTFOUND) {
        rc = ALTAR_OK;
        continue;
      }
      if (!rc) visit_publish(&pc, k, strlen(k), b.data, b.len);
    }
    altar_buf_free(&b);
  }
  altar_ledger_scope(ob->ledger, was);
  ob->n_staged = 0;
  if (!rc) rc = pc.rc;
  size_t i = 0;
  for (; !rc && i < pc.n; i++) rc = produce_entry(ob, pc.v[i], err); /* frees its entry on failure */
  for (; i < pc.n; i++) opaque_free(pc.v[i]);
  free(pc.v);
  return rc;
}

int altar__outbox_publish_from(altar__outbox_t *ob, uint64_t from_seq, altar_error_t *err) {
  return publish(ob, from_seq, ALTAR_LEDGER_SCOPE_NONE, err);
}

int altar__outbox_publish_partition(altar__outbox_t *ob, int32_t part, altar_error_t *err) {
  return publish(ob, 0, part, err);
}

int altar__outbox_reload_seq(altar__outbox_t *ob, altar_error_t *err) {
  altar_buf_t b = {0};
  int32_t was = altar_ledger_scope(ob->ledger, ALTAR_LEDGER_SCOPE_NONE);
  int rc = altar_ledger_aux_get(ob->ledger, SEQ_KEY, 1, &b, err);
  altar_ledger_scope(ob->ledger, was);
  if (rc == ALTAR_OK && b.len == 16) {
    uint64_t seq = strtoull((const char *)b.data, NULL, 16);
    if (seq > ob->next_seq) ob->next_seq = seq;
  } else if (rc == ALTAR_OK) {
    rc = altar_error_set(err, ALTAR_ELEDGER, "outbox: corrupt sequence key");
  } else if (rc == ALTAR_ENOTFOUND) {
    rc = ALTAR_OK;
  }
  altar_buf_free(&b);
  return rc;
}

static int visit_count(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  (void)key;
  (void)klen;
  (void)val;
  (void)vlen;
  (*(size_t *)ctx)++;
  return 0;
}

int altar__outbox_count(altar__outbox_t *ob, size_t *pn, altar_error_t *err) {
  *pn = 0;
  return altar_ledger_aux_scan(ob->ledger, "o/", 2, visit_count, pn, err);
}

typedef struct carry_ctx {
  altar_ledger_t *from, *to;
  size_t n;
  int rc;
  altar_error_t *err;
} carry_ctx_t;

static int visit_carry(void *ctx, const void *key, size_t klen, const void *val, size_t vlen) {
  carry_ctx_t *c = ctx;
  int32_t was = altar_ledger_scope(c->to, altar_ledger_visit_partition(c->from));
  c->rc = altar_ledger_aux_put(c->to, key, klen, val, vlen, c->err);
  altar_ledger_scope(c->to, was);
  if (c->rc) return 1;
  c->n++;
  return 0;
}

int altar__outbox_carry(altar_ledger_t *from, altar_ledger_t *to, size_t *pn, altar_error_t *err) {
  if (pn) *pn = 0;
  carry_ctx_t c = {.from = from, .to = to, .err = err};
  int rc = altar_ledger_aux_scan(from, "o/", 2, visit_carry, &c, err);
  if (!rc) rc = c.rc;
  if (!rc) {
    /* The counter too, so new records never reuse a carried number. */
    altar_buf_t b = {0};
    rc = altar_ledger_aux_get(from, SEQ_KEY, 1, &b, err);
    if (rc == ALTAR_OK) rc = altar_ledger_aux_put(to, SEQ_KEY, 1, b.data, b.len, err);
    else if (rc == ALTAR_ENOTFOUND) rc = ALTAR_OK;
    altar_buf_free(&b);
  }
  if (pn) *pn = c.n;
  return rc;
}
