/* altar — the wire schema: msgpack encodings of specs, job messages, status
 * events, group events and ledger records, and their JSON form.
 * schemas/README.md documents every field. Decoders take untrusted bytes:
 * every length is bounded (see ALTAR_MAX_* in spec.h) and every error names
 * the field at fault. Unknown keys are ignored; missing keys take defaults. */
#ifndef ALTAR_CODEC_H
#define ALTAR_CODEC_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/arena.h"
#include "altar/buf.h"
#include "altar/error.h"
#include "altar/task.h"

#define ALTAR_SCHEMA_VERSION 1

/* Bytes only the codec makes, so that whoever holds one holds what the
 * codec vouches for rather than what a caller says. The member is the
 * codec's: read it through the accessors. Zeroed means empty.
 *
 * altar_spec_enc_t: a valid spec's canonical encoding (altar_encode_spec's
 * bytes), made by altar_spec_enc_make, or by a status decoder keeping an
 * event's spec bytes. The ledger takes one as a record's spec without
 * decoding it again (altar_record_meta_t.spec_enc). */
typedef struct altar_spec_enc {
  altar_buf_t codec_bytes_;
} altar_spec_enc_t;

/* altar_record_fixed_t: the "handle" and "kind" entries of a ledger record's
 * map, checked and written as altar_encode_record writes them, made by
 * altar_record_fixed_make, or by altar_decode_status_canonical from the
 * same entries of a status event (they are byte for byte the record's). A
 * ledger keeps them and writes only a record's changing fields around them
 * (altar_encode_record_around). */
typedef struct altar_record_fixed {
  altar_buf_t codec_bytes_;
} altar_record_fixed_t;

/* Make one, replacing what *pout held (empty, or made by a _make or a
 * decoder other than the arena fast path, whose memory is reused); its
 * bytes are malloc'd. 0, or the encoder's error (ALTAR_EINVAL naming the
 * field, ALTAR_ETOOBIG, ALTAR_ENOMEM) with *pout empty. */
int altar_spec_enc_make(const altar_spec_t *spec, altar_spec_enc_t *pout, altar_error_t *err);
int altar_record_fixed_make(const altar_handle_t *h, const char *kind, altar_record_fixed_t *pout, altar_error_t *err);
/* Frees what a _make or a decoder (not the arena fast path) put there, and empties it. */
void altar_spec_enc_clear(altar_spec_enc_t *e);
void altar_record_fixed_clear(altar_record_fixed_t *f);
static inline const void *altar_spec_enc_data(const altar_spec_enc_t *e) { return e->codec_bytes_.data; }
static inline size_t altar_spec_enc_len(const altar_spec_enc_t *e) { return e->codec_bytes_.len; }
static inline const void *altar_record_fixed_data(const altar_record_fixed_t *f) { return f->codec_bytes_.data; }
static inline size_t altar_record_fixed_len(const altar_record_fixed_t *f) { return f->codec_bytes_.len; }

/* jobs topic: one task to run. spec.avoid_hosts travels as the message's
 * top-level "avoid_hosts", not inside "spec". */
typedef struct altar_job_msg {
  int64_t v;
  char *job_id;
  altar_spec_t spec;
  int64_t attempt; /* 0 for the first run */
  double submitted_at;
} altar_job_msg_t;

typedef enum altar_status_event_kind {
  ALTAR_EV_SUBMITTED = 0,
  ALTAR_EV_STATE = 1,
  ALTAR_EV_RELEASED = 2,
} altar_status_event_kind_t;

/* Where a status event's job came from on the jobs topic. */
typedef struct altar_source {
  bool set;
  char *topic;
  int32_t partition;
  int64_t offset;
} altar_source_t;

