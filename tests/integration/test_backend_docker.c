/* The docker backend against the real Docker engine: the shared contract
 * suite plus what only a real engine shows (labels and the mount on the
 * container, a deadline enforced by a backend object that did not submit the
 * task, a whole staged run with a verified input and a collected output).
 * Needs `scripts/services/dockerd.sh start` (which also builds the image).
 * A missing engine or image is a FAILURE, never a skip. */
#include "altar/backend.h"
#include "altar/command_runner.h"
#include "altar/digest.h"
#include "altar/storage.h"
#include "backend_contract.h"
#include "backends/docker.h"
#include "testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *image(void) {
  const char *e = getenv("ALTAR_DOCKER_TEST_IMAGE");
  return e && e[0] ? e : "altar-test/busybox:1";
}

/* Runs docker with args; returns its exit code (-1 if it could not run) and
 * optionally its stdout (caller frees). */
static int docker(const char *const *args, char **pout) {
  const char *argv[32];
  size_t n = 0;
  argv[n++] = "docker";
  for (size_t i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
  argv[n] = NULL;
  altar_cmd_opts_t opts = {.timeout_s = 120};
  altar_cmd_result_t res;
  int rc = altar_command_run(NULL, argv, &opts, &res, NULL);
  int code = rc < 0 ? -1 : res.exit_code;
  if (pout) {
    *pout = res.out;
    res.out = NULL;
  }
  altar_cmd_result_clear(&res);
  return code;
}

/* Removes every container that mounts data_root (what one test started). */
static void remove_containers_of(const char *data_root) {
  char filter[1200];
  snprintf(filter, sizeof filter, "volume=%s", data_root);
  char *out = NULL;
  const char *ps[] = {"ps", "-aq", "--no-trunc", "--filter", filter, NULL};
  if (docker(ps, &out) != 0 || !out) {
    free(out);
    return;
  }
  char *save = NULL;
  for (char *id = strtok_r(out, "\n", &save); id; id = strtok_r(NULL, "\n", &save)) {
    const char *rm[] = {"rm", "--force", id, NULL};
    docker(rm, NULL);
  }
  free(out);
}

static altar_backend_t *new_backend(const char *data_root, altar_error_t *err) {
  altar_storage_register_builtin();
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "data_root", data_root);
  altar_strmap_set(&cfg, "slots", "2");
  altar_backend_t *be = altar_backend_open(&altar_backend_docker_ops, &cfg, err);
  altar_strmap_clear(&cfg);
  return be;
}

/* ---- contract fixture ------------------------------------------------------- */

static altar_backend_t *fx_make(void *ctx, const char *data_root, altar_error_t *err) {
  (void)ctx;
  return new_backend(data_root, err);
}

static int set_cmd(altar_spec_t *spec, const char *const *words) {
  for (size_t i = 0; i < spec->n_command; i++) free(spec->command[i]);
  free(spec->command);
  spec->command = NULL;
  spec->n_command = 0;
  for (size_t i = 0; words[i]; i++) {
    int rc = altar_spec_add_arg(spec, words[i]);
    if (rc) return rc;
  }
  return 0;
}

static int fx_set_exit(void *ctx, altar_spec_t *spec, int code) {
  (void)ctx;
  char script[32];
  snprintf(script, sizeof script, "exit %d", code);
  const char *w[] = {"sh", "-c", script, NULL};
  return set_cmd(spec, w);
}

static int fx_set_sleep(void *ctx, altar_spec_t *spec, int seconds) {
  (void)ctx;
  char s[16];
  snprintf(s, sizeof s, "%d", seconds);
  const char *w[] = {"sleep", s, NULL};
  return set_cmd(spec, w);
}

static int fx_set_oom(void *ctx, altar_spec_t *spec) {
  (void)ctx;
  /* dd allocates its block buffer: 64 MiB in a 32 MiB cgroup (swap capped
   * too) is an OOM kill. */
  spec->resources.memory_mb = (altar_opt_i64_t){true, 32};
  const char *w[] = {"dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=1", NULL};
  return set_cmd(spec, w);
}

static int fx_set_read(void *ctx, altar_spec_t *spec, const char *physical) {
  (void)ctx;
  const char *w[] = {"cat", physical, NULL};
  return set_cmd(spec, w);
}

static int fx_vanish(void *ctx, altar_backend_t *be, const altar_handle_t *h) {
  (void)ctx;
  (void)be;
  const char *rm[] = {"rm", "--force", h->external_id, NULL};
  return docker(rm, NULL) == 0 ? 0 : -1;
}

static void fx_cleanup(void *ctx, const char *data_root) {
  (void)ctx;
  remove_containers_of(data_root);
}

