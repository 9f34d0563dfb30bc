/* For the s3:// adapter only: SigV4 signing and where credentials come from. */
#ifndef ALTAR_S3_INT_H
#define ALTAR_S3_INT_H

#include "cloud_int.h"

#include <time.h>

/* SHA-256 of nothing: the payload hash of a request without a body. */
#define ALTAR_S3_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* One header that takes part in the signature: lower-case name, value. */
typedef struct altar_s3_header {
  const char *name;
  const char *value;
} altar_s3_header_t;

/* "20130524T000000Z" for t (UTC) into out[17]. */
void altar__s3_amz_date(time_t t, char out[17]);
/* Lower-case hex SHA-256 of p into out[65]. */
void altar__s3_sha256_hex(const void *p, size_t n, char out[65]);

/* The Authorization header's value (after "Authorization: ") for one
 * request, signed with AWS Signature Version 4. canonical_uri is the
 * already-encoded path, canonical_query the already-encoded and sorted
 * query ("" for none), headers every signed header (sorted here),
 * payload_hash the hex SHA-256 of the body or "UNSIGNED-PAYLOAD". */
int altar__s3_sign(const char *method, const char *canonical_uri, const char *canonical_query,
                   const altar_s3_header_t *headers, size_t n_headers, const char *payload_hash, const char *amz_date,
                   const char *region, const char *service, const char *access_key, const char *secret_key,
                   altar_buf_t *out, altar_error_t *err);

typedef struct altar_s3_creds {
  char *access_key;
  char *secret_key;
  char *session_token; /* NULL without one */
  char source[160];    /* where they came from, for messages (never the secret) */
} altar_s3_creds_t;

/* In order: the options access_key_id / secret_access_key / session_token;
 * the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_SESSION_TOKEN) unless a profile was named in the options; the shared
 * credentials file (option credentials_file, AWS_SHARED_CREDENTIALS_FILE,
 * ~/.aws/credentials) at the profile (option profile, AWS_PROFILE,
 * "default"). None found is ALTAR_EINVAL saying where it looked. */
int altar__s3_creds_load(const altar_strmap_t *options, altar_s3_creds_t *c, altar_error_t *err);
void altar__s3_creds_clear(altar_s3_creds_t *c);

#endif
