/* `altar run SPEC.json`: one spec to completion on one backend, without a
 * log: validate, stage inputs, submit, poll until terminal, collect outputs,
 * print the terminal TaskStatus as JSON. Exit 0 succeeded, 1 the task (or
 * its staging) failed, 2 bad input, 130 interrupted by Ctrl-C (143 by
 * SIGTERM); the task is cancelled first. */
#include "altar/backend.h"
#include "altar/clock.h"
#include "altar/codec.h"
#include "altar/spec_keys.h"
#include "fleet_common.h"
#include "altar/config.h"
#include "altar/file_read.h"
#include "altar/storage.h"
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RUN_SPEC_MAX (16u << 20) /* bytes of spec JSON we read */

static volatile sig_atomic_t interrupted;

static void on_signal(int sig) { interrupted = sig; }

static void run_usage(FILE *out) {
  char backends[512];
  altar_cli_registry_names(ALTAR_REGISTRY_BACKEND, backends, sizeof backends);
  fprintf(out,
          "usage: altar run SPEC.json [--backend NAME] [--data-root DIR] [--slots N]\n"
          "                 [--config FILE] [--quiet]\n"
          "\n"
          "Runs one ContainerTaskSpec (JSON, '-' for stdin) to completion: validates it,\n"
          "stages its inputs (verifying digests), submits it, polls until it ends,\n"
          "collects its outputs and prints the terminal TaskStatus as JSON on stdout.\n"
          "\n"
          "  --backend NAME   execution backend: %s\n"
          "                   (default: the config's, else 'process')\n"
          "  --data-root DIR  the backend's data root (backend.data_root)\n"
          "  --slots N        the backend's slots (backend.slots)\n"
          "  --config FILE    settings file (default ./altar.yaml when present)\n"
          "  --quiet          no progress on a terminal\n"
          "\n"
          "Exit status: 0 succeeded, 1 the task failed (or staging/collection did),\n"
          "2 bad input (the message names the field), 130 interrupted: Ctrl-C cancels\n"
          "the task first.\n",
          backends);
  fputs(ALTAR_CLI_EXIT_HELP, out);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL); /* EINTR is fine: the loop looks at `interrupted` */
}

static int print_status(const altar_status_t *st) {
  altar_error_t err = {0};
  char *json = altar_status_result_to_json(st, &err);
  if (!json) {
    fprintf(stderr, "altar run: cannot print the status: %s\n", err.msg);
    return -1;
  }
  printf("%s\n", json);
  fflush(stdout);
  free(json);
  return 0;
}

/* Polls h until terminal or a signal; 0 with *pst filled, 1 interrupted, -1 error. */
static int wait_terminal(altar_backend_t *be, const altar_handle_t *h, bool progress, altar_status_t *pst) {
  long pause = 2; /* ms; grows to 250 so a short task ends fast and a long one costs little */
  double start = altar_mono_s(), last_shown = start;
  for (;;) {
    if (interrupted) return 1;
    altar_error_t err = {0};
    int rc = altar_backend_poll(be, h, 1, pst, &err);
    if (rc < 0) {
      fprintf(stderr, "altar run: poll %s: %s\n", h->external_id, err.msg);
      return -1;
    }
    if (altar_state_terminal(pst->state)) break;
    if (progress && altar_mono_s() - last_shown >= 1.0) {
      last_shown = altar_mono_s();
      fprintf(stderr, "\raltar run: %s %s, %.0f s", h->external_id, altar_state_name(pst->state), last_shown - start);
    }
    altar_status_clear(pst);
    sleep_ms(pause);
    if (pause < 250) pause = pause * 2 > 250 ? 250 : pause * 2;
  }
  if (progress && last_shown > start) fprintf(stderr, "\n");
  return 0;
}