static altar_contract_fixture_t fixture = {
    .name = "docker-engine",
    .wait_s = 90,
    .make_backend = fx_make,
    .set_exit = fx_set_exit,
    .set_sleep = fx_set_sleep,
    .set_oom = fx_set_oom,
    .set_read_input = fx_set_read,
    .vanish = fx_vanish,
    .cleanup = fx_cleanup,
};

/* ---- engine-only checks ----------------------------------------------------- */

static char *root_dir;
static altar_backend_t *be;

static void each_setup(void) {
  root_dir = altar_test_tmpdir("docker-engine");
  altar_error_t berr = {0};
  be = new_backend(root_dir, &berr);
  if (!be) fprintf(stderr, "backend: %s\n", berr.msg);
}

static void each_teardown(void) {
  altar_backend_close(be);
  be = NULL;
  remove_containers_of(root_dir);
  altar_test_rmtree(root_dir);
  free(root_dir);
  root_dir = NULL;
}

static altar_spec_t *spec_of(const char *const *words) {
  altar_spec_t *s = altar_spec_new("score", image());
  CU_ASSERT_FATAL(s != NULL);
  CU_ASSERT_FATAL(set_cmd(s, words) == 0);
  return s;
}

static void test_container_carries_labels_and_mount(void) {
  CU_ASSERT_FATAL(be != NULL);
  const char *w[] = {"sh", "-c", "id -u > /mnt/volume/who", NULL};
  altar_spec_t *s = spec_of(w);
  altar_spec_set_label(s, "job_id", "j 1");
  altar_spec_set_label(s, "fold", "0");
  s->timeout_s = (altar_opt_i64_t){true, 600};
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &h, &err), 0);
  altar_status_t st;
  CU_ASSERT_EQUAL_FATAL(altar_contract_wait_terminal(be, &h, 90, &st), 0);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
  altar_status_clear(&st);
  /* Still inspectable after exit: no --rm. */
  char *out = NULL;
  const char *insp[] = {"inspect", "--type", "container", h.external_id, NULL};
  CU_ASSERT_EQUAL_FATAL(docker(insp, &out), 0);
  json_error_t je;
  json_t *j = json_loads(out ? out : "", 0, &je);
  free(out);
  CU_ASSERT_FATAL(json_is_array(j) && json_array_size(j) == 1);
  json_t *c = json_array_get(j, 0);
  json_t *labels = json_object_get(json_object_get(c, "Config"), "Labels");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(labels, "job_id")), "j 1");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(labels, "fold")), "0");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(labels, ALTAR_DOCKER_LABEL_TIMEOUT)), "600");
  CU_ASSERT_FALSE(json_is_true(json_object_get(json_object_get(c, "HostConfig"), "AutoRemove")));
  json_t *m = json_array_get(json_object_get(c, "Mounts"), 0);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(m, "Source")), root_dir);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(m, "Destination")), "/mnt/volume");
  json_decref(j);
  /* The command wrote through the mount. */
  char path[1024];
  snprintf(path, sizeof path, "%s/who", root_dir);
  char *who = altar_test_read_file(path, NULL);
  CU_ASSERT(who && !strcmp(who, "0\n"));
  free(who);
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, &err), 0);
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &h, &err), 0);
  altar_handle_clear(&h);
  altar_spec_free(s);
}

/* A worker that takes over a dead worker's job submits the same spec: on
 * the same engine and data root the running container is adopted, not
 * started twice; once it is gone, the spec runs anew. */
static void test_submit_adopts_running_container(void) {
  CU_ASSERT_FATAL(be != NULL);
  const char *w[] = {"sleep", "600", NULL};
  altar_spec_t *s = spec_of(w);
  altar_handle_t a, b, c;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &a, &err), 0);
  altar_backend_close(be); /* as a killed worker would */
  altar_error_t berr = {0};
  be = new_backend(root_dir, &berr);
  CU_ASSERT_FATAL(be != NULL);
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &b, &err), 0);
  CU_ASSERT_STRING_EQUAL(b.external_id, a.external_id);
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &a, &err), 0);
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &c, &err), 0);
  CU_ASSERT_STRING_NOT_EQUAL(c.external_id, a.external_id);
  CU_ASSERT_EQUAL(altar_backend_cancel(be, &c, &err), 0);
  altar_handle_clear(&a);
  altar_handle_clear(&b);
  altar_handle_clear(&c);
  altar_spec_free(s);
}