/* status topic: what a worker saw happen to one task. */
typedef struct altar_status_event {
  int64_t v;
  altar_status_event_kind_t event;
  char *task_key; /* spec identity hash (hex) */
  char *kind;
  altar_handle_t handle;
  altar_state_t state;
  altar_failure_t *failure; /* NULL unless state is failed */
  altar_spec_t *spec;       /* on "submitted" only, else NULL; see spec_enc */
  char *worker;             /* NULL if absent */
  altar_source_t source;
  double ts;
  /* Not on the wire: altar_encode_spec(spec), when a reader with time to
   * spare made it (a rebuild's reading thread), so the ledger need not.
   * spec == NULL with spec_enc non-empty means the event HAS a spec, given
   * as its (validated, canonical) bytes only: what
   * altar_decode_status_canonical gives with ALTAR_DECODE_SPEC_BYTES. Such an
   * event is for the ledger (altar_apply_events, whose record() takes
   * meta.spec_enc as the spec); the encoders, altar_status_event_equal and
   * the JSON form see only the struct, i.e. no spec. */
  altar_spec_enc_t spec_enc;
  /* Not on the wire either: the message's own bytes of its "handle" and
   * "kind" entries (adjacent in both maps), which are byte for byte those
   * entries of a ledger record for this handle and kind. Set by
   * altar_decode_status_canonical, so the ledger need not encode them. */
  altar_record_fixed_t record_fixed;
  /* Not on the wire: where the reconciler read it (its status partition, of
   * how many), and, for a "cancel" control message read from the status
   * topic in order with the events, that message (owned; the event's other
   * fields are then empty but ts). */
  int32_t log_partition, log_partitions;
  struct altar_control_msg *cancel;
} altar_status_event_t;

typedef enum altar_group_event_kind {
  ALTAR_GROUP_FIRED = 0,
  ALTAR_GROUP_DEAD_LETTERED = 1,
  ALTAR_GROUP_CANCELLED = 2, /* `altar cancel` settled it (dead topic; reason "cancelled") */
} altar_group_event_kind_t;

/* Why one member of a dead-lettered group failed: its external id and its
 * failure (detail cut to ALTAR_GROUP_FAILURE_DETAIL bytes). */
typedef struct altar_group_failure {
  char *external_id;
  altar_failure_t *failure;
} altar_group_failure_t;

/* A dead-lettered group's event names at most this many failed members,
 * each detail at most this many bytes, so the event stays far below the
 * message bound whatever the members printed. */
#define ALTAR_GROUP_MAX_FAILURES 32
#define ALTAR_GROUP_FAILURE_DETAIL 512

/* ready / dead topics: a group that fanned in, or was given up on. */
typedef struct altar_group_event {
  int64_t v;
  altar_group_event_kind_t event;
  char *event_id; /* altar_group_event_id() of kind, group key and member task keys */
  char *kind;
  char *group_key;
  altar_handle_t *shards;
  size_t n_shards;
  double ts;
  /* dead_lettered: its failed members' reasons (written only when some,
   * so the other events keep their bytes). */
  altar_group_failure_t *failures;
  size_t n_failures;
  /* fired: the listed members' outputs, de-duplicated by uri in member
   * order (written only when some, so other events keep their bytes). */
  altar_transfer_t *outputs;
  size_t n_outputs;
  /* A group whose event would not fit one message (altar_group_event_fits
   * false) goes out as a head (type "group": the first members and
   * outputs, members_total and pages) followed by `pages` page messages
   * (type "group_page", page = 1..pages) carrying the rest, in order; the
   * event id covers every member. Written only on a head, so an event that
   * fits keeps its bytes. Decoded: members_total = n_shards and pages = 0
   * for an event that fits. An event the reconciler makes holds every
   * member (members_total = n_shards, pages = 0) until it is split. */
  size_t members_total;
  size_t pages;
  size_t page; /* a page's index (1..pages); 0 on a head or an event that fits */
} altar_group_event_t;

/* The members a group event stands for: members_total, or n_shards when unset. */
#define ALTAR_GROUP_MEMBERS(e) ((e)->members_total > (e)->n_shards ? (e)->members_total : (e)->n_shards)

/* jobs topic, beside the jobs: a control message about jobs of the same
 * partition (schemas/README.md, "control"). Workers hand a moved
 * partition's running jobs over with them: "done" says the listed jobs are
 * finished, "lease" that their holder is alive and still runs them,
 * "release" that the holder gave them back (start them now). An event name
 * this reader does not know decodes as ALTAR_CTL_UNKNOWN with its name in
 * event_name, so a newer writer's event (e.g. "cancel") is skipped, not
 * refused. */
