/* Where the real runtime finds the API server and its credentials: a
 * kubeconfig (YAML, read with libyaml) or the in-cluster service account. */
#include "altar/file_read.h"
#include "k8s_int.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#define MAX_KUBECONFIG (4u << 20)
#define MAX_PEM (1u << 20)
#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

void altar__k8s_http_config_init(altar_k8s_http_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->timeout_ms = 30000;
  cfg->connect_timeout_ms = 10000;
  cfg->max_retries = 5;
  cfg->backoff_initial_ms = 200;
  cfg->backoff_max_ms = 5000;
  cfg->list_limit = 500;
}

static void wipe_free(char *s, size_t len) {
  if (!s) return;
  memset(s, 0, len ? len : strlen(s));
  free(s);
}

void altar__k8s_http_config_clear(altar_k8s_http_config_t *cfg) {
  free(cfg->server);
  wipe_free(cfg->token, 0);
  free(cfg->token_file);
  free(cfg->ca_pem);
  free(cfg->client_cert_pem);
  wipe_free(cfg->client_key_pem, cfg->client_key_len);
  free(cfg->namespace_);
  altar__k8s_exec_clear(cfg);
  altar__k8s_http_config_init(cfg);
}

/* A whole small file named by config field `field`; NULL with err. Caller frees. */
static char *read_small(const char *path, size_t max, size_t *plen, const char *field, altar_error_t *err) {
  char what[160];
  snprintf(what, sizeof what, "%s %s", field, path);
  altar_error_t rerr = {0};
  char *buf = altar_file_read(path, what, max, plen, &rerr);
  if (!buf) altar_error_set(err, ALTAR_ECONFIG, "%s", rerr.msg);
  return buf;
}

/* base64 (kubeconfig *-data) → bytes; NULL with err when malformed. */
static char *b64_decode(const char *in, size_t *plen, const char *field, altar_error_t *err) {
  size_t n = strlen(in);
  if (n > 4 * (size_t)MAX_PEM / 3 + 64) {
    altar_error_set(err, ALTAR_ECONFIG, "%s: larger than %u bytes", field, MAX_PEM);
    return NULL;
  }
  unsigned char *out = malloc(n / 4 * 3 + 8);
  EVP_ENCODE_CTX *ctx = EVP_ENCODE_CTX_new();
  int l1 = 0, l2 = 0;
  if (!out || !ctx) {
    free(out);
    EVP_ENCODE_CTX_free(ctx);
    altar_error_set(err, ALTAR_ENOMEM, "%s: out of memory", field);
    return NULL;
  }
  EVP_DecodeInit(ctx);
  int ok = EVP_DecodeUpdate(ctx, out, &l1, (const unsigned char *)in, (int)n) >= 0 &&
           EVP_DecodeFinal(ctx, out + l1, &l2) == 1;
  EVP_ENCODE_CTX_free(ctx);
  if (!ok || l1 + l2 == 0) {
    free(out);
    altar_error_set(err, ALTAR_ECONFIG, "%s: not valid base64", field);
    return NULL;
  }
  out[l1 + l2] = '\0';
  *plen = (size_t)(l1 + l2);
  return (char *)out;
}

/* ---- a libyaml document walk ---- */

typedef struct kc {
  yaml_document_t doc;
  const char *path;
  char dir[4096]; /* the kubeconfig's directory, for relative paths */
  altar_error_t *err;
} kc_t;

static const char *scalar(yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static yaml_node_t *map_get(kc_t *k, yaml_node_t *map, const char *key) {
  if (!map || map->type != YAML_MAPPING_NODE) return NULL;
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    const char *ks = scalar(yaml_document_get_node(&k->doc, p->key));
    if (ks && !strcmp(ks, key)) return yaml_document_get_node(&k->doc, p->value);
  }
  return NULL;
}

static const char *map_str(kc_t *k, yaml_node_t *map, const char *key) { return scalar(map_get(k, map, key)); }

/* In the list `section` (clusters, users, contexts), the `inner` mapping of
 * the entry called name. */
static yaml_node_t *named(kc_t *k, const char *section, const char *inner, const char *name) {
  yaml_node_t *seq = map_get(k, yaml_document_get_root_node(&k->doc), section);
  if (!seq || seq->type != YAML_SEQUENCE_NODE) return NULL;
  for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top; it++) {
    yaml_node_t *e = yaml_document_get_node(&k->doc, *it);
    const char *n = map_str(k, e, "name");
    if (n && !strcmp(n, name)) return map_get(k, e, inner);
  }
  return NULL;
}