static void test_deadline_enforced_by_another_backend_object(void) {
  /* The submitting object goes away (as a restarted worker would); a new one
   * reads the deadline from the container's label and enforces it. */
  CU_ASSERT_FATAL(be != NULL);
  const char *w[] = {"sleep", "600", NULL};
  altar_spec_t *s = spec_of(w);
  s->timeout_s = (altar_opt_i64_t){true, 2};
  altar_handle_t h;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &h, &err), 0);
  altar_backend_close(be);
  altar_error_t berr = {0};
  be = new_backend(root_dir, &berr);
  CU_ASSERT_FATAL(be != NULL);
  altar_status_t st;
  CU_ASSERT_EQUAL_FATAL(altar_contract_wait_terminal(be, &h, 90, &st), 0);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_FAILED);
  CU_ASSERT(st.failure && !strcmp(st.failure->reason, "timeout"));
  altar_status_clear(&st);
  /* And it stays "timeout" on later polls, from the exited container. */
  CU_ASSERT_EQUAL(altar_backend_poll(be, &h, 1, &st, &err), 0);
  CU_ASSERT(st.failure && !strcmp(st.failure->reason, "timeout"));
  altar_status_clear(&st);
  altar_handle_clear(&h);
  altar_spec_free(s);
}

static void test_staged_run_collects_output(void) {
  CU_ASSERT_FATAL(be != NULL);
  char src[1024], uri[1100], out[1024], outuri[1100];
  snprintf(src, sizeof src, "%s/source.bin", root_dir);
  altar_test_write_file(src, "weights\n", 8);
  char digest[ALTAR_DIGEST_BUFSZ];
  CU_ASSERT_EQUAL_FATAL(altar_sha256_bytes("weights\n", 8, digest, NULL), 0);
  snprintf(uri, sizeof uri, "file://%s", src);
  snprintf(out, sizeof out, "%s/collected/sum.txt", root_dir);
  snprintf(outuri, sizeof outuri, "file://%s", out);
  const char *w[] = {"sh", "-c",
                     "mkdir -p /mnt/volume/jobs/j1 && sha256sum /mnt/volume/models/m/w.bin | cut -d' ' -f1 "
                     "> /mnt/volume/jobs/j1/sum.txt",
                     NULL};
  altar_spec_t *s = spec_of(w);
  altar_spec_add_input(s, uri, "models/m/w.bin", NULL, digest);
  altar_spec_add_output(s, outuri, "jobs/j1/sum.txt");
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_backend_stage_inputs(be, s->inputs, s->n_inputs, &err), 0);
  altar_handle_t h;
  CU_ASSERT_EQUAL_FATAL(altar_backend_submit(be, s, &h, &err), 0);
  altar_status_t st;
  CU_ASSERT_EQUAL_FATAL(altar_contract_wait_terminal(be, &h, 90, &st), 0);
  CU_ASSERT_EQUAL(st.state, ALTAR_STATE_SUCCEEDED);
  altar_status_clear(&st);
  if (altar_backend_collect_outputs(be, s->outputs, s->n_outputs, &err) != 0) fprintf(stderr, "collect: %s\n", err.msg);
  char *got = altar_test_read_file(out, NULL);
  CU_ASSERT_FATAL(got != NULL);
  CU_ASSERT_EQUAL(strlen(got), 65);
  CU_ASSERT_EQUAL(strncmp(got, digest + 7, 64), 0);
  free(got);
  altar_backend_cancel(be, &h, &err);
  altar_handle_clear(&h);
  altar_spec_free(s);
}

static void add(void) {
  fixture.image = image();
  altar_contract_add_suite(&fixture);
  CU_pSuite suite__ = CU_add_suite_with_setup_and_teardown("docker[engine]", NULL, NULL, each_setup, each_teardown);
  if (!suite__) return;
  ALTAR_TEST(test_container_carries_labels_and_mount);
  ALTAR_TEST(test_submit_adopts_running_container);
  ALTAR_TEST(test_deadline_enforced_by_another_backend_object);
  ALTAR_TEST(test_staged_run_collects_output);
}

int main(int argc, char **argv) {
  /* No engine or no image: fail loudly with the fix, never skip. */
  const char *info[] = {"info", "--format", "{{.ServerVersion}}", NULL};
  if (docker(info, NULL) != 0) {
    fprintf(stderr,
            "FAIL: no Docker engine answers `docker info`. Start one with "
            "`scripts/services/dockerd.sh start` (as root; it also builds %s).\n",
            image());
    return 1;
  }
  const char *img[] = {"image", "inspect", image(), NULL};
  if (docker(img, NULL) != 0) {
    fprintf(stderr, "FAIL: the test image %s is missing. Build it with `scripts/docker-test-image.sh`.\n", image());
    return 1;
  }
  return altar_test_main(argc, argv, add);
}
