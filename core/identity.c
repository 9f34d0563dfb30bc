/* Task identity (SHA-256 of the canonical spec encoding), the Kubernetes Job
 * name derived from it, and the deterministic group event id. The exact
 * derivations are documented in schemas/README.md; vectors live in
 * schemas/vectors/identity/. */
#include "core/codec_int.h"
#include "core/digest_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void hex(const unsigned char *d, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[d[i] >> 4];
    out[2 * i + 1] = digits[d[i] & 15];
  }
  out[2 * n] = '\0';
}

static int sha256_hex(const void *data, size_t len, char out[ALTAR_TASK_KEY_LEN + 1], altar_error_t *err) {
  unsigned char md[32];
  if (altar__sha256(data, len, md)) return altar_error_set(err, ALTAR_EIO, "sha256: digest failed");
  hex(md, 32, out);
  return ALTAR_OK;
}

int altar_spec_identity_of_encoding(const void *enc, size_t len, char out[ALTAR_TASK_KEY_LEN + 1], altar_error_t *err) {
  return sha256_hex(enc, len, out, err);
}

int altar_spec_identity(const altar_spec_t *spec, char out[ALTAR_TASK_KEY_LEN + 1], altar_error_t *err) {
  altar_buf_t b = {0};
  int rc = altar_encode_spec(spec, &b, err);
  if (!rc) rc = sha256_hex(b.data, b.len, out, err);
  altar_buf_free(&b);
  return rc;
}

/* The kind made into the start of a DNS-1123 label: lowercase; every run of
 * characters outside [a-z0-9] becomes one '-'; no '-' at either end; at most
 * `max` characters; "task" when nothing is left. */
static void safe_kind(const char *kind, char *out, size_t max) {
  size_t n = 0;
  bool dash = false;
  for (const unsigned char *p = (const unsigned char *)kind; *p && n < max; p++) {
    unsigned char c = *p;
    if (c >= 'A' && c <= 'Z') c = (unsigned char)(c - 'A' + 'a');
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
      if (dash && n > 0) {
        if (n + 2 > max) break; /* no room for '-' and a character after it */
        out[n++] = '-';
      }
      dash = false;
      out[n++] = (char)c;
    } else {
      dash = true;
    }
  }
  while (n > 0 && out[n - 1] == '-') n--;
  out[n] = '\0';
  if (n == 0) memcpy(out, "task", 5);
}

#define ALTAR__JOB_HASH_LEN 10

int altar_spec_job_name(const altar_spec_t *spec, char out[ALTAR_JOB_NAME_MAX + 1], altar_error_t *err) {
  char key[ALTAR_TASK_KEY_LEN + 1];
  int rc = altar_spec_identity(spec, key, err);
  if (rc) return rc;
  char kind[ALTAR_JOB_NAME_MAX + 1];
  safe_kind(spec->kind, kind, ALTAR_JOB_NAME_MAX - 1 - ALTAR__JOB_HASH_LEN);
  snprintf(out, ALTAR_JOB_NAME_MAX + 1, "%s-%.*s", kind, ALTAR__JOB_HASH_LEN, key);
  return ALTAR_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* SHA-256 over the msgpack map {"group_key": str, "kind": str,
 * "task_keys": [str...]} with the task keys sorted bytewise and
 * de-duplicated: the id names the set of members, not their arrival order. */
int altar_group_event_id(const char *kind, const char *group_key, const char *const *task_keys, size_t n,
                         char out[ALTAR_TASK_KEY_LEN + 1]) {
  if (!kind || !group_key || (n && !task_keys)) return ALTAR_EINVAL;
  /* A group event's few members need no allocation to be sorted. */
  const char *stack[16], **sorted = n <= 16 ? stack : malloc(n * sizeof *sorted);
  if (!sorted) return ALTAR_ENOMEM;
  size_t est = 64 + strlen(kind) + strlen(group_key); /* headers at their widest, and the strings */
  for (size_t i = 0; i < n; i++) {
    if (!task_keys[i]) {
      if (sorted != stack) free(sorted);
      return ALTAR_EINVAL;
    }
    sorted[i] = task_keys[i];
    est += 5 + strlen(task_keys[i]);
  }
  if (n) qsort(sorted, n, sizeof *sorted, cmp_str);
  size_t m = 0;
  for (size_t i = 0; i < n; i++)
    if (m == 0 || strcmp(sorted[m - 1], sorted[i])) sorted[m++] = sorted[i];

  altar_buf_t b = {0};
  (void)altar_buf_reserve(&b, est); /* one allocation, not one per doubling; failing, the writer's own is tried */
  altar__wr_t w;
  altar__wr_init(&w, &b, "group", NULL);
  msgpack_pack_map(&w.pk, 3);
  altar__wr_key(&w, "group_key");
  msgpack_pack_str_with_body(&w.pk, group_key, strlen(group_key));
  altar__wr_key(&w, "kind");
  msgpack_pack_str_with_body(&w.pk, kind, strlen(kind));
  altar__wr_key(&w, "task_keys");
  msgpack_pack_array(&w.pk, m);
  for (size_t i = 0; i < m; i++) msgpack_pack_str_with_body(&w.pk, sorted[i], strlen(sorted[i]));
  if (sorted != stack) free(sorted);
  int rc = w.oom ? ALTAR_ENOMEM : sha256_hex(b.data, b.len, out, NULL);
  altar_buf_free(&b);
  return rc;
}
