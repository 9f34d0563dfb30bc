/* modal: launching sandboxes, probing them, stopping them.
 *
 * Input digests are verified by the task ("task"), not at staging: staging
 * uploads into a remote Volume, and the bytes a sandbox reads are only
 * reachable from inside it — a check on the host copy would not cover the
 * copy the task opens. So the sandbox command is wrapped: the sh verifier
 * runs over the mounted inputs first and a mismatch ends the sandbox, before
 * the task's command ever starts, with a code and a last stderr line that
 * poll reads together as input_digest_mismatch. An exit code alone never
 * says which process chose it: the task's own 86 or 137 is its own. */
#include "modal_int.h"
#include "altar/grow.h"

#include "altar/digest.h"
#include "altar/log_tail.h"
#include "altar/paths.h"
#include "altar/codec.h"
#include "altar/pools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

/* Output asked of an ended sandbox, per stream: more than the detail shows,
 * so a secret cut at the window's start lies in the part the detail drops. */
#define OUTPUT_WINDOW 8192

/* $1: the verifier program, $2: its lines (one per input, newline-separated),
 * then the task's argv. Word splitting on newlines only, globbing off, so a
 * line reaches the verifier whole. */
#define STR_(x) #x
#define STR(x) STR_(x)
static const char wrapper[] = "prog=$1\n"
                              "lines=$2\n"
                              "shift 2\n"
                              "old_ifs=$IFS\n"
                              "IFS='\n'\n"
                              "set -f\n"
                              "sh -c \"$prog\" verify $lines || { echo '" ALTAR_MODAL_DIGEST_MARK
                              "' >&2; exit " STR(ALTAR_MODAL_DIGEST_EXIT_CODE) "; }\n"
                                                                               "set +f\n"
                                                                               "IFS=$old_ifs\n"
                                                                               "exec \"$@\"\n";

typedef struct argv_b {
  char **v;
  size_t n, cap;
  bool oom;
} argv_b_t;

static void push(argv_b_t *a, const char *s) {
  if (a->oom) return;
  if (ALTAR_GROW(a->v, a->cap, a->n + 1)) {
    a->oom = true;
    return;
  }
  if (!(a->v[a->n] = strdup(s))) a->oom = true;
  else a->n++;
}

static void argv_free(char **v, size_t n) {
  for (size_t i = 0; v && i < n; i++) free(v[i]);
  free(v);
}

int altar_modal_build_command(altar_modal_t *m, const altar_spec_t *spec, char ***pargv, size_t *pn,
                              altar_error_t *err) {
  *pargv = NULL;
  *pn = 0;
  argv_b_t a = {0};
  altar_buf_t lines = {0};
  int rc = ALTAR_OK;
  for (size_t i = 0; i < spec->n_inputs && !rc; i++) {
    const altar_transfer_t *t = &spec->inputs[i];
    if (!t->digest) continue;
    char field[48];
    snprintf(field, sizeof field, "inputs[%zu].digest", i);
    rc = altar_digest_check(field, t->digest, err);
    char *phys = NULL;
    if (!rc) rc = altar_path_resolve(m->mount_root, t->logical_path, &phys, err);
    if (rc == ALTAR_EPATH) altar_error_prefix(err, "inputs[%zu].logical_path", i);
    if (!rc && strchr(phys, '\n'))
      rc = altar_error_set(err, ALTAR_EINVAL, "inputs[%zu].logical_path: must not contain a newline", i);
    if (!rc && ((lines.len && altar_buf_append(&lines, "\n", 1)) ||
                altar_buf_append_str(&lines, t->digest + strlen(ALTAR_DIGEST_PREFIX)) ||
                altar_buf_append(&lines, "  ", 2) || altar_buf_append_str(&lines, phys)))
      rc = altar_error_set(err, ALTAR_ENOMEM, "command: out of memory");
    free(phys);
  }
  if (!rc && lines.len) {
    push(&a, "sh");
    push(&a, "-c");
    push(&a, wrapper);
    push(&a, "altar-verify-inputs");
    push(&a, altar_digest_verifier_program(true));
    altar_buf_append(&lines, "", 1);
    push(&a, (const char *)lines.data);
  }
  for (size_t i = 0; !rc && i < spec->n_command; i++) push(&a, spec->command[i]);
  altar_buf_free(&lines);
  if (!rc && a.oom) rc = altar_error_set(err, ALTAR_ENOMEM, "command: out of memory");
  if (rc) {
    argv_free(a.v, a.n);
    return rc;
  }
  *pargv = a.v;
  *pn = a.n;
  return ALTAR_OK;
}

