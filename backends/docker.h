/* altar — the `docker` backend (the contract's LocalDockerExecutionBackend,
 * registered as "local" with the alias "docker"): each task is a detached
 * container on the local Docker engine, driven through the docker CLI by an
 * injectable CommandRunner.
 *
 * Config keys (all optional):
 *   data_root          host directory bind-mounted at /mnt/volume (default ./var/data;
 *                      created if missing; no ':' or ',' in it)
 *   slots              free slots reported for the "normal" pool (default 4)
 *   user               docker --user value (default: the image's user)
 *   docker             the docker client program (default "docker")
 *   storage            Storage adapter for every transfer's uri (default: the
 *                      adapter for each uri's scheme: file, http, https, ...)
 *   command_timeout_s  limit on one docker CLI call (default 120)
 *   trust_records      "true"/"false": skip copying an input whose destination
 *                      holds a current verification record (default true) */
#ifndef ALTAR_BACKENDS_DOCKER_H
#define ALTAR_BACKENDS_DOCKER_H

#include "altar/plugin/backend.h"
#include "altar/command_runner.h"

/* The container-side root of the logical layout. */
#define ALTAR_DOCKER_MOUNT_ROOT "/mnt/volume"
/* Container labels the backend adds next to the spec's labels. */
#define ALTAR_DOCKER_LABEL_TIMEOUT "altar.timeout_s"
#define ALTAR_DOCKER_LABEL_KIND "altar.kind"
/* The spec's task key and the backend's data root: a submit adopts a
 * running container carrying both (the same task of the same fleet). */
#define ALTAR_DOCKER_LABEL_TASK_KEY "altar.task_key"
#define ALTAR_DOCKER_LABEL_DATA_ROOT "altar.data_root"

/* A docker backend that runs every docker CLI call through runner (borrowed:
 * it must outlive the backend; NULL = the real posix_spawn runner). NULL on
 * failure with err filled. Free with altar_backend_close. */
altar_backend_t *altar__docker_backend_open(const altar_strmap_t *cfg, const altar_command_runner_t *runner,
                                            altar_error_t *err);

#endif
