/* AWS Signature Version 4 for the s3:// adapter. Signed here rather than by
 * libcurl's CURLOPT_AWS_SIGV4 so that the payload hash, the query's
 * canonical form and the request time are ours to set (the time offset
 * option, and tests of a skewed clock, need the last). */
#include "s3_int.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>

void altar__s3_amz_date(time_t t, char out[17]) {
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

void altar__s3_sha256_hex(const void *p, size_t n, char out[65]) {
  unsigned char md[32];
  unsigned int len = 32;
  EVP_Digest(p, n, md, &len, EVP_sha256(), NULL);
  altar__cloud_hex(md, 32, out);
}

static void hmac(const void *key, size_t klen, const char *msg, unsigned char out[32]) {
  unsigned int len = 32;
  HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg), out, &len);
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const altar_s3_header_t *)a)->name, ((const altar_s3_header_t *)b)->name);
}

int altar__s3_sign(const char *method, const char *canonical_uri, const char *canonical_query,
                   const altar_s3_header_t *headers, size_t n_headers, const char *payload_hash, const char *amz_date,
                   const char *region, const char *service, const char *access_key, const char *secret_key,
                   altar_buf_t *out, altar_error_t *err) {
  if (n_headers > 32) return altar_error_set(err, ALTAR_EINVAL, "s3: too many signed headers");
  altar_s3_header_t sorted[32];
  memcpy(sorted, headers, n_headers * sizeof *headers);
  qsort(sorted, n_headers, sizeof *sorted, by_name);
  altar_buf_t canon = {0}, names = {0}, sts = {0};
  int rc = ALTAR_OK;
#define ADD(b, s) rc = rc ? rc : altar_buf_append_str(&(b), (s))
  ADD(canon, method);
  ADD(canon, "\n");
  ADD(canon, canonical_uri);
  ADD(canon, "\n");
  ADD(canon, canonical_query);
  ADD(canon, "\n");
  for (size_t i = 0; i < n_headers; i++) {
    ADD(canon, sorted[i].name);
    ADD(canon, ":");
    ADD(canon, sorted[i].value); /* our values are already trimmed single-spaced */
    ADD(canon, "\n");
    if (i) ADD(names, ";");
    ADD(names, sorted[i].name);
  }
  ADD(canon, "\n");
  if (!rc && altar_buf_append(&names, "", 1)) rc = ALTAR_ENOMEM;
  if (!rc) ADD(canon, (const char *)names.data);
  ADD(canon, "\n");
  ADD(canon, payload_hash);
  char date[9];
  memcpy(date, amz_date, 8);
  date[8] = '\0';
  char scope[160];
  snprintf(scope, sizeof scope, "%s/%s/%s/aws4_request", date, region, service);
  char canon_hash[65] = "";
  if (!rc) altar__s3_sha256_hex(canon.data, canon.len, canon_hash);
  ADD(sts, "AWS4-HMAC-SHA256\n");
  ADD(sts, amz_date);
  ADD(sts, "\n");
  ADD(sts, scope);
  ADD(sts, "\n");
  ADD(sts, canon_hash);
  if (!rc && altar_buf_append(&sts, "", 1)) rc = ALTAR_ENOMEM;
  if (!rc) {
    /* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service), "aws4_request") */
    size_t sl = strlen(secret_key);
    char *k0 = malloc(sl + 5);
    if (!k0) {
      rc = ALTAR_ENOMEM;
    } else {
      memcpy(k0, "AWS4", 4);
      memcpy(k0 + 4, secret_key, sl + 1);
      unsigned char k1[32], k2[32], k3[32], k4[32], sig[32];
      hmac(k0, sl + 4, date, k1);
      hmac(k1, 32, region, k2);
      hmac(k2, 32, service, k3);
      hmac(k3, 32, "aws4_request", k4);
      hmac(k4, 32, (const char *)sts.data, sig);
      free(k0);
      char sighex[65];
      altar__cloud_hex(sig, 32, sighex);
      ADD(*out, "AWS4-HMAC-SHA256 Credential=");
      ADD(*out, access_key);
      ADD(*out, "/");
      ADD(*out, scope);
      ADD(*out, ", SignedHeaders=");
      ADD(*out, (const char *)names.data);
      ADD(*out, ", Signature=");
      ADD(*out, sighex);
      if (!rc && altar_buf_append(out, "", 1)) rc = ALTAR_ENOMEM;
    }
  }
#undef ADD
  altar_buf_free(&canon);
  altar_buf_free(&names);
  altar_buf_free(&sts);
  if (rc) return altar_error_set(err, ALTAR_ENOMEM, "s3: signing: out of memory");
  return ALTAR_OK;
}
