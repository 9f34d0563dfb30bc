/* altar demo: the main job on one machine — a reconciler and two workers as
 * separate processes, a job of models × folds whose commands read verified
 * inputs and write outputs, one shard failing transiently once and retried. */
#include "altar/digest.h"
#include "cli.h"
#include "follow.h"
#include "fleet_common.h"
#include "producer/job_queue.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *out) {
  fprintf(out, "usage: altar demo [--dir DIR] [--models N] [--folds N] [--transport kafka --brokers HOST:PORT]\n"
               "                  [--backend process|docker|kubernetes] [--image IMAGE]\n"
               "                  [--kubeconfig FILE] [--namespace NS]\n\n"
               "Starts a reconciler and two workers as separate processes under DIR (default\n"
               "./var/demo), submits a job of N models x N folds (default 3 x 5) whose commands\n"
               "read a verified input and write an output, shows progress and the group\n"
               "events as they fire, prints a summary table and stops everything.\n"
               "With --backend kubernetes each shard is a Job on the cluster --kubeconfig\n"
               "names (namespace NS, default altar-demo); inputs are staged under DIR/data\n"
               "for the verify-inputs init container, and no output is collected, so it\n"
               "also runs against a control plane whose pods kwok finishes.\n");
  fputs(ALTAR_CLI_EXIT_HELP, out);
}

/* The command every shard runs: args are input, output, fold, flaky marker. */
static const char shard_script[] =
    "set -e\n"
    "in=\"$1\"; out=\"$2\"; fold=\"$3\"; marker=\"$4\"\n"
    "mkdir -p \"$(dirname \"$out\")\"\n" /* first: the marker's directory too, whichever shard runs first */
    "if [ -n \"$marker\" ] && [ ! -e \"$marker\" ]; then : > \"$marker\"; sleep 60; fi\n"
    "sum=$(sha256sum \"$in\" | cut -d' ' -f1)\n"
    "echo \"fold=$fold input_sha256=$sum\" > \"$out\"\n";

static int mkdirs(const char *path) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(tmp, 0755) && errno != EEXIST ? -1 : 0;
}

static pid_t spawn_self(const char *self, char *const args[], const char *logpath) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  FILE *lf = fopen(logpath, "a");
  if (lf) {
    dup2(fileno(lf), 2);
    dup2(fileno(lf), 1);
  }
  execv(self, args);
  _exit(127);
}

typedef struct demo_ctx {
  size_t fired, dead;
} demo_ctx_t;

static void on_group(void *ctx, const char *event, const char *kind, const char *group_key, size_t n_shards,
                     const char *event_id) {
  demo_ctx_t *d = ctx;
  if (!strcmp(event, "fired")) d->fired++;
  else d->dead++;
  fprintf(stderr, "%s  group %-13s %s:%s  (%zu shard%s, event %.12s)\n", isatty(2) ? "\r\033[K" : "", event, kind,
          group_key, n_shards, ALTAR_CLI_PLURAL(n_shards), event_id);
}