int altar_modal_accelerator(altar_modal_t *m, const altar_resources_t *r, char **pgpu, altar_error_t *err) {
  *pgpu = NULL;
  if (!r->gpu) return ALTAR_OK;
  const char *acc = altar_strmap_get(&m->accelerators, r->gpu);
  if (!acc) {
    char known[256] = "";
    for (size_t i = 0; i < m->accelerators.n; i++) {
      size_t len = strlen(known);
      snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "", m->accelerators.keys[i]);
    }
    return altar_error_set(err, ALTAR_EINVAL, "resources.gpu: pool '%s' has no Modal accelerator (known: %s)", r->gpu,
                           known);
  }
  if (r->count < 1) return altar_error_set(err, ALTAR_EINVAL, "resources.count: must be >= 1");
  char buf[160];
  if (r->count > 1) snprintf(buf, sizeof buf, "%s:%lld", acc, (long long)r->count);
  else snprintf(buf, sizeof buf, "%s", acc);
  *pgpu = strdup(buf);
  return *pgpu ? ALTAR_OK : altar_error_set(err, ALTAR_ENOMEM, "resources.gpu: out of memory");
}

int altar_modal_submit(altar_modal_t *m, const altar_spec_t *spec, altar_handle_t *ph, altar_error_t *err) {
  memset(ph, 0, sizeof *ph);
  int rc = altar_spec_validate(spec, err);
  if (rc) return rc;
  /* Modal caps a sandbox's life: no limit means the cap, more is refused. */
  int64_t timeout = ALTAR_MODAL_MAX_SANDBOX_TIMEOUT_S;
  if (spec->timeout_s.set) {
    if (spec->timeout_s.v > ALTAR_MODAL_MAX_SANDBOX_TIMEOUT_S)
      return altar_error_set(err, ALTAR_EINVAL,
                             "timeout_s: %lld exceeds Modal's maximum sandbox lifetime of %d s (24 h)",
                             (long long)spec->timeout_s.v, ALTAR_MODAL_MAX_SANDBOX_TIMEOUT_S);
    timeout = spec->timeout_s.v;
  }
  char *gpu = NULL, **argv = NULL, *id = NULL;
  size_t argc = 0;
  char key[ALTAR_TASK_KEY_LEN + 1];
  rc = altar_spec_identity(spec, key, err);
  if (!rc) rc = altar_modal_accelerator(m, &spec->resources, &gpu, err);
  if (!rc) rc = altar_modal_build_command(m, spec, &argv, &argc, err);
  if (!rc) {
    altar_modal_sandbox_req_t req = {
        .app_name = m->app_name,
        .volume_name = m->volume_name,
        .mount_root = m->mount_root,
        .image = spec->image,
        .command = argv,
        .n_command = argc,
        .gpu = gpu,
        .memory_mb = spec->resources.memory_mb,
        .timeout_s = timeout,
        .tags = &spec->labels,
        .task_key = key, /* adopt-or-run: a dead worker's sandbox is taken over */
    };
    rc = m->rt->ops->run_sandbox(m->rt->impl, &req, &id, err);
    if (!rc && (!id || !*id)) rc = altar_error_set(err, ALTAR_EBACKEND, "modal run_sandbox: no sandbox id");
  }
  /* The sandbox id is the opaque external id; identity rides in the labels. */
  if (!rc && altar_handle_init_for_spec(ph, "modal", id, spec))
    rc = altar_error_set(err, ALTAR_ENOMEM, "submit: out of memory");
  if (rc) altar_handle_clear(ph);
  free(id);
  free(gpu);
  argv_free(argv, argc);
  return rc;
}

/* Whether stderr's last line is the verifying wrapper's mark: the one sign
 * that an exit of 86 came from the verifier and not from the command. */
static bool verifier_failed(const char *er, size_t en) {
  while (en && (er[en - 1] == '\n' || er[en - 1] == '\r')) en--;
  size_t mn = strlen(ALTAR_MODAL_DIGEST_MARK);
  if (en < mn || memcmp(er + en - mn, ALTAR_MODAL_DIGEST_MARK, mn)) return false;
  return en == mn || er[en - mn - 1] == '\n';
}

/* Whether the runtime says the sandbox ran out of memory. */
static bool oom_reported(altar_modal_t *m, const char *id) {
  bool oom = false;
  altar_error_t ignored = {0};
  if (!m->rt->ops->oom_killed || m->rt->ops->oom_killed(m->rt->impl, id, &oom, &ignored)) return false;
  return oom;
}

/* What an ended sandbox's exit code means, given what else the platform
 * tells: er (en bytes) is the tail of its stderr, NULL when unread. */
