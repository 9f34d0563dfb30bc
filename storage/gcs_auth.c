/* Access tokens for the gs:// adapter (see gcs_int.h): a fixed bearer
 * token, a service-account key (RS256 JWT signed with OpenSSL, exchanged at
 * the key's token_uri), or the metadata server. Tokens are cached until a
 * minute before they expire. */
#include "gcs_int.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_SCOPE "https://www.googleapis.com/auth/devstorage.read_write"
#define DEFAULT_TOKEN_URI "https://oauth2.googleapis.com/token"
#define DEFAULT_METADATA_HOST "metadata.google.internal"
#define MAX_KEY_FILE (64 * 1024)
#define MAX_TOKEN 4096

typedef enum { AUTH_NONE, AUTH_BEARER, AUTH_SA, AUTH_METADATA } auth_mode_t;

struct altar_gcs_auth {
  auth_mode_t mode;
  char *token;    /* cached access token */
  time_t expires; /* 0: never (bearer) */
  /* service account */
  char *client_email, *key_id, *token_uri, *scope;
  EVP_PKEY *key;
  /* metadata */
  char *metadata_host;
};

static const char *const mode_names[] = {"none", "bearer", "service_account", "metadata"};

const char *altar__gcs_auth_mode(const altar_gcs_auth_t *a) { return mode_names[a->mode]; }

void altar__gcs_auth_free(altar_gcs_auth_t *a) {
  if (!a) return;
  free(a->token);
  free(a->client_email);
  free(a->key_id);
  free(a->token_uri);
  free(a->scope);
  free(a->metadata_host);
  EVP_PKEY_free(a->key);
  free(a);
}

void altar__gcs_auth_invalidate(altar_gcs_auth_t *a) {
  if (a->mode == AUTH_SA || a->mode == AUTH_METADATA) {
    free(a->token);
    a->token = NULL;
  }
}

/* A token goes into a header line: printable ASCII without spaces only. */
static bool token_ok(const char *t) {
  size_t n = strlen(t);
  if (n == 0 || n > MAX_TOKEN) return false;
  for (size_t i = 0; i < n; i++)
    if (t[i] <= 0x20 || t[i] >= 0x7f) return false;
  return true;
}

static int read_small_file(const char *path, char **pout, altar_error_t *err) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return altar_error_set(err, errno == ENOENT ? ALTAR_ENOTFOUND : ALTAR_EIO, "credentials_file '%.300s': %s", path,
                           strerror(errno));
  char *buf = malloc(MAX_KEY_FILE + 1);
  size_t n = buf ? fread(buf, 1, MAX_KEY_FILE + 1, f) : 0;
  fclose(f);
  if (!buf) return altar_error_set(err, ALTAR_ENOMEM, "credentials_file: out of memory");
  if (n > MAX_KEY_FILE) {
    free(buf);
    return altar_error_set(err, ALTAR_ETOOBIG, "credentials_file '%.300s': larger than %d bytes", path, MAX_KEY_FILE);
  }
  buf[n] = '\0';
  *pout = buf;
  return ALTAR_OK;
}

static const char *json_str(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  return json_is_string(v) ? json_string_value(v) : NULL;
}