int altar_cmd_run(int argc, char **argv) {
  const char *file = NULL, *backend = NULL, *data_root = NULL, *slots = NULL, *config = NULL;
  bool quiet = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool has_val = i + 1 < argc;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      run_usage(stdout);
      return 0;
    } else if (!strcmp(a, "--backend") && has_val) {
      backend = argv[++i];
    } else if (!strcmp(a, "--data-root") && has_val) {
      data_root = argv[++i];
    } else if (!strcmp(a, "--slots") && has_val) {
      slots = argv[++i];
    } else if (!strcmp(a, "--config") && has_val) {
      config = argv[++i];
    } else if (!strcmp(a, "--quiet")) {
      quiet = true;
    } else if (!file && (a[0] != '-' || !strcmp(a, "-"))) {
      file = a;
    } else {
      fprintf(stderr, "altar run: unexpected argument '%s'\n", a);
      run_usage(stderr);
      return 2;
    }
  }
  if (!file) {
    fprintf(stderr, "altar run: missing SPEC.json\n");
    run_usage(stderr);
    return 2;
  }

  altar_error_t err = {0};
  altar_config_t cfg;
  if (altar_cli_config_load(config, &cfg, &err) < 0) {
    fprintf(stderr, "altar run: %s\n", err.msg);
    altar_config_clear(&cfg);
    return 2;
  }
  /* Flags override single keys; another backend than the file's starts
   * from no keys, since the file's keys belong to its own backend. */
  char name[128];
  snprintf(name, sizeof name, "%s", backend ? backend : cfg.backend_name ? cfg.backend_name : "process");
  altar_strmap_t props = {0};
  if (!backend || (cfg.backend_name && !strcmp(backend, cfg.backend_name)))
    altar_strmap_copy(&props, &cfg.backend_props);
  altar_strmap_remove(&props, "name");
  if (data_root) altar_strmap_set(&props, "data_root", data_root);
  if (slots) altar_strmap_set(&props, "slots", slots);
  altar_config_clear(&cfg);

  int code = 2;
  altar_backend_t *be = NULL;
  altar_spec_t spec;
  memset(&spec, 0, sizeof spec);
  altar_handle_t h;
  memset(&h, 0, sizeof h);
  altar_status_t st;
  memset(&st, 0, sizeof st);
  bool submitted = false;

  size_t len = 0;
  char *text = altar_file_read(file, NULL, RUN_SPEC_MAX, &len, &err);
  if (!text) {
    fprintf(stderr, "altar run: %s\n", err.msg);
    goto out;
  }
  /* A spec a person wrote: an unknown key is a typo, named with its line. */
  if (altar_spec_json_check_keys(text, len, file, 1, &err)) {
    free(text);
    fprintf(stderr, "altar run: %s\n", err.msg);
    goto out;
  }
  int rc = altar_spec_from_json(text, len, &spec, &err);
  free(text);
  if (rc == 0) rc = altar_spec_validate(&spec, &err);
  if (rc < 0) {
    fprintf(stderr, "altar run: %s: %s\n", file, err.msg);
    goto out;
  }
  if (altar_storage_python_start(&err)) {
    fprintf(stderr, "altar run: %s\n", err.msg);
    goto out;
  }
  be = altar_backend_open_by_name(name, &props, &err);
  if (!be) {
    fprintf(stderr, "altar run: %s\n", err.msg);
    goto out;
  }
  if (altar_backend_check_resources(be, &spec.resources, &err) < 0) {
    fprintf(stderr, "altar run: %s: %s\n", file, err.msg);
    goto out;
  }

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal; /* no SA_RESTART: a sleep ends early */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  code = 1;
  rc = altar_backend_stage_inputs(be, spec.inputs, spec.n_inputs, &err);
  if (rc < 0) {
    fprintf(stderr, "altar run: staging: %s\n", err.msg);
    goto out;
  }
  if (interrupted) goto out;
  rc = altar_backend_submit(be, &spec, &h, &err);
  if (rc < 0) {
    fprintf(stderr, "altar run: submit: %s\n", err.msg);
    if (rc == ALTAR_EINVAL) code = 2;
    goto out;
  }
  submitted = true;
  bool progress = !quiet && isatty(STDERR_FILENO);
  rc = wait_terminal(be, &h, progress, &st);
  if (rc != 0) goto out;
  if (st.state == ALTAR_STATE_SUCCEEDED) {
    rc = altar_backend_collect_outputs(be, spec.outputs, spec.n_outputs, &err);
    if (rc < 0) {
      print_status(&st);
      fprintf(stderr, "altar run: collecting outputs: %s\n", err.msg);
      goto out;
    }
    code = print_status(&st) < 0 ? 1 : 0;
  } else {
    print_status(&st);
    if (st.failure)
      fprintf(stderr, "altar run: task failed: %s%s%s\n", st.failure->reason, st.failure->detail ? ": " : "",
              st.failure->detail ? st.failure->detail : "");
    code = 1;
  }
out:
  if (interrupted) {
    if (submitted) {
      altar_error_t cerr = {0};
      if (altar_backend_require(be, ALTAR_BACKEND_CAP_CANCEL, NULL, &cerr) < 0)
        fprintf(stderr, "altar run: interrupted; task %s runs on: %s\n", h.external_id, cerr.msg);
      else if (altar_backend_cancel(be, &h, &cerr) < 0)
        fprintf(stderr, "altar run: cancel %s: %s\n", h.external_id, cerr.msg);
      else fprintf(stderr, "altar run: interrupted; task %s cancelled\n", h.external_id);
    } else {
      fprintf(stderr, "altar run: interrupted before the task was submitted\n");
    }
    code = 128 + interrupted; /* 130 for Ctrl-C, 143 for SIGTERM */
  }
  altar_status_clear(&st);
  altar_handle_clear(&h);
  altar_spec_clear(&spec);
  altar_backend_close(be);
  altar_strmap_clear(&props);
  return code;
}
