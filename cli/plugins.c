/* The one place that knows every built-in plug-in: backends, storage
 * adapters, transports. Each registration is one line. Third-party
 * plug-ins come after them, from ALTAR_PLUGIN_PATH and the config. */
#include "cli/cli.h"

#include "altar/plugin/backend.h"
#include "altar/modal.h"
#include "backends/docker.h"
#include "altar/plugin/transport_kafka.h"
#include "altar/plugin.h"
#include "altar/storage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void altar_cli_register_plugins(void) {
  altar_backend_register(&altar_backend_process);                 /* "process", the default */
  altar_backend_register(&altar_backend_docker);                  /* "local" */
  altar_backend_register_alias("docker", &altar_backend_docker);  /* its common name */
  altar_backend_register(&altar_backend_kubernetes);              /* "kubernetes" */
  altar_backend_register(&altar_backend_modal);                   /* "modal" */
  altar_transport_register(&altar_transport_kafka_ops);           /* "kafka" */
  altar_transport_register(&altar_transport_local_ops);           /* "local", the embedded log */
  altar_storage_register_builtin(); /* "local", "file", "http", "https", "gs", "gcs", "s3" */
}

int altar_cli_load_env_plugins(void) {
  altar_error_t err = {0};
  if (altar_plugin_load_path(getenv(ALTAR_PLUGIN_PATH_ENV), ALTAR_PLUGIN_PATH_ENV, &err) < 0) {
    fprintf(stderr, "altar: %s\n", err.msg);
    return -1;
  }
  return 0;
}

int altar_cli_config_load(const char *path, altar_config_t *cfg, altar_error_t *err) {
  int rc = altar_config_load(path, cfg, err);
  if (rc < 0 || !cfg->n_plugins) return rc;
  rc = altar_plugin_load_config(cfg, err);
  if (rc < 0) return rc;
  /* Read once more with the plug-ins registered, so keys under transport:
   * are checked against a plug-in transport's own keys too (a typo must
   * not fall back to a default). Loading the same files again is a no-op. */
  char *file = strdup(cfg->path);
  altar_config_clear(cfg);
  if (!file) return altar_error_set(err, ALTAR_ENOMEM, "out of memory");
  rc = altar_config_load(file, cfg, err);
  free(file);
  return rc;
}