typedef enum altar_control_event {
  ALTAR_CTL_DONE = 0,
  ALTAR_CTL_LEASE = 1,
  ALTAR_CTL_RELEASE = 2,
  ALTAR_CTL_UNKNOWN = 3, /* another event: named by event_name, which the encoder then writes */
  ALTAR_CTL_CANCEL = 4,  /* `altar cancel`: stop job_id (or one group of it); on every partition */
} altar_control_event_t;

/* At most this many offsets in one control message. */
#define ALTAR_CONTROL_MAX_OFFSETS 1024

typedef struct altar_control_msg {
  int64_t v;
  altar_control_event_t event;
  char *event_name;  /* decoded: the name as read; written only for ALTAR_CTL_UNKNOWN */
  int32_t partition; /* the jobs partition the offsets are in (the message's own) */
  int64_t *offsets;  /* job offsets in that partition, each >= 0 */
  size_t n_offsets;
  double lease_s; /* lease: the holder renews at least this often */
  char *worker;   /* the sender's id; NULL if absent */
  double ts;
  /* cancel only (written only for it): the job, and one group key of it or
   * NULL for the whole job. */
  char *job_id;
  char *group_key;
} altar_control_msg_t;

/* Message types, as named by `altar codec --type`. */
typedef enum altar_msg_type {
  ALTAR_MSG_SPEC,
  ALTAR_MSG_JOB,
  ALTAR_MSG_STATUS,
  ALTAR_MSG_GROUP,
  ALTAR_MSG_RECORD,
  ALTAR_MSG_CONTROL,
  ALTAR_MSG_GROUP_PAGE, /* a page of a wide group's event (type "group_page") */
} altar_msg_type_t;
int altar_msg_type_parse(const char *name, altar_msg_type_t *ptype);
const char *altar_msg_type_name(altar_msg_type_t t);

/* Free the members of a message and zero it. */
void altar_job_msg_clear(altar_job_msg_t *m);
void altar_status_event_clear(altar_status_event_t *e);
void altar_group_event_clear(altar_group_event_t *e);
void altar_control_msg_clear(altar_control_msg_t *m);
bool altar_status_event_equal(const altar_status_event_t *a, const altar_status_event_t *b);
bool altar_group_event_equal(const altar_group_event_t *a, const altar_group_event_t *b);

/* msgpack. Encoders append the canonical encoding (keys in bytewise order,
 * every field written, nil for absent optionals) to out; on failure they
 * leave out->len as it was (the caller still frees out). Decoders zero *pout
 * and fill it; the caller clears it with the matching _clear, also after a
 * failed decode. Errors: ALTAR_EDECODE (malformed, wrong type, missing
 * required field), ALTAR_ETOOBIG (a bound exceeded), ALTAR_EINVAL (encoder
 * given a value it must not publish), ALTAR_ENOMEM; err->msg names the field,
 * e.g. "status.handle.labels.fold: expected string". All calls are reentrant
 * and keep no state; any thread may call them. */
int altar_encode_spec(const altar_spec_t *spec, altar_buf_t *out, altar_error_t *err);
int altar_decode_spec(const void *data, size_t len, altar_spec_t *pout, altar_error_t *err);
int altar_encode_job(const altar_job_msg_t *m, altar_buf_t *out, altar_error_t *err);
int altar_decode_job(const void *data, size_t len, altar_job_msg_t *pout, altar_error_t *err);
int altar_encode_status(const altar_status_event_t *e, altar_buf_t *out, altar_error_t *err);
int altar_decode_status(const void *data, size_t len, altar_status_event_t *pout, altar_error_t *err);
/* The fast path of altar_decode_status for a message in exactly the form
 * altar_encode_status writes: every string, array and map of *pout (spec_enc
 * included, always set with a spec) is placed in arena a, so *pout is never
 * cleared; it lives until a is reset. ALTAR_ENOTSUP for anything else,
 * valid or not, with *pout zeroed: altar_decode_status decides those. When
 * this accepts, altar_decode_status gives an equal event. flags: 0, or
 * ALTAR_DECODE_SPEC_BYTES: the spec is validated exactly as without it (the
 * same messages are accepted) but not built: pout->spec stays NULL and the
 * spec is present as pout->spec_enc only (the same bytes, see spec_enc
 * above); every other field, record_fixed included, is as without it. */
