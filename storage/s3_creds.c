/* Credentials for the s3:// adapter (see s3_int.h): options, environment,
 * or the shared credentials file's profile. */
#include "s3_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CRED_FILE (1024 * 1024)
#define MAX_CRED_VALUE 4096

void altar__s3_creds_clear(altar_s3_creds_t *c) {
  if (c->secret_key) memset(c->secret_key, 0, strlen(c->secret_key));
  free(c->access_key);
  free(c->secret_key);
  free(c->session_token);
  c->access_key = c->secret_key = c->session_token = NULL;
}

/* A value that goes into a header: printable ASCII, no spaces. */
static int value_ok(const char *what, const char *v, altar_error_t *err) {
  size_t n = strlen(v);
  if (n == 0 || n > MAX_CRED_VALUE)
    return altar_error_set(err, ALTAR_EINVAL, "s3 credentials: %s must be 1..%d characters", what, MAX_CRED_VALUE);
  for (size_t i = 0; i < n; i++)
    if (v[i] <= 0x20 || v[i] >= 0x7f)
      return altar_error_set(err, ALTAR_EINVAL, "s3 credentials: %s holds a space or a non-printable character", what);
  return ALTAR_OK;
}

static int take(altar_s3_creds_t *c, const char *ak, const char *sk, const char *tok, altar_error_t *err) {
  int rc = value_ok("the access key id", ak, err);
  if (!rc) rc = value_ok("the secret access key", sk, err);
  if (!rc && tok) rc = value_ok("the session token", tok, err);
  if (rc) return rc;
  c->access_key = strdup(ak);
  c->secret_key = strdup(sk);
  c->session_token = tok ? strdup(tok) : NULL;
  if (!c->access_key || !c->secret_key || (tok && !c->session_token)) {
    altar__s3_creds_clear(c);
    return altar_error_set(err, ALTAR_ENOMEM, "s3 credentials: out of memory");
  }
  return ALTAR_OK;
}

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n')) s[--n] = '\0';
  return s;
}

/* The INI-style file: [name] (or [profile name]) sections of key = value. */
static int from_file(altar_s3_creds_t *c, const char *path, const char *profile, altar_error_t *err) {
  FILE *f = fopen(path, "r");
  if (!f)
    return errno == ENOENT ? ALTAR_ENOTFOUND
                           : altar_error_set(err, ALTAR_EIO, "s3 credentials file '%.300s': %s", path, strerror(errno));
  char line[MAX_CRED_VALUE + 128];
  char ak[MAX_CRED_VALUE + 1] = "", sk[MAX_CRED_VALUE + 1] = "", tok[MAX_CRED_VALUE + 1] = "";
  bool in = false, found = false;
  size_t total = 0, lineno = 0;
  int rc = ALTAR_OK;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    total += strlen(line);
    if (total > MAX_CRED_FILE) {
      rc = altar_error_set(err, ALTAR_ETOOBIG, "s3 credentials file '%.300s': larger than %d bytes", path,
                           MAX_CRED_FILE);
      break;
    }
    if (!strchr(line, '\n') && !feof(f)) {
      rc = altar_error_set(err, ALTAR_EDECODE, "s3 credentials file '%.300s': line %zu is too long", path, lineno);
      break;
    }
    char *s = trim(line);
    if (!*s || *s == '#' || *s == ';') continue;
    if (*s == '[') {
      char *end = strchr(s, ']');
      if (!end) {
        rc = altar_error_set(err, ALTAR_EDECODE, "s3 credentials file '%.300s': line %zu: unclosed '['", path, lineno);
        break;
      }
      *end = '\0';
      char *name = trim(s + 1);
      if (!strncmp(name, "profile ", 8)) name = trim(name + 8);
      in = !strcmp(name, profile);
      found = found || in;
      continue;
    }
    if (!in) continue;
    char *eq = strchr(s, '=');
    if (!eq) continue;
    *eq = '\0';
    char *k = trim(s), *v = trim(eq + 1);
    if (!strcmp(k, "aws_access_key_id")) snprintf(ak, sizeof ak, "%s", v);
    else if (!strcmp(k, "aws_secret_access_key")) snprintf(sk, sizeof sk, "%s", v);
    else if (!strcmp(k, "aws_session_token")) snprintf(tok, sizeof tok, "%s", v);
  }
  fclose(f);
  if (rc) return rc;
  if (!found)
    return altar_error_set(err, ALTAR_EINVAL, "s3 credentials file '%.300s': no profile [%.64s]", path, profile);
  if (!*ak || !*sk)
    return altar_error_set(err, ALTAR_EINVAL,
                           "s3 credentials file '%.300s': profile [%.64s] lacks aws_access_key_id or "
                           "aws_secret_access_key",
                           path, profile);
  rc = take(c, ak, sk, *tok ? tok : NULL, err);
  memset(sk, 0, sizeof sk);
  if (!rc) snprintf(c->source, sizeof c->source, "profile [%.40s] of %.100s", profile, path);
  return rc;
}

int altar__s3_creds_load(const altar_strmap_t *options, altar_s3_creds_t *c, altar_error_t *err) {
  memset(c, 0, sizeof *c);
  const char *oak = options ? altar_strmap_get(options, "access_key_id") : NULL;
  const char *osk = options ? altar_strmap_get(options, "secret_access_key") : NULL;
  const char *otok = options ? altar_strmap_get(options, "session_token") : NULL;
  if (oak || osk) {
    if (!oak || !osk)
      return altar_error_set(err, ALTAR_EINVAL, "options access_key_id and secret_access_key go together");
    int rc = take(c, oak, osk, otok, err);
    if (!rc) snprintf(c->source, sizeof c->source, "the options");
    return rc;
  }
  const char *oprofile = options ? altar_strmap_get(options, "profile") : NULL;
  const char *eak = getenv("AWS_ACCESS_KEY_ID"), *esk = getenv("AWS_SECRET_ACCESS_KEY");
  if (!oprofile && eak && *eak && esk && *esk) {
    const char *etok = getenv("AWS_SESSION_TOKEN");
    int rc = take(c, eak, esk, etok && *etok ? etok : NULL, err);
    if (!rc) snprintf(c->source, sizeof c->source, "the environment (AWS_ACCESS_KEY_ID)");
    return rc;
  }
  static const char *const file_env[] = {"AWS_SHARED_CREDENTIALS_FILE", NULL};
  static const char *const profile_env[] = {"AWS_PROFILE", NULL};
  const char *path = altar__cloud_setting(options, "credentials_file", file_env);
  const char *profile = altar__cloud_setting(options, "profile", profile_env);
  char home_path[4200];
  if (!path) {
    const char *home = getenv("HOME");
    snprintf(home_path, sizeof home_path, "%s/.aws/credentials", home && *home ? home : "/root");
    path = home_path;
  }
  int rc = from_file(c, path, profile ? profile : "default", err);
  if (rc == ALTAR_ENOTFOUND)
    return altar_error_set(err, ALTAR_EINVAL,
                           "s3: no credentials (looked at the options access_key_id/secret_access_key, "
                           "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY and the file '%.300s')",
                           path);
  return rc;
}
