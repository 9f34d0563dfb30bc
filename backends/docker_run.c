/* docker backend: submit (`docker run -d`) and cancel (`docker rm --force`).
 * Every docker call is an argv; nothing passes through a shell. A submit
 * first looks for a running container labelled with the spec's task key
 * and adopts it (a dead worker's run of the same task, on this engine),
 * under a lock file in the data root so that two workers on one host do
 * not both start it. */
#include "backends/docker_int.h"

#include "altar/codec.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* Fixed arguments besides labels and the command: run -d, -v x2, --user x2,
 * --memory x2, --memory-swap x2, the internal labels x8, image, NULL. */
#define RUN_FIXED_ARGS 28

/* Serialises adopt-or-run between the processes sharing this data root;
 * -1 (no lock) when it cannot be opened: adoption still works, the window
 * between the lookup and the run is only not closed. */
static int lock_keys(const altar_docker_t *dk) {
  size_t n = strlen(dk->data_root) + sizeof "/.altar-docker.lock";
  char *path = malloc(n);
  if (!path) return -1;
  snprintf(path, n, "%s/.altar-docker.lock", dk->data_root);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  free(path);
  while (fd >= 0 && flock(fd, LOCK_EX) < 0) {
    if (errno != EINTR) {
      close(fd);
      return -1;
    }
  }
  return fd;
}

/* The id of a running container labelled with key and our data root, into
 * id (65 bytes), or false (none, or docker could not tell: then a new one
 * is started). */
static bool find_running(altar_docker_t *dk, const char *key, char *id) {
  char filter[sizeof ALTAR_DOCKER_LABEL_TASK_KEY + ALTAR_TASK_KEY_LEN + 16];
  snprintf(filter, sizeof filter, "label=%s=%s", ALTAR_DOCKER_LABEL_TASK_KEY, key);
  size_t rl = strlen(dk->data_root) + sizeof ALTAR_DOCKER_LABEL_DATA_ROOT + 16;
  char *root = malloc(rl);
  if (!root) return false;
  snprintf(root, rl, "label=%s=%s", ALTAR_DOCKER_LABEL_DATA_ROOT, dk->data_root);
  const char *args[] = {"ps",       "-q", "--no-trunc", "--filter",       filter,
                        "--filter", root, "--filter",   "status=running", NULL};
  altar_cmd_result_t res = {0};
  altar_error_t e = {0};
  bool found = false;
  if (altar__docker_cli(dk, args, &res, &e) == 0 && res.exit_code == 0 && res.out) {
    char line[300];
    snprintf(line, sizeof line, "%.*s", (int)strcspn(res.out, "\n"), res.out);
    if (altar__docker_valid_id(line)) {
      snprintf(id, 65, "%s", line);
      found = true;
    }
  }
  altar_cmd_result_clear(&res);
  free(root);
  return found;
}

static bool is_daemon_down(const char *text) {
  return text && (strstr(text, "Cannot connect to the Docker daemon") || strstr(text, "Is the docker daemon running"));
}

static char *join_kv(const char *k, const char *v) {
  size_t kl = strlen(k), vl = strlen(v);
  char *s = malloc(kl + vl + 2);
  if (!s) return NULL;
  memcpy(s, k, kl);
  s[kl] = '=';
  memcpy(s + kl + 1, v, vl + 1);
  return s;
}

static int check_labels(const altar_spec_t *spec, altar_error_t *err) {
  for (size_t i = 0; i < spec->labels.n; i++) {
    const char *k = spec->labels.keys[i];
    /* docker splits "--label k=v" at the first '=': a key holding one would
     * come back as a different label. */
    if (!k[0] || strchr(k, '=') || strchr(k, '\n'))
      return altar_error_set(err, ALTAR_EINVAL,
                             "labels['%.64s']: a docker label key must be non-empty and hold no "
                             "'=' or newline",
                             k);
    if (!strncmp(k, "altar.", 6))
      return altar_error_set(err, ALTAR_EINVAL,
                             "labels['%.64s']: keys starting with 'altar.' are reserved for the "
                             "backend's own container labels",
                             k);
  }
  return 0;
}