static int load_key_file(altar_gcs_auth_t *a, const char *path, altar_error_t *err) {
  char *text = NULL;
  int rc = read_small_file(path, &text, err);
  if (rc) return rc;
  json_error_t je;
  json_t *o = json_loads(text, 0, &je);
  free(text);
  if (!json_is_object(o)) {
    json_decref(o);
    return altar_error_set(err, ALTAR_EDECODE, "credentials_file '%.300s': not a JSON object (line %d: %.100s)", path,
                           je.line, je.text);
  }
  const char *type = json_str(o, "type"), *email = json_str(o, "client_email");
  const char *pem = json_str(o, "private_key"), *kid = json_str(o, "private_key_id");
  const char *uri = json_str(o, "token_uri");
  if (!type || strcmp(type, "service_account")) {
    rc = altar_error_set(err, ALTAR_EINVAL, "credentials_file '%.300s': type is '%.40s', not 'service_account'", path,
                         type ? type : "(missing)");
  } else if (!email || !*email) {
    rc = altar_error_set(err, ALTAR_EINVAL, "credentials_file '%.300s': client_email is missing", path);
  } else if (!pem || !*pem) {
    rc = altar_error_set(err, ALTAR_EINVAL, "credentials_file '%.300s': private_key is missing", path);
  } else if (uri && strncmp(uri, "https://", 8) && strncmp(uri, "http://", 7)) {
    rc = altar_error_set(err, ALTAR_EINVAL, "credentials_file '%.300s': token_uri '%.200s' is not http(s)", path, uri);
  }
  if (!rc) {
    BIO *bio = BIO_new_mem_buf(pem, -1);
    a->key = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    if (!a->key || EVP_PKEY_base_id(a->key) != EVP_PKEY_RSA)
      rc = altar_error_set(err, ALTAR_EINVAL, "credentials_file '%.300s': private_key is not a PEM RSA key", path);
  }
  if (!rc) {
    a->client_email = strdup(email);
    a->key_id = kid ? strdup(kid) : NULL;
    a->token_uri = strdup(uri ? uri : DEFAULT_TOKEN_URI);
    if (!a->client_email || !a->token_uri || (kid && !a->key_id))
      rc = altar_error_set(err, ALTAR_ENOMEM, "credentials_file: out of memory");
  }
  json_decref(o);
  return rc;
}

int altar__gcs_auth_open(const altar_strmap_t *options, bool emulator, altar_gcs_auth_t **pa, altar_error_t *err) {
  *pa = NULL;
  static const char *const bearer_env[] = {"GOOGLE_OAUTH_ACCESS_TOKEN", NULL};
  static const char *const key_env[] = {"GOOGLE_APPLICATION_CREDENTIALS", NULL};
  static const char *const md_env[] = {"GCE_METADATA_HOST", NULL};
  const char *mode = options ? altar_strmap_get(options, "auth") : NULL;
  const char *bearer = altar__cloud_setting(options, "bearer_token", bearer_env);
  const char *keyfile = altar__cloud_setting(options, "credentials_file", key_env);
  const char *mdhost = altar__cloud_setting(options, "metadata_host", md_env);
  const char *scope = options ? altar_strmap_get(options, "scope") : NULL;
  altar_gcs_auth_t *a = calloc(1, sizeof *a);
  if (!a) return altar_error_set(err, ALTAR_ENOMEM, "gs: out of memory");
  if (!mode || !strcmp(mode, "auto")) {
    a->mode = bearer ? AUTH_BEARER : keyfile ? AUTH_SA : emulator ? AUTH_NONE : AUTH_METADATA;
  } else {
    size_t i = 0;
    while (i < 4 && strcmp(mode, mode_names[i])) i++;
    if (i == 4) {
      free(a);
      return altar_error_set(err, ALTAR_EINVAL,
                             "option auth: '%.40s' is not one of auto, none, bearer, service_account, metadata", mode);
    }
    a->mode = (auth_mode_t)i;
  }
  int rc = ALTAR_OK;
  switch (a->mode) {
  case AUTH_NONE: break;
  case AUTH_BEARER:
    if (!bearer)
      rc = altar_error_set(err, ALTAR_EINVAL,
                           "option bearer_token: required by auth=bearer (or set "
                           "GOOGLE_OAUTH_ACCESS_TOKEN)");
    else if (!token_ok(bearer))
      rc = altar_error_set(err, ALTAR_EINVAL, "option bearer_token: must be 1..%d printable characters, no spaces",
                           MAX_TOKEN);
    else if (!(a->token = strdup(bearer))) rc = altar_error_set(err, ALTAR_ENOMEM, "gs: out of memory");
    break;
  case AUTH_SA:
    if (!keyfile)
      rc = altar_error_set(err, ALTAR_EINVAL,
                           "option credentials_file: required by auth=service_account (or set "
                           "GOOGLE_APPLICATION_CREDENTIALS)");
    else rc = load_key_file(a, keyfile, err);
    if (!rc && !(a->scope = strdup(scope ? scope : DEFAULT_SCOPE)))
      rc = altar_error_set(err, ALTAR_ENOMEM, "gs: out of memory");
    break;
  case AUTH_METADATA:
    mdhost = mdhost ? mdhost : DEFAULT_METADATA_HOST;
    if (strpbrk(mdhost, "/?#@ \r\n\t") || strlen(mdhost) > 255)
      rc = altar_error_set(err, ALTAR_EINVAL, "option metadata_host: '%.100s' must be a host[:port]", mdhost);
    else if (!(a->metadata_host = strdup(mdhost))) rc = altar_error_set(err, ALTAR_ENOMEM, "gs: out of memory");
    break;
  }
  if (rc) {
    altar__gcs_auth_free(a);
    return rc;
  }
  *pa = a;
  return ALTAR_OK;
}

