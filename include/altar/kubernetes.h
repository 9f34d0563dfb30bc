/* altar — the `kubernetes` execution backend: each task a batch/v1 Job on
 * the cluster of the configured kubeconfig (or the pod's service account).
 * Its settings are the backend's config keys (README, "Kubernetes"); its
 * runtime and manifest internals are not part of the API. */
#ifndef ALTAR_KUBERNETES_H
#define ALTAR_KUBERNETES_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/backend.h"

/* Registered by name "kubernetes" (altar_backend_register). */
extern const altar_backend_ops_t altar_backend_kubernetes;

ALTAR_API_END

#endif