int altar__docker_submit(altar_backend_t *be, const altar_spec_t *spec, altar_handle_t *phandle, altar_error_t *err) {
  altar_docker_t *dk = altar__docker(be);
  int rc = altar_spec_validate(spec, err);
  if (rc < 0) return rc;
  if ((rc = altar_backend_check_resources(be, &spec->resources, err)) < 0) return rc;
  if (spec->image[0] == '-')
    return altar_error_set(err, ALTAR_EINVAL, "image: '%.64s' would be read as a docker option", spec->image);
  if ((rc = check_labels(spec, err)) < 0) return rc;
  char key[ALTAR_TASK_KEY_LEN + 1];
  if ((rc = altar_spec_identity(spec, key, err)) < 0) return rc;
  int lock = lock_keys(dk);
  char adopted[65];
  if (find_running(dk, key, adopted)) {
    rc = altar_handle_init_for_spec(phandle, altar_backend_docker_ops.name, adopted, spec);
    if (lock >= 0) close(lock);
    return rc < 0 ? altar_error_set(err, rc, "submit: handle") : 0;
  }

  size_t cap = RUN_FIXED_ARGS + 2 * spec->labels.n + spec->n_command;
  const char **args = calloc(cap, sizeof *args);
  /* Strings built here, freed at the end. */
  char **owned = calloc(spec->labels.n + 8, sizeof *owned);
  size_t na = 0, no = 0;
  altar_cmd_result_t res = {0};
  if (!args || !owned) {
    rc = altar_error_set(err, ALTAR_ENOMEM, "submit: argv");
    goto out;
  }
  char timeout_s[32], mem[32];
  args[na++] = "run";
  args[na++] = "-d";
  for (size_t i = 0; i < spec->labels.n; i++) {
    char *kv = join_kv(spec->labels.keys[i], spec->labels.vals[i]);
    if (!kv) goto nomem;
    owned[no++] = kv;
    args[na++] = "--label";
    args[na++] = kv;
  }
  {
    char *kv = join_kv(ALTAR_DOCKER_LABEL_KIND, spec->kind);
    if (!kv) goto nomem;
    owned[no++] = kv;
    args[na++] = "--label";
    args[na++] = kv;
  }
  {
    char *kv = join_kv(ALTAR_DOCKER_LABEL_TASK_KEY, key);
    if (!kv) goto nomem;
    owned[no++] = kv;
    args[na++] = "--label";
    args[na++] = kv;
    if (!(kv = join_kv(ALTAR_DOCKER_LABEL_DATA_ROOT, dk->data_root))) goto nomem;
    owned[no++] = kv;
    args[na++] = "--label";
    args[na++] = kv;
  }
  if (spec->timeout_s.set) {
    /* Kept on the container so any later process can enforce the deadline. */
    snprintf(timeout_s, sizeof timeout_s, "%s=%" PRId64, ALTAR_DOCKER_LABEL_TIMEOUT, spec->timeout_s.v);
    args[na++] = "--label";
    args[na++] = timeout_s;
  }
  {
    char *vol = malloc(strlen(dk->data_root) + sizeof(":" ALTAR_DOCKER_MOUNT_ROOT));
    if (!vol) goto nomem;
    owned[no++] = vol;
    memcpy(vol, dk->data_root, strlen(dk->data_root));
    memcpy(vol + strlen(dk->data_root), ":" ALTAR_DOCKER_MOUNT_ROOT, sizeof(":" ALTAR_DOCKER_MOUNT_ROOT));
    args[na++] = "-v";
    args[na++] = vol;
  }
  if (dk->user) {
    args[na++] = "--user";
    args[na++] = dk->user;
  }
  if (spec->resources.memory_mb.set) {
    /* Swap capped at the same value, so the limit is a real limit and an
     * overrun is an OOM kill rather than swapping. */
    snprintf(mem, sizeof mem, "%" PRId64 "m", spec->resources.memory_mb.v);
    args[na++] = "--memory";
    args[na++] = mem;
    args[na++] = "--memory-swap";
    args[na++] = mem;
  }
  args[na++] = spec->image;
  for (size_t i = 0; i < spec->n_command; i++) args[na++] = spec->command[i];
  args[na] = NULL;

  rc = altar__docker_cli(dk, args, &res, err);
  if (rc < 0) {
    altar_error_prefix(err, "submit");
    goto out;
  }
  char line[300];
  if (res.exit_code != 0) {
    altar__docker_last_line(res.err, line, sizeof line);
    rc = altar_error_set(err, ALTAR_EBACKEND, "submit: docker run exited %d: %s", res.exit_code,
                         line[0] ? line : "(no message)");
    if (err && is_daemon_down(res.err)) err->retriable = true;
    goto out;
  }
  altar__docker_last_line(res.out, line, sizeof line);
  if (!altar__docker_valid_id(line)) {
    rc = altar_error_set(err, ALTAR_EBACKEND, "submit: docker run printed '%.80s', not a container id", line);
    goto out;
  }
  rc = altar_handle_init_for_spec(phandle, altar_backend_docker_ops.name, line, spec);
  if (rc < 0) rc = altar_error_set(err, rc, "submit: handle");
  goto out;

nomem:
  rc = altar_error_set(err, ALTAR_ENOMEM, "submit: argv");
out:
  if (lock >= 0) close(lock); /* closing drops the flock */
  altar_cmd_result_clear(&res);
  for (size_t i = 0; i < no; i++) free(owned[i]);
  free(owned);
  free(args);
  return rc;
}

int altar__docker_cancel(altar_backend_t *be, const altar_handle_t *handle, altar_error_t *err) {
  altar_docker_t *dk = altar__docker(be);
  /* Nothing that is not a container id reaches docker; such a handle names
   * no container, and a missing task counts as cancelled. */
  if (!handle || !altar__docker_valid_id(handle->external_id)) return 0;
  const char *args[] = {"rm", "--force", handle->external_id, NULL};
  altar_cmd_result_t res = {0};
  int rc = altar__docker_cli(dk, args, &res, err);
  if (rc < 0) {
    altar_error_prefix(err, "cancel %.12s", handle->external_id);
    altar_cmd_result_clear(&res);
    return rc;
  }
  if (res.exit_code != 0 && !strstr(res.err ? res.err : "", "No such container")) {
    char line[300];
    altar__docker_last_line(res.err, line, sizeof line);
    rc = altar_error_set(err, ALTAR_EBACKEND, "cancel %.12s: docker rm --force exited %d: %s", handle->external_id,
                         res.exit_code, line[0] ? line : "(no message)");
    if (err && is_daemon_down(res.err)) err->retriable = true;
  }
  altar_cmd_result_clear(&res);
  return rc;
}
