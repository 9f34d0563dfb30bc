/* docker backend: reading `docker inspect` output (untrusted JSON from another
 * program) into the few fields poll needs. */
#include "backends/docker_int.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Far more than any host runs; bounds the allocation below. */
#define INSPECT_MAX_CONTAINERS 100000

static int digits(const char *s, int n, int *pv) {
  int v = 0;
  for (int i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  *pv = v;
  return 0;
}

int altar__docker_parse_time(const char *s, double *pt) {
  *pt = 0;
  if (!s) return ALTAR_EDECODE;
  size_t len = strlen(s);
  if (len < 20 || len > 40) return ALTAR_EDECODE;
  int Y, M, D, h, m, sec;
  if (digits(s, 4, &Y) || s[4] != '-' || digits(s + 5, 2, &M) || s[7] != '-' || digits(s + 8, 2, &D) ||
      (s[10] != 'T' && s[10] != 't') || digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &m) ||
      s[16] != ':' || digits(s + 17, 2, &sec))
    return ALTAR_EDECODE;
  /* Docker's zero time: never started / not finished. */
  if (Y <= 1) return 0;
  if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60) return ALTAR_EDECODE;
  const char *p = s + 19;
  double frac = 0, scale = 0.1;
  if (*p == '.') {
    p++;
    if (*p < '0' || *p > '9') return ALTAR_EDECODE;
    while (*p >= '0' && *p <= '9') {
      frac += (*p - '0') * scale;
      scale /= 10;
      p++;
    }
  }
  long offset = 0;
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int oh, om;
    if (digits(p + 1, 2, &oh) || p[3] != ':' || digits(p + 4, 2, &om) || oh > 23 || om > 59) return ALTAR_EDECODE;
    offset = (oh * 3600L + om * 60L) * (*p == '-' ? -1 : 1);
    p += 6;
  } else {
    return ALTAR_EDECODE;
  }
  if (*p) return ALTAR_EDECODE;
  struct tm tm = {0};
  tm.tm_year = Y - 1900;
  tm.tm_mon = M - 1;
  tm.tm_mday = D;
  tm.tm_hour = h;
  tm.tm_min = m;
  tm.tm_sec = sec;
  time_t t = timegm(&tm);
  if (t == (time_t)-1) return ALTAR_EDECODE;
  *pt = (double)t - (double)offset + frac;
  return 0;
}

static void copy_str(char *dst, size_t cap, const char *src) {
  size_t n = strlen(src);
  if (n >= cap) n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

static int parse_one(json_t *c, size_t i, altar_docker_info_t *info, altar_error_t *err) {
  memset(info, 0, sizeof *info);
  if (!json_is_object(c)) return altar_error_set(err, ALTAR_EDECODE, "docker inspect: [%zu]: not an object", i);
  const char *id = json_string_value(json_object_get(c, "Id"));
  if (!id || !altar__docker_valid_id(id))
    return altar_error_set(err, ALTAR_EDECODE, "docker inspect: [%zu].Id: missing or not a container id", i);
  copy_str(info->id, sizeof info->id, id);

  json_t *st = json_object_get(c, "State");
  if (!json_is_object(st)) return altar_error_set(err, ALTAR_EDECODE, "docker inspect: [%zu].State: missing", i);
  const char *status = json_string_value(json_object_get(st, "Status"));
  if (!status || strlen(status) >= sizeof info->status)
    return altar_error_set(err, ALTAR_EDECODE, "docker inspect: [%zu].State.Status: missing or too long", i);
  copy_str(info->status, sizeof info->status, status);

  json_t *ec = json_object_get(st, "ExitCode");
  if (ec && !json_is_integer(ec))
    return altar_error_set(err, ALTAR_EDECODE, "docker inspect: [%zu].State.ExitCode: not an integer", i);
  info->exit_code = ec ? (int64_t)json_integer_value(ec) : 0;
  json_t *oom = json_object_get(st, "OOMKilled");
  if (oom && !json_is_boolean(oom))
    return altar_error_set(err, ALTAR_EDECODE, "docker inspect: [%zu].State.OOMKilled: not a boolean", i);
  info->oom_killed = oom && json_is_true(oom);

  const char *started = json_string_value(json_object_get(st, "StartedAt"));
  if (started && altar__docker_parse_time(started, &info->started_at) < 0)
    return altar_error_set(err, ALTAR_EDECODE, "docker inspect: [%zu].State.StartedAt: '%.40s' is not a time", i,
                           started);
  const char *finished = json_string_value(json_object_get(st, "FinishedAt"));
  if (finished && altar__docker_parse_time(finished, &info->finished_at) < 0)
    return altar_error_set(err, ALTAR_EDECODE, "docker inspect: [%zu].State.FinishedAt: '%.40s' is not a time", i,
                           finished);
  const char *errtxt = json_string_value(json_object_get(st, "Error"));
  if (errtxt) altar__docker_last_line(errtxt, info->error, sizeof info->error);

  json_t *labels = json_object_get(json_object_get(c, "Config"), "Labels");
  const char *tk = json_string_value(json_object_get(labels, ALTAR_DOCKER_LABEL_TASK_KEY));
  if (tk && strlen(tk) == 64 && strspn(tk, "0123456789abcdef") == 64)
    snprintf(info->task_key, sizeof info->task_key, "%s", tk);
  const char *tv = json_string_value(json_object_get(labels, ALTAR_DOCKER_LABEL_TIMEOUT));
  if (tv) {
    char *end = NULL;
    errno = 0;
    long long t = strtoll(tv, &end, 10);
    /* A label someone else could have written: a bad one means no limit
     * rather than an error for the whole poll. */
    if (!errno && end != tv && !*end && t >= 0) info->timeout_s = (altar_opt_i64_t){true, t};
  }
  return 0;
}

int altar__docker_parse_inspect(const char *json, size_t len, altar_docker_info_t **pinfos, size_t *pn,
                                altar_error_t *err) {
  *pinfos = NULL;
  *pn = 0;
  json_error_t jerr;
  json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!root)
    return altar_error_set(err, ALTAR_EDECODE, "docker inspect: output is not JSON: %s (line %d)", jerr.text,
                           jerr.line);
  int rc = 0;
  if (!json_is_array(root)) {
    rc = altar_error_set(err, ALTAR_EDECODE, "docker inspect: output is not a JSON array");
    goto out;
  }
  size_t n = json_array_size(root);
  if (n > INSPECT_MAX_CONTAINERS) {
    rc = altar_error_set(err, ALTAR_ETOOBIG, "docker inspect: %zu containers exceed the bound", n);
    goto out;
  }
  if (n == 0) goto out;
  altar_docker_info_t *infos = calloc(n, sizeof *infos);
  if (!infos) {
    rc = altar_error_set(err, ALTAR_ENOMEM, "docker inspect: %zu entries", n);
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    if ((rc = parse_one(json_array_get(root, i), i, &infos[i], err)) < 0) {
      free(infos);
      goto out;
    }
  }
  *pinfos = infos;
  *pn = n;
out:
  json_decref(root);
  return rc;
}