#define ALTAR_DECODE_SPEC_BYTES 1u
int altar_decode_status_canonical(const void *data, size_t len, altar_arena_t *a, unsigned flags,
                                  altar_status_event_t *pout);
/* The outputs of a spec in exactly the form altar_encode_spec writes (the
 * bytes a ledger keeps), placed in arena a without building the rest of
 * the spec: *pv (NULL when none) and *pn live until a is reset. The whole
 * spec is checked as altar_decode_status_canonical checks one. ALTAR_ENOTSUP
 * for anything else, valid or not, with *pv NULL and nothing left in a:
 * altar_decode_spec decides those. When this accepts, altar_decode_spec
 * gives the same outputs. */
int altar_decode_spec_outputs_canonical(const void *data, size_t len, altar_arena_t *a, altar_transfer_t **pv,
                                        size_t *pn);
int altar_encode_group(const altar_group_event_t *e, altar_buf_t *out, altar_error_t *err);
int altar_decode_group(const void *data, size_t len, altar_group_event_t *pout, altar_error_t *err);
/* Whether group event e (every member in e->shards, every output in
 * e->outputs) goes out as one message: at most ALTAR_MAX_ARRAY shards and
 * outputs, the shards within the message bound with room for the
 * failures, the outputs within a quarter of it (schemas/README.md, "group
 * events of any width"). Any group event altar published before wide
 * groups fits. */
bool altar_group_event_fits(const altar_group_event_t *e);
/* The messages of group event e, in publishing order, into *pv (*pn of
 * them; the caller frees each with altar_buf_free and the array with free):
 * altar_encode_group(e) alone when it fits; else the head and its pages,
 * each within ALTAR_MAX_MESSAGE and ALTAR_MAX_ARRAY shards and outputs.
 * Deterministic: the same e gives the same bytes. */
int altar_encode_group_messages(const altar_group_event_t *e, altar_buf_t **pv, size_t *pn, altar_error_t *err);
/* One page of a wide group's event (type "group_page"): e's event, event
 * id, kind, group key, ts, page and pages, and e's shards and outputs as
 * that page's slice. */
int altar_encode_group_page(const altar_group_event_t *e, altar_buf_t *out, altar_error_t *err);
int altar_decode_group_page(const void *data, size_t len, altar_group_event_t *pout, altar_error_t *err);
/* Adds page p (decoded, same event id) to head g: its shards and outputs
 * are moved to g's end (p keeps none). Pages are taken in order: 1 when p
 * was the next one (g->page counts the pages taken), 0 when it was not (a
 * copy of one taken already, or one out of order: p is left alone),
 * ALTAR_ENOMEM (negative). The group's list is whole when g->page == g->pages. */
int altar_group_event_take_page(altar_group_event_t *g, altar_group_event_t *p);
int altar_encode_record(const altar_record_t *r, altar_buf_t *out, altar_error_t *err);
/* Appends altar_encode_record's bytes for rec with its spec left out (nil),
 * writing only the changing fields and copying the fixed part: fixed_data
 * and fixed_len are the bytes of an altar_record_fixed_t of rec's handle
 * and kind (a ledger keeps a copy of them per record). For a record without
 * a failure only: ALTAR_EINVAL for one with a failure or an unknown state
 * (altar_encode_record checks those), ALTAR_ENOMEM. */
int altar_encode_record_around(const altar_record_t *rec, const void *fixed_data, size_t fixed_len, altar_buf_t *out);
int altar_decode_record(const void *data, size_t len, altar_record_t *pout, altar_error_t *err);
int altar_encode_control(const altar_control_msg_t *m, altar_buf_t *out, altar_error_t *err);
int altar_decode_control(const void *data, size_t len, altar_control_msg_t *pout, altar_error_t *err);

/* Reads a message's "type" field without decoding the rest ("job", "status",
 * "group") into buf as a NUL-terminated string; 0, or ALTAR_EDECODE when the
 * bytes are not a bounded msgpack map with a string "type" that fits in buf
 * (spec and record carry no "type"). The bytes are still bound-checked. */