/* ---- the JWT ------------------------------------------------------------------------ */

static int b64url(altar_buf_t *out, const unsigned char *p, size_t n) {
  size_t cap = 4 * ((n + 2) / 3) + 1;
  char *tmp = malloc(cap);
  if (!tmp) return ALTAR_ENOMEM;
  altar__cloud_b64(p, n, tmp, cap);
  size_t len = strlen(tmp);
  while (len && tmp[len - 1] == '=') len--;
  for (size_t i = 0; i < len; i++) tmp[i] = tmp[i] == '+' ? '-' : tmp[i] == '/' ? '_' : tmp[i];
  int rc = altar_buf_append(out, tmp, len);
  free(tmp);
  return rc;
}

static int b64url_json(altar_buf_t *out, json_t *o) {
  char *s = json_dumps(o, JSON_COMPACT);
  if (!s) return ALTAR_ENOMEM;
  int rc = b64url(out, (const unsigned char *)s, strlen(s));
  free(s);
  return rc;
}

/* header.claims.signature, RS256 over the first two parts. */
static int make_jwt(altar_gcs_auth_t *a, time_t now, altar_buf_t *jwt, altar_error_t *err) {
  json_t *hdr = json_pack("{s:s, s:s}", "alg", "RS256", "typ", "JWT");
  if (hdr && a->key_id) json_object_set_new(hdr, "kid", json_string(a->key_id));
  json_t *claims = json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss", a->client_email, "scope", a->scope, "aud",
                             a->token_uri, "iat", (json_int_t)now, "exp", (json_int_t)now + 3600);
  int rc = (!hdr || !claims || b64url_json(jwt, hdr) || altar_buf_append(jwt, ".", 1) || b64url_json(jwt, claims))
               ? ALTAR_ENOMEM
               : ALTAR_OK;
  json_decref(hdr);
  json_decref(claims);
  if (rc) return altar_error_set(err, ALTAR_ENOMEM, "gs: building the JWT: out of memory");
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  unsigned char sig[1024];
  size_t siglen = sizeof sig;
  if (!md || EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, a->key) != 1 ||
      EVP_DigestSign(md, sig, &siglen, jwt->data, jwt->len) != 1) {
    EVP_MD_CTX_free(md);
    return altar_error_set(err, ALTAR_ESTORAGE, "gs: signing the JWT with the service-account key failed");
  }
  EVP_MD_CTX_free(md);
  if (altar_buf_append(jwt, ".", 1) || b64url(jwt, sig, siglen))
    return altar_error_set(err, ALTAR_ENOMEM, "gs: building the JWT: out of memory");
  return ALTAR_OK;
}

/* ---- fetching tokens ---------------------------------------------------------------- */

