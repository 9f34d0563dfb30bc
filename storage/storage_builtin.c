/* The storage adapters this folder implements, registered under their URI
 * schemes (the plumbing they plug into lives in core/storage.c). */
#include "altar/plugin/storage.h"
#include "altar/registry.h"

#include <stdio.h>

int altar_storage_register_builtin(void) {
  altar_error_t err = {0};
  int rc = altar_registry_register(ALTAR_REGISTRY_STORAGE, "local", &altar_storage_local_ops, &err);
  if (!rc) rc = altar_registry_register(ALTAR_REGISTRY_STORAGE, "file", &altar_storage_local_ops, &err);
  if (!rc) rc = altar_registry_register(ALTAR_REGISTRY_STORAGE, "http", &altar_storage_http_ops, &err);
  if (!rc) rc = altar_registry_register(ALTAR_REGISTRY_STORAGE, "https", &altar_storage_http_ops, &err);
  if (!rc) rc = altar_registry_register(ALTAR_REGISTRY_STORAGE, "gs", &altar_storage_gcs_ops, &err);
  if (!rc) rc = altar_registry_register(ALTAR_REGISTRY_STORAGE, "gcs", &altar_storage_gcs_ops, &err);
  if (!rc) rc = altar_registry_register(ALTAR_REGISTRY_STORAGE, "s3", &altar_storage_s3_ops, &err);
  if (rc) fprintf(stderr, "altar: registering storage adapters: %s\n", err.msg);
  return rc;
}