int altar_peek_type(const void *data, size_t len, char *buf, size_t bufsize);
/* A group event's "event_id" (malloc'd into *pout) without decoding its
 * shards; the bytes are bound-checked and a "type" other than "group" is
 * refused. 0, ALTAR_EDECODE or ALTAR_ENOMEM. */
int altar_peek_group_event_id(const void *data, size_t len, char **pout);

/* JSON form (same keys as msgpack). *_to_json returns a malloc'd compact
 * JSON string (caller frees) or NULL with err set. *_from_json parses text. */
char *altar_spec_to_json(const altar_spec_t *spec, altar_error_t *err);
int altar_spec_from_json(const char *text, size_t len, altar_spec_t *pout, altar_error_t *err);
char *altar_job_to_json(const altar_job_msg_t *m, altar_error_t *err);
int altar_job_from_json(const char *text, size_t len, altar_job_msg_t *pout, altar_error_t *err);
char *altar_status_to_json(const altar_status_event_t *e, altar_error_t *err);
int altar_status_from_json(const char *text, size_t len, altar_status_event_t *pout, altar_error_t *err);
char *altar_group_to_json(const altar_group_event_t *e, altar_error_t *err);
int altar_group_from_json(const char *text, size_t len, altar_group_event_t *pout, altar_error_t *err);
char *altar_record_to_json(const altar_record_t *r, altar_error_t *err);
int altar_record_from_json(const char *text, size_t len, altar_record_t *pout, altar_error_t *err);
char *altar_control_to_json(const altar_control_msg_t *m, altar_error_t *err);
int altar_control_from_json(const char *text, size_t len, altar_control_msg_t *pout, altar_error_t *err);
char *altar_failure_to_json(const altar_failure_t *f, altar_error_t *err);
char *altar_handle_to_json(const altar_handle_t *h, altar_error_t *err);
char *altar_status_result_to_json(const altar_status_t *st, altar_error_t *err); /* TaskStatus */
/* The reverse of the two above, with a message's bounds and types (a
 * missing backend or external_id reads as ""; a FAILED status without a
 * failure gets "job_failed"; a failure on any other state is dropped). 0,
 * or ALTAR_EDECODE / ALTAR_ETOOBIG naming the field; *pout is zeroed first
 * and cleared on error; the caller clears it. */
int altar_handle_from_json(const char *text, size_t len, altar_handle_t *pout, altar_error_t *err);
int altar_status_result_from_json(const char *text, size_t len, altar_status_t *pout, altar_error_t *err);

/* Generic bridges used by `altar codec`: JSON text of type t → msgpack, and back. */
int altar_codec_json_to_msgpack(altar_msg_type_t t, const char *json, size_t len, altar_buf_t *out, altar_error_t *err);
char *altar_codec_msgpack_to_json(altar_msg_type_t t, const void *data, size_t len, altar_error_t *err);

/* Identity. The task key is the lowercase hex SHA-256 (64 chars) of the
 * spec's canonical encoding: msgpack with keys sorted, avoid_hosts left out. */
#define ALTAR_TASK_KEY_LEN 64
int altar_spec_identity(const altar_spec_t *spec, char out[ALTAR_TASK_KEY_LEN + 1], altar_error_t *err);
/* The same from the spec's canonical encoding (altar_encode_spec's bytes),
 * for a caller that needs those bytes anyway. */
int altar_spec_identity_of_encoding(const void *enc, size_t len, char out[ALTAR_TASK_KEY_LEN + 1], altar_error_t *err);
/* Kubernetes Job name "<kind>-<short hash>": DNS-1123 label, at most 63 chars. */
#define ALTAR_JOB_NAME_MAX 63
int altar_spec_job_name(const altar_spec_t *spec, char out[ALTAR_JOB_NAME_MAX + 1], altar_error_t *err);
/* Deterministic group event id: hex SHA-256 over kind, group key and the
 * sorted member task keys. */
int altar_group_event_id(const char *kind, const char *group_key, const char *const *task_keys, size_t n,
                         char out[ALTAR_TASK_KEY_LEN + 1]);

ALTAR_API_END

#endif
