/* For the gs:// adapter only: where its access tokens come from. */
#ifndef ALTAR_GCS_INT_H
#define ALTAR_GCS_INT_H

#include "cloud_int.h"

#include <curl/curl.h>

/* How requests are authorised:
 *   none             no Authorization header (an emulator)
 *   bearer           a fixed OAuth2 access token
 *   service_account  a service-account JSON key: an RS256-signed JWT is
 *                    exchanged at the key's token_uri for an access token
 *   metadata         the GCE/GKE metadata server's default service account */
typedef struct altar_gcs_auth altar_gcs_auth_t;

/* Reads the auth options (auth, bearer_token, credentials_file,
 * metadata_host, scope) and the environment; with auth=auto (the default)
 * the first that applies of: bearer_token / GOOGLE_OAUTH_ACCESS_TOKEN, a
 * credentials file / GOOGLE_APPLICATION_CREDENTIALS, none when an emulator
 * is in use, the metadata server. A key file is read and checked here.
 * *pa is freed with altar__gcs_auth_free. */
int altar__gcs_auth_open(const altar_strmap_t *options, bool emulator, altar_gcs_auth_t **pa, altar_error_t *err);
void altar__gcs_auth_free(altar_gcs_auth_t *a);
/* "none", "bearer", "service_account" or "metadata". */
const char *altar__gcs_auth_mode(const altar_gcs_auth_t *a);
/* Appends the Authorization header to *phdrs, first fetching a token (or a
 * fresh one when the cached one expires within a minute) over h. */
int altar__gcs_auth_header(altar_gcs_auth_t *a, altar_cloud_http_t *h, struct curl_slist **phdrs, altar_error_t *err);
/* Drops the cached token (the server answered 401). */
void altar__gcs_auth_invalidate(altar_gcs_auth_t *a);

#endif