/* A file a kubeconfig names, relative to the kubeconfig's own directory. */
static char *read_ref(kc_t *k, const char *file, size_t *plen, const char *field) {
  char path[8192];
  if (file[0] == '/') snprintf(path, sizeof path, "%s", file);
  else snprintf(path, sizeof path, "%s/%s", k->dir, file);
  return read_small(path, MAX_PEM, plen, field, k->err);
}

/* PEM from "<key>-data" (base64) or "<key>" (a file path); *pout NULL when neither. */
static int pem_field(kc_t *k, yaml_node_t *map, const char *key, const char *where, char **pout, size_t *plen) {
  char field[256], dkey[128];
  snprintf(dkey, sizeof dkey, "%s-data", key);
  const char *data = map_str(k, map, dkey), *file = map_str(k, map, key);
  *pout = NULL;
  *plen = 0;
  if (data) {
    snprintf(field, sizeof field, "%s: %s.%s", k->path, where, dkey);
    *pout = b64_decode(data, plen, field, k->err);
  } else if (file) {
    snprintf(field, sizeof field, "%s: %s.%s", k->path, where, key);
    *pout = read_ref(k, file, plen, field);
  } else {
    return ALTAR_OK;
  }
  return *pout ? ALTAR_OK : k->err ? k->err->code : ALTAR_ECONFIG;
}

static int set_str(char **dst, const char *s) {
  free(*dst);
  *dst = s ? strdup(s) : NULL;
  return s && !*dst ? ALTAR_ENOMEM : ALTAR_OK;
}

#define MAX_EXEC_ARGS 256

/* users[].user.exec: command, args, env [{name, value}], apiVersion. The
 * plugin runs once here, so a broken one is reported at start-up. */
static int kc_exec(kc_t *k, yaml_node_t *exec, const char *where, altar_k8s_http_config_t *cfg) {
  altar_error_t *err = k->err;
  const char *command = map_str(k, exec, "command");
  if (!command || !*command) return altar_error_set(err, ALTAR_ECONFIG, "%s: %s.exec.command: missing", k->path, where);
  const char *api = map_str(k, exec, "apiVersion");
  if (!api || (strcmp(api, "client.authentication.k8s.io/v1") && strcmp(api, "client.authentication.k8s.io/v1beta1")))
    return altar_error_set(err, ALTAR_ECONFIG,
                           "%s: %s.exec.apiVersion: want client.authentication.k8s.io/v1 or v1beta1 (got '%s')",
                           k->path, where, api ? api : "");
  yaml_node_t *args = map_get(k, exec, "args"), *env = map_get(k, exec, "env");
  size_t nargs = args && args->type == YAML_SEQUENCE_NODE
                     ? (size_t)(args->data.sequence.items.top - args->data.sequence.items.start)
                     : 0;
  size_t nenv = env && env->type == YAML_SEQUENCE_NODE
                    ? (size_t)(env->data.sequence.items.top - env->data.sequence.items.start)
                    : 0;
  if (nargs > MAX_EXEC_ARGS || nenv > MAX_EXEC_ARGS)
    return altar_error_set(err, ALTAR_ECONFIG, "%s: %s.exec: more than %d args or env entries", k->path, where,
                           MAX_EXEC_ARGS);
  altar__k8s_exec_clear(cfg);
  cfg->exec_argv = calloc(nargs + 2, sizeof *cfg->exec_argv);
  cfg->exec_env = calloc(nenv + 1, sizeof *cfg->exec_env);
  cfg->exec_api_version = strdup(api);
  if (!cfg->exec_argv || !cfg->exec_env || !cfg->exec_api_version)
    return altar_error_set(err, ALTAR_ENOMEM, "kubeconfig: out of memory");
  /* A command with a "/" is a path, taken relative to the kubeconfig. */
  char path[8192];
  if (strchr(command, '/') && command[0] != '/') snprintf(path, sizeof path, "%s/%s", k->dir, command);
  else snprintf(path, sizeof path, "%s", command);
  if (!(cfg->exec_argv[0] = strdup(path))) return altar_error_set(err, ALTAR_ENOMEM, "kubeconfig: out of memory");
  for (size_t i = 0; i < nargs; i++) {
    const char *a = scalar(yaml_document_get_node(&k->doc, args->data.sequence.items.start[i]));
    if (!a) return altar_error_set(err, ALTAR_ECONFIG, "%s: %s.exec.args[%zu]: want a string", k->path, where, i);
    if (!(cfg->exec_argv[i + 1] = strdup(a))) return altar_error_set(err, ALTAR_ENOMEM, "kubeconfig: out of memory");
  }
  for (size_t i = 0; i < nenv; i++) {
    yaml_node_t *e = yaml_document_get_node(&k->doc, env->data.sequence.items.start[i]);
    const char *name = map_str(k, e, "name"), *value = map_str(k, e, "value");
    if (!name || !*name || strchr(name, '=') || !value)
      return altar_error_set(err, ALTAR_ECONFIG, "%s: %s.exec.env[%zu]: want {name, value}", k->path, where, i);
    size_t len = strlen(name) + strlen(value) + 2;
    if (!(cfg->exec_env[i] = malloc(len))) return altar_error_set(err, ALTAR_ENOMEM, "kubeconfig: out of memory");
    snprintf(cfg->exec_env[i], len, "%s=%s", name, value);
  }
  int rc = altar__k8s_exec_refresh(cfg, true, err);
  if (rc) altar_error_prefix(err, "%s: %s.exec", k->path, where);
  return rc;
}