int altar_cmd_demo(int argc, char **argv) {
  const char *dir = "./var/demo", *transport = "local", *brokers = NULL, *backend = "process", *image = NULL;
  const char *kubeconfig = NULL, *k8s_ns = "altar-demo";
  long models = 3, folds = 5;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool has = i + 1 < argc;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--dir") && has) dir = argv[++i];
    else if (!strcmp(a, "--transport") && has) transport = argv[++i];
    else if (!strcmp(a, "--brokers") && has) {
      brokers = argv[++i];
      transport = "kafka";
    } else if (!strcmp(a, "--backend") && has) backend = argv[++i];
    else if (!strcmp(a, "--image") && has) image = argv[++i];
    else if (!strcmp(a, "--kubeconfig") && has) kubeconfig = argv[++i];
    else if (!strcmp(a, "--namespace") && has) k8s_ns = argv[++i];
    else if ((!strcmp(a, "--models") || !strcmp(a, "--folds")) && has) {
      char *end;
      long v = strtol(argv[++i], &end, 10);
      if (*end || v < 1 || v > 100) {
        fprintf(stderr, "altar demo: %s: expected 1..100\n", a);
        return 2;
      }
      if (!strcmp(a, "--models")) models = v;
      else folds = v;
    } else {
      fprintf(stderr, "altar demo: unknown argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (!strcmp(transport, "kafka") && !brokers) {
    fprintf(stderr, "altar demo: --transport kafka needs --brokers HOST:PORT\n");
    return 2;
  }
  bool docker = !strcmp(backend, "docker") || !strcmp(backend, "local");
  bool k8s = !strcmp(backend, "kubernetes");
  if (kubeconfig && !k8s) {
    fprintf(stderr, "altar demo: --kubeconfig goes with --backend kubernetes\n");
    return 2;
  }
  if (!image) image = docker ? "altar-test/busybox:1" : k8s ? "busybox:1.36" : "none";
  char kc_abs[4096] = "";
  if (kubeconfig && !realpath(kubeconfig, kc_abs)) {
    fprintf(stderr, "altar demo: --kubeconfig %s: %s\n", kubeconfig, strerror(errno));
    return 2;
  }
  char self[4096];
  ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
  if (sl <= 0) return 1;
  self[sl] = 0;
  char abs[4096];
  if (mkdirs(dir) || !realpath(dir, abs)) {
    fprintf(stderr, "altar demo: %s: %s\n", dir, strerror(errno));
    return 1;
  }
  /* A fresh run: topics and ledger get a per-run suffix, so an old demo never leaks in. */
  char run[64], path[4096 + 64], cfgpath[4096 + 64];
  snprintf(run, sizeof run, "demo-%ld-%ld", (long)time(NULL), (long)getpid());
  snprintf(cfgpath, sizeof cfgpath, "%s/%s.yaml", abs, run);
  FILE *cf = fopen(cfgpath, "w");
  if (!cf) {
    fprintf(stderr, "altar demo: %s: %s\n", cfgpath, strerror(errno));
    return 1;
  }
  fprintf(cf, "transport:\n  name: %s\n", transport);
  if (brokers) fprintf(cf, "  kafka: {bootstrap.servers: \"%s\"}\n", brokers);
  else fprintf(cf, "  dir: %s/log\n", abs);
  fprintf(cf,
          "topics: {jobs: %s.jobs, status: %s.status, ready: %s.ready, dead: %s.dead, dlq: %s.dlq}\n"
          "backend: {name: %s, data_root: %s/data, slots: 2",
          run, run, run, run, run, backend, abs);
  /* Kubernetes: the cluster's volume is seen on this host at DIR/data. */
  if (k8s) {
    fprintf(cf, ", namespace: %s, staging_root: %s/data", k8s_ns, abs);
    if (kc_abs[0]) fprintf(cf, ", kubeconfig: \"%s\"", kc_abs);
  }
  fprintf(cf,
          "}\n"
          "ledger: {path: %s/%s.ledger}\n"
          "groups:\n"
          "  demo_fold:\n"
          "    group_by: [job_id, model_id]\n"
          "    ready_when: {all_expected_folds: {label: fold, count_label: num_folds}}\n"
          "    on_failed: retry\n"
          "    max_restarts: 2\n",
          abs, run);
  fclose(cf);
  altar_config_t cfg;
  altar_error_t err = {0};
  if (altar_config_load(cfgpath, &cfg, &err)) {
    fprintf(stderr, "altar demo: %s\n", err.msg);
    altar_config_clear(&cfg);
    return 1;
  }
  altar_group_specs_t groups = {0};
  if (altar_cli_load_groups(&cfg, &groups)) {
    altar_config_clear(&cfg);
    return 1;
  }
  /* Inputs: one model file per model, addressed by its digest. */
  const char *mount = docker || k8s ? "/mnt/volume" : NULL;
  char data_root[4096 + 16];
  snprintf(data_root, sizeof data_root, "%s/data", abs);
  if (!mount) mount = data_root;
  snprintf(path, sizeof path, "%s/store", abs);
  mkdirs(path);
  mkdirs(data_root);
  size_t n = (size_t)(models * folds);
  altar_spec_t *specs = calloc(n, sizeof *specs);
  int rc = specs ? 0 : 1;
  char job_id[64];
  snprintf(job_id, sizeof job_id, "%s", run);
  for (long m = 0; !rc && m < models; m++) {
    char model_file[4096 + 64], digest[ALTAR_DIGEST_BUFSZ];
    snprintf(model_file, sizeof model_file, "%s/store/model-%ld.bin", abs, m);
    FILE *mf = fopen(model_file, "w");
    if (!mf) {
      rc = 1;
      break;
    }
    for (int k = 0; k < 1000; k++) fprintf(mf, "model %ld weights %d\n", m, k * (int)(m + 1));
    fclose(mf);
    if (altar_sha256_file(model_file, digest, &err)) {
      fprintf(stderr, "altar demo: %s\n", err.msg);
      rc = 1;
      break;
    }
    for (long f = 0; f < folds; f++) {
      altar_spec_t *s = &specs[m * folds + f];
      s->kind = strdup("demo_fold");
      s->image = strdup(image);
      s->resources.count = 1;
      /* On Kubernetes no shard is made flaky: the command may never run (kwok). */
      bool flaky = m == 0 && f == 1 && !k8s;
      s->timeout_s = (altar_opt_i64_t){true, flaky ? 3 : 300};
      char uri[4096 + 80], logical_in[64], logical_out[128], in[4096], out[4096], marker[4096], fs[16], ms[16], ns[16];
      snprintf(uri, sizeof uri, "file://%s", model_file);
      snprintf(logical_in, sizeof logical_in, "models/model-%ld.bin", m);
      snprintf(logical_out, sizeof logical_out, "jobs/%s/model-%ld/fold-%ld.txt", job_id, m, f);
      snprintf(in, sizeof in, "%s/%s", mount, logical_in);
      snprintf(out, sizeof out, "%s/%s", mount, logical_out);
      /* Shard (0, 1) sleeps past its 3 s timeout the first time: a transient failure the reconciler retries. */
      if (flaky) snprintf(marker, sizeof marker, "%s/jobs/%s/flaky-once", mount, job_id);
      else marker[0] = 0;
      snprintf(fs, sizeof fs, "%ld", f);
      snprintf(ms, sizeof ms, "model-%ld", m);
      snprintf(ns, sizeof ns, "%ld", folds);
      char result[4096 + 128];
      snprintf(result, sizeof result, "file://%s/results/%s/model-%ld/fold-%ld.txt", abs, job_id, m, f);
      if (!s->kind || !s->image || altar_spec_add_arg(s, "/bin/sh") || altar_spec_add_arg(s, "-c") ||
          altar_spec_add_arg(s, shard_script) || altar_spec_add_arg(s, "shard") || altar_spec_add_arg(s, in) ||
          altar_spec_add_arg(s, out) || altar_spec_add_arg(s, fs) || altar_spec_add_arg(s, marker) ||
          altar_spec_set_label(s, "job_id", job_id) || altar_spec_set_label(s, "model_id", ms) ||
          altar_spec_set_label(s, "fold", fs) || altar_spec_set_label(s, "num_folds", ns) ||
          altar_spec_add_input(s, uri, logical_in, ms, digest) ||
          (!k8s && altar_spec_add_output(s, result, logical_out))) {
        rc = 1;
        break;
      }
    }
  }
  snprintf(path, sizeof path, "%s/results/%s", abs, job_id);
  mkdirs(path);
  for (long m = 0; !rc && m < models; m++) {
    snprintf(path, sizeof path, "%s/results/%s/model-%ld", abs, job_id, m);
    mkdirs(path);
  }
  pid_t pids[3] = {0, 0, 0};
  demo_ctx_t dc = {0};
  expect_t x = {0};
  double t0 = (double)time(NULL);
  if (!rc) {
    altar_transport_t *t = altar_cli_open_transport(&cfg, NULL);
    rc = !t || altar_cli_ensure_topics(t, &cfg);
    altar_transport_close(t);
  }
  if (!rc) {
    fprintf(stderr, "altar demo: %s transport, %s backend, under %s\n", transport, backend, abs);
    char logp[4096 + 32];
    snprintf(logp, sizeof logp, "%s/reconciler.log", abs);
    char *rargs[] = {self, "reconciler", "--config", cfgpath, NULL};
    pids[0] = spawn_self(self, rargs, logp);
    for (int w = 0; w < 2; w++) {
      char id[32];
      snprintf(id, sizeof id, "worker-%d", w + 1);
      snprintf(logp, sizeof logp, "%s/%s.log", abs, id);
      char *wargs[] = {self, "worker", "--config", cfgpath, "--id", id, "--drain", "5", NULL};
      pids[1 + w] = spawn_self(self, wargs, logp);
    }
    fprintf(stderr, "altar demo: started reconciler (pid %d) and workers (pids %d, %d); logs in %s\n", (int)pids[0],
            (int)pids[1], (int)pids[2], abs);
    altar_transport_t *t = altar_cli_open_transport(&cfg, NULL);
    altar_job_queue_t q = {.transport = t, .topics = &cfg.topics, .groups = &groups};
    if (t && altar_cli_follow_mark(&cfg, &x)) rc = 1;
    char run_id[ALTAR_RUN_ID_MAX + 1];
    rc = rc || !t || altar__job_queue_submit(&q, NULL, specs, n, run_id, &err);
    altar_transport_close(t);
    if (rc) {
      fprintf(stderr, "altar demo: submit: %s\n", err.msg);
    } else {
      fprintf(stderr, "altar demo: submitted job %s: %ld models x %ld folds = %zu shards\n", run_id, models, folds, n);
      rc = altar_cli_expect_build(&x, &groups, cfg.topics.jobs, specs, n)
               ? 2
               : altar_cli_follow(&cfg, run_id, &x, 600, on_group, &dc);
    }
  }
  for (int i = 2; i >= 0; i--)
    if (pids[i] > 0) kill(pids[i], SIGTERM);
  for (int i = 0; i < 3; i++)
    if (pids[i] > 0) waitpid(pids[i], NULL, 0);
  if (specs && x.n) {
    printf("\n%-10s %-6s %-8s %s\n", "model", "folds", "group", "outputs collected");
    for (long m = 0; m < models; m++) {
      long have = 0;
      for (long f = 0; f < folds; f++) {
        snprintf(path, sizeof path, "%s/results/%s/model-%ld/fold-%ld.txt", abs, job_id, m, f);
        struct stat st;
        have += stat(path, &st) == 0 && st.st_size > 0;
      }
      char key[256];
      snprintf(key, sizeof key, "demo_fold\x1f%s:model-%ld", job_id, m);
      const char *state = "pending";
      for (size_t i = 0; i < x.n; i++)
        if (!strcmp(x.keys[i], key) && x.done[i]) state = "settled";
      if (k8s) printf("model-%-4ld %-6ld %-8s (outputs stay on the cluster's volume)\n", m, folds, state);
      else
        printf("model-%-4ld %-6ld %-8s %ld/%ld in %s/results/%s/model-%ld\n", m, folds, state, have, folds, abs, job_id,
               m);
    }
    printf("\n%zu group%s fired, %zu dead-lettered, %zu shard%s, %.0f s; ledger %s\n", dc.fired,
           ALTAR_CLI_PLURAL(dc.fired), dc.dead, n, ALTAR_CLI_PLURAL(n), (double)time(NULL) - t0, cfg.ledger_path);
    /* The daemons' own closing lines: retries and releases show up there. */
    const char *logs[] = {"reconciler", "worker-1", "worker-2"};
    for (size_t i = 0; i < 3; i++) {
      snprintf(path, sizeof path, "%s/%s.log", abs, logs[i]);
      FILE *lf = fopen(path, "r");
      char line[512], last[512] = "";
      while (lf && fgets(line, sizeof line, lf))
        if (strstr(line, " applied ") || strstr(line, " consumed ")) snprintf(last, sizeof last, "%s", line);
      if (lf) fclose(lf);
      if (last[0]) printf("%-10s %s", logs[i], strchr(last, ':') ? strchr(last, ':') + 2 : last);
    }
  }
  altar_cli_expect_clear(&x);
  for (size_t i = 0; specs && i < n; i++) altar_spec_clear(&specs[i]);
  free(specs);
  altar_group_specs_clear(&groups);
  altar_config_clear(&cfg);
  return rc;
}
