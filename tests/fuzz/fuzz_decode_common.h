/* Shared body of the fuzz_decode_* targets: decode untrusted bytes; when that
 * succeeds, the message must re-encode, decode again to an equal message,
 * re-encode to the same bytes (canonical), and survive the JSON bridge. */
#ifndef ALTAR_FUZZ_DECODE_COMMON_H
#define ALTAR_FUZZ_DECODE_COMMON_H

#include "altar/codec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef union fuzz_msg {
  altar_spec_t spec;
  altar_job_msg_t job;
  altar_status_event_t status;
  altar_group_event_t group;
  altar_record_t record;
  altar_control_msg_t control;
} fuzz_msg_t;

static inline int fuzz_decode(altar_msg_type_t t, const void *d, size_t n, fuzz_msg_t *m, altar_error_t *err) {
  switch (t) {
  case ALTAR_MSG_SPEC: return altar_decode_spec(d, n, &m->spec, err);
  case ALTAR_MSG_JOB: return altar_decode_job(d, n, &m->job, err);
  case ALTAR_MSG_STATUS: return altar_decode_status(d, n, &m->status, err);
  case ALTAR_MSG_GROUP: return altar_decode_group(d, n, &m->group, err);
  case ALTAR_MSG_GROUP_PAGE: return altar_decode_group_page(d, n, &m->group, err);
  case ALTAR_MSG_RECORD: return altar_decode_record(d, n, &m->record, err);
  case ALTAR_MSG_CONTROL: return altar_decode_control(d, n, &m->control, err);
  }
  abort();
}

static inline int fuzz_encode(altar_msg_type_t t, const fuzz_msg_t *m, altar_buf_t *out, altar_error_t *err) {
  switch (t) {
  case ALTAR_MSG_SPEC: return altar_encode_spec(&m->spec, out, err);
  case ALTAR_MSG_JOB: return altar_encode_job(&m->job, out, err);
  case ALTAR_MSG_STATUS: return altar_encode_status(&m->status, out, err);
  case ALTAR_MSG_GROUP: return altar_encode_group(&m->group, out, err);
  case ALTAR_MSG_GROUP_PAGE: return altar_encode_group_page(&m->group, out, err);
  case ALTAR_MSG_RECORD: return altar_encode_record(&m->record, out, err);
  case ALTAR_MSG_CONTROL: return altar_encode_control(&m->control, out, err);
  }
  abort();
}

static inline void fuzz_clear(altar_msg_type_t t, fuzz_msg_t *m) {
  switch (t) {
  case ALTAR_MSG_SPEC: altar_spec_clear(&m->spec); break;
  case ALTAR_MSG_JOB: altar_job_msg_clear(&m->job); break;
  case ALTAR_MSG_STATUS: altar_status_event_clear(&m->status); break;
  case ALTAR_MSG_GROUP:
  case ALTAR_MSG_GROUP_PAGE: altar_group_event_clear(&m->group); break;
  case ALTAR_MSG_RECORD: altar_record_clear(&m->record); break;
  case ALTAR_MSG_CONTROL: altar_control_msg_clear(&m->control); break;
  }
}

static inline int fuzz_decode_one(altar_msg_type_t t, const uint8_t *data, size_t size) {
  fuzz_msg_t a, b;
  altar_error_t err = {0};
  char peek[16];
  (void)altar_peek_type(data, size, peek, sizeof peek);
  int rc = fuzz_decode(t, data, size, &a, &err);
  if (rc) {
    if (rc != ALTAR_EDECODE && rc != ALTAR_ETOOBIG) abort(); /* only these two for bad bytes */
    if (!err.msg[0]) abort();                                /* and always a message */
    fuzz_clear(t, &a);
    return 0;
  }
  altar_buf_t e1 = {0}, e2 = {0};
  if (fuzz_encode(t, &a, &e1, &err)) abort();
  if (fuzz_decode(t, e1.data, e1.len, &b, &err)) abort();
  if (fuzz_encode(t, &b, &e2, &err)) abort();
  if (e1.len != e2.len || memcmp(e1.data, e2.data, e1.len)) abort();
  if (t == ALTAR_MSG_STATUS) {
    /* Spec bytes kept by the decoder are exactly the spec's encoding, and
     * a canonical message (our own encoding, e1) always has them kept. */
    const altar_status_event_t *sa = &a.status, *sb = &b.status;
    altar_buf_t se = {0};
    if (altar_spec_enc_len(&sa->spec_enc) &&
        (!sa->spec || altar_encode_spec(sa->spec, &se, &err) || se.len != altar_spec_enc_len(&sa->spec_enc) ||
         memcmp(se.data, altar_spec_enc_data(&sa->spec_enc), se.len)))
      abort();
    if (sb->spec && !altar_spec_enc_len(&sb->spec_enc)) abort();
    if (sa->spec && size == e1.len && !memcmp(data, e1.data, size) && !altar_spec_enc_len(&sa->spec_enc)) abort();
    altar_buf_free(&se);
  }
  char *json = altar_codec_msgpack_to_json(t, e1.data, e1.len, &err);
  if (!json) abort();
  altar_buf_t e3 = {0};
  if (altar_codec_json_to_msgpack(t, json, strlen(json), &e3, &err)) abort();
  if (e3.len != e1.len || memcmp(e3.data, e1.data, e1.len)) abort();
  free(json);
  altar_buf_free(&e1);
  altar_buf_free(&e2);
  altar_buf_free(&e3);
  fuzz_clear(t, &a);
  fuzz_clear(t, &b);
  return 0;
}

#endif
