/* The one place that knows every built-in plug-in: backends, storage
 * adapters, transports. Each registration is one line. */
#include "cli/cli.h"

#include "altar/backend.h"
#include "altar/kubernetes.h"
#include "altar/modal.h"
#include "backends/docker.h"
#include "altar/transport_kafka.h"
#include "altar/storage.h"

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
