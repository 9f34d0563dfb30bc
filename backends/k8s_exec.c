/* The exec credential plugin of a kubeconfig user: run the program, read
 * the ExecCredential it prints, keep its token or client certificate until
 * it expires. */
#include "altar/clock.h"
#include "k8s_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_OUTPUT (1u << 20)
#define MAX_ENV 256
#define RUN_TIMEOUT_MS 60000

/* The environment for the child: ours, the kubeconfig's, and the
 * KUBERNETES_EXEC_INFO the protocol asks for. */
static char **child_env(const altar_k8s_http_config_t *cfg, char *info) {
  size_t n = 0, m = 0;
  while (environ[n]) n++;
  while (cfg->exec_env && cfg->exec_env[m]) m++;
  char **env = calloc(n + m + 2, sizeof *env);
  if (!env) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "KUBERNETES_EXEC_INFO=", 21)) env[k++] = environ[i];
  for (size_t i = 0; i < m; i++) env[k++] = cfg->exec_env[i];
  env[k++] = info;
  env[k] = NULL;
  return env;
}

/* Runs the plugin; its stdout (bounded) into *pout. */
static int run_plugin(const altar_k8s_http_config_t *cfg, char **pout, size_t *plen, altar_error_t *err) {
  const char *prog = cfg->exec_argv[0];
  char info[256];
  snprintf(info, sizeof info,
           "KUBERNETES_EXEC_INFO={\"apiVersion\":\"%s\",\"kind\":\"ExecCredential\",\"spec\":{\"interactive\":false}}",
           cfg->exec_api_version ? cfg->exec_api_version : "client.authentication.k8s.io/v1");
  char **env = child_env(cfg, info);
  int fds[2];
  if (!env || pipe(fds) != 0) {
    free(env);
    return altar_error_set(err, ALTAR_ENOMEM, "exec credential %s: cannot start: %s", prog, strerror(errno));
  }
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    if (strchr(prog, '/')) execve(prog, cfg->exec_argv, env);
    else execvpe(prog, cfg->exec_argv, env);
    _exit(127);
  }
  free(env);
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return altar_error_set(err, ALTAR_EBACKEND, "exec credential %s: fork: %s", prog, strerror(errno));
  }
  char *buf = malloc(MAX_OUTPUT + 1);
  size_t len = 0;
  bool too_big = false, timed_out = false;
  long deadline = altar_mono_ms() + RUN_TIMEOUT_MS;
  while (buf) {
    long left = deadline - altar_mono_ms();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd pfd = {fds[0], POLLIN, 0};
    int pr = poll(&pfd, 1, (int)left);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    ssize_t r = read(fds[0], buf + len, MAX_OUTPUT - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
    if (len == MAX_OUTPUT) {
      too_big = true;
      break;
    }
  }
  close(fds[0]);
  if (timed_out || too_big) kill(pid, SIGKILL);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  int rc = ALTAR_OK;
  if (!buf) rc = altar_error_set(err, ALTAR_ENOMEM, "exec credential %s: out of memory", prog);
  else if (timed_out)
    rc = altar_error_set(err, ALTAR_ETIMEOUT, "exec credential %s: no answer within %d s", prog, RUN_TIMEOUT_MS / 1000);
  else if (too_big)
    rc = altar_error_set(err, ALTAR_ETOOBIG, "exec credential %s: output larger than %u bytes", prog, MAX_OUTPUT);
  else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    rc = altar_error_set(err, ALTAR_ECONFIG, "exec credential %s: exited with %s %d", prog,
                         WIFEXITED(st) ? "code" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
  if (rc) {
    free(buf);
    return rc;
  }
  buf[len] = '\0';
  *pout = buf;
  *plen = len;
  return ALTAR_OK;
}

static int take_pem(const char *s, char **pdst, size_t *plen) {
  char *copy = strdup(s);
  if (!copy) return ALTAR_ENOMEM;
  if (*pdst) memset(*pdst, 0, *plen);
  free(*pdst);
  *pdst = copy;
  *plen = strlen(copy);
  return ALTAR_OK;
}

int altar__k8s_exec_refresh(altar_k8s_http_config_t *cfg, bool force, altar_error_t *err) {
  if (!cfg->exec_argv || !cfg->exec_argv[0]) return ALTAR_OK;
  bool have = cfg->token || cfg->client_cert_pem;
  /* Renewed a little before the end, so no request goes out on a dying token. */
  if (have && !force && (cfg->exec_expiry == 0 || altar_wall_s() < cfg->exec_expiry - 30)) return ALTAR_OK;
  char *out = NULL;
  size_t len = 0;
  int rc = run_plugin(cfg, &out, &len, err);
  if (rc) return rc;
  const char *prog = cfg->exec_argv[0];
  json_error_t je;
  json_t *cred = json_loadb(out, len, 0, &je);
  memset(out, 0, len);
  free(out);
  const json_t *status = json_object_get(cred, "status");
  const char *kind = json_string_value(json_object_get(cred, "kind"));
  if (!json_is_object(status) || !kind || strcmp(kind, "ExecCredential")) {
    json_decref(cred);
    return altar_error_set(err, ALTAR_ECONFIG, "exec credential %s: output is not an ExecCredential with a status%s%s",
                           prog, cred ? "" : ": ", cred ? "" : je.text);
  }
  const char *token = json_string_value(json_object_get(status, "token"));
  const char *cert = json_string_value(json_object_get(status, "clientCertificateData"));
  const char *key = json_string_value(json_object_get(status, "clientKeyData"));
  const char *exp = json_string_value(json_object_get(status, "expirationTimestamp"));
  double expiry = 0;
  if (!token && !(cert && key))
    rc = altar_error_set(err, ALTAR_ECONFIG,
                         "exec credential %s: status has neither a token nor clientCertificateData with clientKeyData",
                         prog);
  else if (exp && altar__k8s_parse_time(exp, &expiry))
    rc = altar_error_set(err, ALTAR_ECONFIG, "exec credential %s: status.expirationTimestamp '%s' is not RFC 3339",
                         prog, exp);
  if (!rc && token) {
    char *t = strdup(token);
    if (!t) rc = ALTAR_ENOMEM;
    else {
      if (cfg->token) memset(cfg->token, 0, strlen(cfg->token));
      free(cfg->token);
      cfg->token = t;
    }
  }
  if (!rc && cert && key &&
      (take_pem(cert, &cfg->client_cert_pem, &cfg->client_cert_len) ||
       take_pem(key, &cfg->client_key_pem, &cfg->client_key_len)))
    rc = ALTAR_ENOMEM;
  if (rc == ALTAR_ENOMEM) altar_error_set(err, rc, "exec credential %s: out of memory", prog);
  if (!rc) cfg->exec_expiry = expiry;
  json_decref(cred);
  return rc;
}

void altar__k8s_exec_clear(altar_k8s_http_config_t *cfg) {
  for (size_t i = 0; cfg->exec_argv && cfg->exec_argv[i]; i++) free(cfg->exec_argv[i]);
  for (size_t i = 0; cfg->exec_env && cfg->exec_env[i]; i++) {
    memset(cfg->exec_env[i], 0, strlen(cfg->exec_env[i]));
    free(cfg->exec_env[i]);
  }
  free(cfg->exec_argv);
  free(cfg->exec_env);
  free(cfg->exec_api_version);
  cfg->exec_argv = NULL;
  cfg->exec_env = NULL;
  cfg->exec_api_version = NULL;
  cfg->exec_expiry = 0;
}