static int kc_apply(kc_t *k, const char *context, altar_k8s_http_config_t *cfg) {
  altar_error_t *err = k->err;
  yaml_node_t *root = yaml_document_get_root_node(&k->doc);
  if (!root || root->type != YAML_MAPPING_NODE)
    return altar_error_set(err, ALTAR_ECONFIG, "%s: not a kubeconfig (expected a mapping)", k->path);
  const char *ctx_name = context ? context : map_str(k, root, "current-context");
  if (!ctx_name || !*ctx_name)
    return altar_error_set(err, ALTAR_ECONFIG, "%s: current-context: not set (name a context)", k->path);
  yaml_node_t *ctx = named(k, "contexts", "context", ctx_name);
  if (!ctx) return altar_error_set(err, ALTAR_ECONFIG, "%s: contexts: no context named '%s'", k->path, ctx_name);
  const char *cluster_name = map_str(k, ctx, "cluster"), *user_name = map_str(k, ctx, "user");
  if (!cluster_name)
    return altar_error_set(err, ALTAR_ECONFIG, "%s: contexts[%s].context.cluster: missing", k->path, ctx_name);
  yaml_node_t *cluster = named(k, "clusters", "cluster", cluster_name);
  if (!cluster)
    return altar_error_set(err, ALTAR_ECONFIG, "%s: clusters: no cluster named '%s'", k->path, cluster_name);
  const char *server = map_str(k, cluster, "server");
  if (!server || !*server)
    return altar_error_set(err, ALTAR_ECONFIG, "%s: clusters[%s].cluster.server: missing", k->path, cluster_name);
  if (set_str(&cfg->server, server) || set_str(&cfg->namespace_, map_str(k, ctx, "namespace")))
    return altar_error_set(err, ALTAR_ENOMEM, "kubeconfig: out of memory");
  const char *insecure = map_str(k, cluster, "insecure-skip-tls-verify");
  cfg->insecure_skip_tls_verify = insecure && !strcmp(insecure, "true");
  char where[300];
  snprintf(where, sizeof where, "clusters[%s].cluster", cluster_name);
  int rc = pem_field(k, cluster, "certificate-authority", where, &cfg->ca_pem, &cfg->ca_pem_len);
  if (rc) return rc;
  if (!user_name) return ALTAR_OK; /* anonymous */
  yaml_node_t *user = named(k, "users", "user", user_name);
  if (!user) return altar_error_set(err, ALTAR_ECONFIG, "%s: users: no user named '%s'", k->path, user_name);
  snprintf(where, sizeof where, "users[%s].user", user_name);
  if (map_get(k, user, "auth-provider"))
    return altar_error_set(err, ALTAR_ENOTSUP,
                           "%s: %s.auth-provider: not supported; use an exec plugin, a token, a tokenFile or a "
                           "client certificate",
                           k->path, where);
  yaml_node_t *exec = map_get(k, user, "exec");
  if (exec) return kc_exec(k, exec, where, cfg);
  if (set_str(&cfg->token, map_str(k, user, "token")))
    return altar_error_set(err, ALTAR_ENOMEM, "kubeconfig: out of memory");
  const char *tf = map_str(k, user, "tokenFile");
  if (tf) {
    char path[8192];
    if (tf[0] == '/') snprintf(path, sizeof path, "%s", tf);
    else snprintf(path, sizeof path, "%s/%s", k->dir, tf);
    if (set_str(&cfg->token_file, path)) return altar_error_set(err, ALTAR_ENOMEM, "kubeconfig: out of memory");
  }
  rc = pem_field(k, user, "client-certificate", where, &cfg->client_cert_pem, &cfg->client_cert_len);
  if (!rc) rc = pem_field(k, user, "client-key", where, &cfg->client_key_pem, &cfg->client_key_len);
  if (!rc && (cfg->client_cert_pem == NULL) != (cfg->client_key_pem == NULL))
    rc = altar_error_set(err, ALTAR_ECONFIG, "%s: %s: client-certificate and client-key go together", k->path, where);
  if (!rc && map_str(k, user, "username"))
    rc = altar_error_set(err, ALTAR_ENOTSUP, "%s: %s.username: basic auth is not supported", k->path, where);
  return rc;
}