static altar_failure_t *failure_for_exit(altar_modal_t *m, const char *id, int code, const char *er, size_t en) {
  char detail[96];
  if (code == ALTAR_MODAL_TIMEOUT_EXIT_CODE)
    return altar_failure_for_reason(ALTAR_REASON_TIMEOUT, "the sandbox outlived its timeout");
  if (code == ALTAR_MODAL_DIGEST_EXIT_CODE && er && verifier_failed(er, en))
    return altar_failure_for_reason(ALTAR_REASON_INPUT_DIGEST_MISMATCH,
                                    "an input failed its digest check inside the sandbox");
  if (code == ALTAR_MODAL_KILLED_EXIT_CODE) {
    if (oom_reported(m, id))
      return altar_failure_for_reason(ALTAR_REASON_OOM_KILLED, "Modal killed the sandbox for exceeding its memory");
    /* A SIGKILL with no word on why: memory, a terminate, or the command
     * itself. The evidence is ambiguous, so not deterministic (a retry). */
    return altar_failure_exit(code, "killed (137) by SIGKILL; Modal gave no cause", false);
  }
  snprintf(detail, sizeof detail, "the command exited with %d", code);
  return altar_failure_for_exit(code, detail);
}

/* The failure of a sandbox that ended with code: classified with its
 * stderr, then f's detail followed by the tails of its stderr and stdout, as
 * the other backends build it. Output that cannot be read leaves the detail
 * as it was: the exit code still tells the failure. */
static altar_failure_t *ended_failure(altar_modal_t *m, const char *id, int code) {
  char *er = NULL, *out = NULL;
  size_t en = 0, on = 0;
  altar_error_t ignored = {0};
  bool have = m->rt->ops->read_output &&
              m->rt->ops->read_output(m->rt->impl, id, OUTPUT_WINDOW, &er, &en, &out, &on, &ignored) == ALTAR_OK;
  /* The runtime's bound is trusted no further than the window. */
  const char *e = have && er ? er + (en > OUTPUT_WINDOW ? en - OUTPUT_WINDOW : 0) : NULL;
  const char *o = have && out ? out + (on > OUTPUT_WINDOW ? on - OUTPUT_WINDOW : 0) : NULL;
  en = en > OUTPUT_WINDOW ? OUTPUT_WINDOW : en;
  on = on > OUTPUT_WINDOW ? OUTPUT_WINDOW : on;
  altar_failure_t *f = failure_for_exit(m, id, code, e, e ? en : 0);
  if (f && have) {
    char *d = altar_detail_with_output(f->detail, e, e ? en : 0, o, o ? on : 0, (const char *const *)environ,
                                       ALTAR_BOUND_DETAIL);
    if (d) {
      free(f->detail);
      f->detail = d;
    }
  }
  free(er);
  free(out);
  return f;
}

int altar_modal_poll(altar_modal_t *m, const altar_handle_t *hs, size_t n, altar_status_t *st, altar_error_t *err) {
  int rc = ALTAR_OK;
  size_t done = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    bool finished = false;
    int code = 0;
    altar_error_t perr = {0};
    int prc = m->rt->ops->poll_sandbox(m->rt->impl, hs[i].external_id, &finished, &code, &perr);
    altar_state_t state = ALTAR_STATE_RUNNING;
    altar_failure_t *f = NULL;
    if (prc == ALTAR_ENOTFOUND) {
      state = ALTAR_STATE_FAILED;
      f = altar_failure_for_reason(ALTAR_REASON_CONTAINER_MISSING, perr.msg[0] ? perr.msg : "no such sandbox");
    } else if (prc) {
      if (err) *err = perr;
      rc = prc;
      break;
    } else if (finished && code == 0) {
      state = ALTAR_STATE_SUCCEEDED;
    } else if (finished) {
      state = ALTAR_STATE_FAILED;
      f = ended_failure(m, hs[i].external_id, code);
    }
    /* altar_status_init takes f, also when it fails. */
    if ((state == ALTAR_STATE_FAILED && !f) || altar_status_init(&st[i], &hs[i], state, f))
      rc = altar_error_set(err, ALTAR_ENOMEM, "poll: out of memory");
    else done = i + 1;
  }
  if (rc)
    for (size_t i = 0; i < done; i++) altar_status_clear(&st[i]);
  return rc;
}

int altar_modal_cancel(altar_modal_t *m, const altar_handle_t *h, altar_error_t *err) {
  if (!m->rt->ops->terminate_sandbox) return ALTAR_OK;
  if (!h || !h->external_id || !*h->external_id)
    return altar_error_set(err, ALTAR_EINVAL, "handle.external_id: must name a sandbox");
  int rc = m->rt->ops->terminate_sandbox(m->rt->impl, h->external_id, err);
  return rc == ALTAR_ENOTFOUND ? ALTAR_OK : rc;
}
