/* The ExecutionBackend contract suite on a backend that a plug-in brings
 * (tests/install/test_plugin.sh). Usage:
 *
 *   altar_plugin_contract BACKEND [CONFIG]
 *
 * Loads plug-ins the way the altar binary does, with the same loader: the
 * files ALTAR_PLUGIN_PATH names, then CONFIG's `plugins:` list; then runs the
 * suite on BACKEND, created by name with data_root only. Like altar, this
 * program exports its public API (cmake/altar_exports.list), so the plug-in's
 * calls into altar reach this process's registries.
 *
 * The fixture knows the layout of examples/subprocess_backend (a task's
 * supervisor pid in <data_root>/tasks/<id>/pid), for `vanish`. */
#include "altar/plugin/backend.h"
#include "altar/config.h"
#include "altar/plugin.h"
#include "altar/storage.h"
#include "backend_contract.h"
#include "testutil.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *backend_name;

static altar_backend_t *make(void *ctx, const char *data_root, altar_error_t *err) {
  (void)ctx;
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "data_root", data_root);
  altar_backend_t *be = altar_backend_open_by_name(backend_name, &cfg, err);
  altar_strmap_clear(&cfg);
  return be;
}

static int set_argv(altar_spec_t *s, const char *const *argv) {
  for (size_t i = 0; i < s->n_command; i++) free(s->command[i]);
  free(s->command);
  s->command = NULL;
  s->n_command = 0;
  for (size_t i = 0; argv[i]; i++)
    if (altar_spec_add_arg(s, argv[i]) < 0) return -1;
  return 0;
}

static int set_exit(void *ctx, altar_spec_t *s, int code) {
  (void)ctx;
  char script[32];
  snprintf(script, sizeof script, "exit %d", code);
  const char *argv[] = {"sh", "-c", script, NULL};
  return set_argv(s, argv);
}

static int set_sleep(void *ctx, altar_spec_t *s, int seconds) {
  (void)ctx;
  char secs[16];
  snprintf(secs, sizeof secs, "%d", seconds);
  const char *argv[] = {"sleep", secs, NULL};
  return set_argv(s, argv);
}

static int set_oom(void *ctx, altar_spec_t *s) {
  (void)ctx;
  /* Grows without end, so it can only stop by being killed. */
  const char *argv[] = {"perl", "-e", "my @a; while (1) { push @a, 'x' x 1048576 }", NULL};
  s->resources.memory_mb = (altar_opt_i64_t){true, 64};
  return set_argv(s, argv);
}

static int set_read_input(void *ctx, altar_spec_t *s, const char *path) {
  (void)ctx;
  const char *argv[] = {"cat", path, NULL};
  return set_argv(s, argv);
}

/* The supervisor dies without a word; its command dies with it. */
static int vanish(void *ctx, altar_backend_t *be, const altar_handle_t *h) {
  (void)ctx;
  char path[4200];
  snprintf(path, sizeof path, "%s/tasks/%s/pid", altar_backend_mount_root(be), h->external_id);
  char *text = altar_test_read_file(path, NULL);
  long pid = text ? strtol(text, NULL, 10) : 0;
  free(text);
  if (pid <= 1) return -1;
  return kill((pid_t)pid, SIGKILL);
}

static altar_contract_fixture_t fixture = {
    .image = "none (recorded, unused)",
    .wait_s = 60,
    .make_backend = make,
    .set_exit = set_exit,
    .set_sleep = set_sleep,
    .set_oom = set_oom,
    .set_read_input = set_read_input,
    .vanish = vanish,
};

static void add(void) { altar_contract_add_suite(&fixture); }

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: altar_plugin_contract BACKEND [CONFIG]\n");
    return 2;
  }
  backend_name = argv[1];
  fixture.name = backend_name;
  /* Staging reads file:// sources through the storage registry, as in altar. */
  if (altar_storage_register_builtin() < 0) return 1;
  altar_error_t err = {0};
  if (altar_plugin_load_path(getenv(ALTAR_PLUGIN_PATH_ENV), ALTAR_PLUGIN_PATH_ENV, &err) < 0) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  if (argc == 3) {
    altar_config_t cfg;
    int rc = altar_config_load(argv[2], &cfg, &err);
    if (rc == 0) rc = altar_plugin_load_config(&cfg, &err);
    altar_config_clear(&cfg);
    if (rc < 0) {
      fprintf(stderr, "%s\n", err.msg);
      return 1;
    }
  }
  if (!altar_backend_lookup(backend_name)) {
    fprintf(stderr, "backend '%s' is not registered after loading the plug-ins (%zu loaded)\n", backend_name,
            altar_plugin_count());
    return 1;
  }
  return altar_test_main(argc, argv, add);
}