int altar__k8s_kubeconfig_load(const char *path, const char *context, altar_k8s_http_config_t *cfg,
                               altar_error_t *err) {
  char chosen[4096];
  if (!path) {
    const char *env = getenv("KUBECONFIG");
    if (env && *env) {
      /* A list like kubectl's: the first entry that exists (no merging). */
      const char *p = env;
      chosen[0] = '\0';
      while (*p) {
        size_t n = strcspn(p, ":");
        if (n && n < sizeof chosen) {
          memcpy(chosen, p, n);
          chosen[n] = '\0';
          if (access(chosen, R_OK) == 0) break;
          chosen[0] = '\0';
        }
        p += n + (p[n] == ':');
      }
      if (!chosen[0]) return altar_error_set(err, ALTAR_ECONFIG, "KUBECONFIG: no readable file in '%s'", env);
    } else {
      const char *home = getenv("HOME");
      if (!home) return altar_error_set(err, ALTAR_ECONFIG, "kubeconfig: neither $KUBECONFIG nor $HOME is set");
      snprintf(chosen, sizeof chosen, "%s/.kube/config", home);
    }
    path = chosen;
  }
  size_t len = 0;
  char *text = read_small(path, MAX_KUBECONFIG, &len, "kubeconfig", err);
  if (!text) return ALTAR_ECONFIG;
  kc_t k = {.path = path, .err = err};
  snprintf(k.dir, sizeof k.dir, "%s", path);
  char *slash = strrchr(k.dir, '/');
  if (slash) *slash = '\0';
  else snprintf(k.dir, sizeof k.dir, ".");
  yaml_parser_t parser;
  yaml_parser_initialize(&parser);
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
  int rc;
  if (!yaml_parser_load(&parser, &k.doc)) {
    rc = altar_error_set(err, ALTAR_ECONFIG, "%s:%zu: %s", path, parser.problem_mark.line + 1,
                         parser.problem ? parser.problem : "invalid YAML");
  } else {
    rc = kc_apply(&k, context, cfg);
    yaml_document_delete(&k.doc);
  }
  yaml_parser_delete(&parser);
  free(text);
  return rc;
}

int altar__k8s_in_cluster_load(const char *sa_dir, altar_k8s_http_config_t *cfg, altar_error_t *err) {
  const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host)
    return altar_error_set(err, ALTAR_ECONFIG, "in-cluster: KUBERNETES_SERVICE_HOST is not set (not in a pod?)");
  if (!port || !*port) port = "443";
  if (strlen(host) > 253 || strlen(port) > 5 || strspn(port, "0123456789") != strlen(port))
    return altar_error_set(err, ALTAR_ECONFIG, "in-cluster: KUBERNETES_SERVICE_HOST/PORT malformed");
  if (!sa_dir) sa_dir = SA_DIR;
  char server[300], path[4200];
  snprintf(server, sizeof server, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port);
  if (set_str(&cfg->server, server)) return altar_error_set(err, ALTAR_ENOMEM, "in-cluster: out of memory");
  snprintf(path, sizeof path, "%s/token", sa_dir);
  if (access(path, R_OK) != 0)
    return altar_error_set(err, ALTAR_ECONFIG, "in-cluster: %s: %s (is a service account mounted?)", path,
                           strerror(errno));
  /* Read on every request: the kubelet rotates projected tokens. */
  if (set_str(&cfg->token_file, path)) return altar_error_set(err, ALTAR_ENOMEM, "in-cluster: out of memory");
  snprintf(path, sizeof path, "%s/ca.crt", sa_dir);
  free(cfg->ca_pem);
  cfg->ca_pem = read_small(path, MAX_PEM, &cfg->ca_pem_len, "in-cluster ca.crt", err);
  if (!cfg->ca_pem) return ALTAR_ECONFIG;
  snprintf(path, sizeof path, "%s/namespace", sa_dir);
  char *ns = read_small(path, 253, NULL, "in-cluster namespace", NULL);
  if (ns) {
    ns[strcspn(ns, " \r\n")] = '\0';
    free(cfg->namespace_);
    cfg->namespace_ = ns;
  }
  return ALTAR_OK;
}

int altar__k8s_http_config_auto(altar_k8s_http_config_t *cfg, altar_error_t *err) {
  const char *host = getenv("KUBERNETES_SERVICE_HOST");
  if (host && *host) return altar__k8s_in_cluster_load(NULL, cfg, err);
  return altar__k8s_kubeconfig_load(NULL, NULL, cfg, err);
}