/* {"access_token": "...", "expires_in": N} from a token endpoint. */
static int take_token(altar_gcs_auth_t *a, altar_cloud_req_t *r, const char *where, time_t now, altar_error_t *err) {
  json_error_t je;
  json_t *o = json_loadb((const char *)r->answer.data, r->answer.len, 0, &je);
  if (r->status < 200 || r->status > 299) {
    char detail[300] = "";
    const char *e = json_is_object(o) ? json_str(o, "error") : NULL;
    const char *d = json_is_object(o) ? json_str(o, "error_description") : NULL;
    if (e) snprintf(detail, sizeof detail, "%.100s%s%.180s", e, d ? ": " : "", d ? d : "");
    json_decref(o);
    return altar__cloud_status_error("gs: getting an access token", where, r->status, detail, err);
  }
  const char *tok = json_is_object(o) ? json_str(o, "access_token") : NULL;
  json_t *exp = json_is_object(o) ? json_object_get(o, "expires_in") : NULL;
  if (!tok || !token_ok(tok)) {
    json_decref(o);
    return altar_error_set(err, ALTAR_EDECODE, "gs: %.200s answered without a usable access_token", where);
  }
  json_int_t secs = json_is_integer(exp) ? json_integer_value(exp) : 3600;
  if (secs < 0 || secs > 86400 * 7) secs = 3600;
  free(a->token);
  a->token = strdup(tok);
  json_decref(o);
  if (!a->token) return altar_error_set(err, ALTAR_ENOMEM, "gs: out of memory");
  a->expires = now + (time_t)secs;
  return ALTAR_OK;
}

static int fetch_sa_token(altar_gcs_auth_t *a, altar_cloud_http_t *h, time_t now, altar_error_t *err) {
  altar_buf_t jwt = {0}, body = {0};
  int rc = make_jwt(a, now, &jwt, err);
  static const char grant[] = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=";
  if (!rc && (altar_buf_append(&body, grant, sizeof grant - 1) || altar_buf_append(&body, jwt.data, jwt.len)))
    rc = altar_error_set(err, ALTAR_ENOMEM, "gs: out of memory");
  struct curl_slist *hdrs = NULL;
  altar_cloud_req_t r = {0};
  if (!rc) {
    hdrs = curl_slist_append(hdrs, "Content-Type: application/x-www-form-urlencoded");
    hdrs = curl_slist_append(hdrs, "Expect:");
    r.method = "POST";
    r.url = a->token_uri;
    r.headers = hdrs;
    r.body = body.data;
    r.body_len = body.len;
    r.has_body = true;
    rc = altar__cloud_perform(h, &r, "gs: getting an access token", err);
    if (!rc) rc = take_token(a, &r, a->token_uri, now, err);
  }
  curl_slist_free_all(hdrs);
  altar__cloud_req_clear(&r);
  altar_buf_free(&jwt);
  altar_buf_free(&body);
  return rc;
}

static int fetch_metadata_token(altar_gcs_auth_t *a, altar_cloud_http_t *h, time_t now, altar_error_t *err) {
  char url[400];
  snprintf(url, sizeof url, "http://%s/computeMetadata/v1/instance/service-accounts/default/token", a->metadata_host);
  struct curl_slist *hdrs = curl_slist_append(NULL, "Metadata-Flavor: Google");
  altar_cloud_req_t r = {.method = "GET", .url = url, .headers = hdrs};
  int rc = altar__cloud_perform(h, &r, "gs: getting an access token from the metadata server", err);
  if (!rc) rc = take_token(a, &r, url, now, err);
  curl_slist_free_all(hdrs);
  altar__cloud_req_clear(&r);
  return rc;
}

int altar__gcs_auth_header(altar_gcs_auth_t *a, altar_cloud_http_t *h, struct curl_slist **phdrs, altar_error_t *err) {
  if (a->mode == AUTH_NONE) return ALTAR_OK;
  time_t now = time(NULL);
  if (a->mode != AUTH_BEARER && (!a->token || a->expires - 60 <= now)) {
    int rc = a->mode == AUTH_SA ? fetch_sa_token(a, h, now, err) : fetch_metadata_token(a, h, now, err);
    if (rc) return rc;
  }
  char line[MAX_TOKEN + 32];
  snprintf(line, sizeof line, "Authorization: Bearer %s", a->token);
  struct curl_slist *n = curl_slist_append(*phdrs, line);
  if (!n) return altar_error_set(err, ALTAR_ENOMEM, "gs: out of memory");
  *phdrs = n;
  return ALTAR_OK;
}
