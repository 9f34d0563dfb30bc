/* The worker loop: a turn of named phases (fleet, stop, intake, backend
 * poll, housekeeping, metrics and commits, idle exit) on one clock read,
 * then drain and release on stop. The concerns the phases call live in
 * worker_*.c (worker_int.h). */
#include "worker/worker_int.h"

#include "altar/clock.h"
#include "heartbeat.h"
#include "worker/backend_caps.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void consume_failed(worker_t *w, const altar_error_t *e) {
  int64_t now = altar_mono_ms();
  if (!strcmp(e->msg, w->consume_err) && now - w->consume_err_ms < 10000) {
    w->consume_err_repeats++;
    return;
  }
  if (w->consume_err_repeats) altar__worker_log(w, "consume: %s (and %ld more times)", e->msg, w->consume_err_repeats);
  else altar__worker_log(w, "consume: %s", e->msg);
  snprintf(w->consume_err, sizeof w->consume_err, "%s", e->msg);
  w->consume_err_ms = now;
  w->consume_err_repeats = 0;
}

/* A stop: the partitions are gone already (left the group); held tasks get
 * until deadline_ms to finish, then are cancelled and released, each with
 * a status event and a "release" control message that lets the partition's
 * new owner start it at once. Waits for every record's acknowledgement. */
static void drain(worker_t *w, int64_t deadline_ms) {
  for (;;) {
    size_t left = 0;
    for (size_t i = 0; i < w->n_tasks; i++) left += !w->tasks[i]->terminal_sent;
    if (!left || altar_mono_ms() >= deadline_ms || (w->o->stop && *w->o->stop >= 2) || w->fatal) break;
    altar__worker_poll_tasks(w, -1, NULL);
    int interval = w->o->poll_interval_ms > 0 && w->o->poll_interval_ms < 100 ? w->o->poll_interval_ms : 100;
    altar_transport_poll(w->o->transport, interval);
    altar__worker_leases_if_due(w);
    altar__worker_reap_acked(w);
  }
  for (size_t i = 0; i < w->n_tasks; i++) {
    wtask_t *t = w->tasks[i];
    if (t->terminal_sent) continue;
    altar_error_t e = {0};
    altar_backend_cancel(w->o->backend, &t->handle, &e);
    /* Released, not finished: the job's offset stays unfinished so the
     * partition's owner runs it again. */
    if (altar__worker_emit_status(w, t, ALTAR_EV_RELEASED, t->state, NULL, false, false) == ALTAR_OK) {
      t->terminal_sent = true;
      t->released = true;
      w->stats.released++;
    }
  }
  int64_t *offs = calloc(w->n_tasks ? w->n_tasks : 1, sizeof *offs);
  bool *sent = calloc(w->n_tasks ? w->n_tasks : 1, sizeof *sent);
  for (size_t i = 0; offs && sent && i < w->n_tasks; i++) {
    const wtask_t *t = w->tasks[i];
    if (!t->released || sent[i]) continue;
    size_t n = 0;
    for (size_t j = i; j < w->n_tasks; j++) {
      const wtask_t *u = w->tasks[j];
      if (!sent[j] && u->released && u->partition == t->partition && !strcmp(u->topic, t->topic)) {
        offs[n++] = u->offset;
        sent[j] = true;
      }
    }
    altar__worker_send_control(w, t->topic, t->partition, ALTAR_CTL_RELEASE, offs, n);
  }
  free(offs);
  free(sent);
  altar_error_t e = {0};
  if (altar_transport_flush(w->o->transport, 30000, &e) != ALTAR_OK) altar__worker_log(w, "flush: %s", e.msg);
  /* Released tasks were cancelled already; drop them without a second cancel. */
  size_t j = 0;
  for (size_t i = 0; i < w->n_tasks; i++) {
    wtask_t *t = w->tasks[i];
    if (t->released) {
      altar__worker_task_free(t);
    } else {
      w->tasks[j++] = t;
    }
  }
  w->n_tasks = j;
  altar__worker_reap_acked(w);
}

static const char *running_key(void *ctx, size_t i) { return ((worker_t *)ctx)->tasks[i]->task_key; }

/* The loop's fixed cadences (the configurable ones are in worker.h). */
enum {
  CONSUME_WAIT_MAX_MS = 50,   /* longest a turn blocks on the log: leases, heartbeats and
                                 forwards are checked at least this often */
  METRICS_EVERY_MS = 100,     /* gauges refreshed */
  IDLE_WARN_AFTER_MS = 5000,  /* no partition this long: say why once */
  COMMITS_PER_TURN = 1,       /* partitions a commit round writes per turn */
  FINAL_COMMIT_TRIES = 5,     /* the last commit's retries at exit ... */
  FINAL_COMMIT_POLL_MS = 200, /* ... each after serving the log this long */
  EXIT_FLUSH_MS = 5000,       /* reports still owed at exit get this long */
};

/* The loop's clocks: when each periodic phase is next due. */
typedef struct loop_clock {
  int poll_every, commit_every;
  int64_t next_poll, next_commit, next_metrics, idle_since;
  bool warned_idle, got_job;
  bool committing;  /* a commit round is under way ... */
  size_t commit_at; /* ... at this index of the owned partitions */
} loop_clock_t;

/* The backend's kept-output facts into their gauges: it answers from the
 * index it keeps (no directory read) and recomputes only when that changed
 * or an entry aged past its bound, so a refresh costs a comparison. */
static void refresh_kept_logs(worker_t *w) {
  if (!w->metrics.kept_dirs) return;
  altar_kept_logs_t k;
  if (altar_backend_kept_logs(w->o->backend, &k) == ALTAR_OK) altar__worker_metrics_kept_logs(&w->metrics, &k);
}

/* Sets up w from o (id, tracker, metrics, leases, pools, heartbeat load,
 * subscription); on failure everything taken is released. */
static int worker_open(worker_t *w, const altar_worker_opts_t *o, altar_error_t *err) {
  *w = (worker_t){.o = o, .group = o->group ? o->group : ALTAR_WORKER_GROUP};
  if (o->worker_id) {
    snprintf(w->worker_id, sizeof w->worker_id, "%s", o->worker_id);
  } else {
    char host[128] = "localhost";
    gethostname(host, sizeof host - 1);
    snprintf(w->worker_id, sizeof w->worker_id, "%s:%ld", host, (long)getpid());
  }
  w->tracker = altar__offset_tracker_new();
  if (!w->tracker) return altar_error_set(err, ALTAR_ENOMEM, "worker: out of memory");
  altar_error_t me = {0};
  bool kept_logs = altar_backend_caps(o->backend) & ALTAR_BACKEND_CAP_LOGS;
  if (altar__worker_metrics_init(&w->metrics, o->metrics, o->slots, kept_logs, &me))
    altar__worker_log(w, "metrics off: %s", me.msg);
  /* Set before the first turn: a scrape in between would read bounds of 0. */
  refresh_kept_logs(w);
  w->lease_interval_ms = o->lease_interval_ms > 0 ? o->lease_interval_ms : ALTAR_WORKER_LEASE_INTERVAL_MS_DEFAULT;
  w->lease_timeout_ms = o->lease_timeout_ms > 0 ? o->lease_timeout_ms
                        : 3 * w->lease_interval_ms > ALTAR_WORKER_LEASE_TIMEOUT_MS_MIN
                            ? 3 * w->lease_interval_ms
                            : ALTAR_WORKER_LEASE_TIMEOUT_MS_MIN;
  altar_transport_set_delivery(o->transport, altar__worker_on_delivery, w, NULL, NULL);
  w->intake = (altar__intake_ctx_t){.backend = o->backend, .groups = o->groups, .jobs_topic = o->topics->jobs};
  int rc = altar__worker_pools_setup(w, err);
  w->forward_after_ms = o->forward_after_ms ? o->forward_after_ms : ALTAR_FORWARD_AFTER_MS_DEFAULT;
  w->crash_after_forward = getenv("ALTAR_TEST_CRASH_AFTER_FORWARD") != NULL;
  /* Heartbeats announce the load whenever there is a fleet topic; peers
   * are read only with a handle to read them on. */
  if (!rc && o->topics->fleet && *o->topics->fleet) {
    w->peers = o->fleet_transport && w->forward_after_ms >= 0 ? altar__peers_new(w->worker_id) : NULL;
    w->load_pools = calloc(w->n_pools, sizeof *w->load_pools);
    w->load_free = calloc(w->n_pools, sizeof *w->load_free);
    if ((o->fleet_transport && w->forward_after_ms >= 0 && !w->peers) || !w->load_pools || !w->load_free)
      rc = altar_error_set(err, ALTAR_ENOMEM, "worker: out of memory");
    for (size_t i = 0; !rc && i < w->n_pools; i++) w->load_pools[i] = w->pools[i].name;
  }
  const char **topics = rc ? NULL : calloc(w->n_pools, sizeof *topics);
  if (!rc && !topics) rc = altar_error_set(err, ALTAR_ENOMEM, "worker: out of memory");
  for (size_t i = 0; !rc && i < w->n_pools; i++) topics[i] = w->pools[i].topic;
  if (!rc) {
    rc = altar_transport_subscribe(o->transport, w->group, topics, w->n_pools, altar__worker_on_rebalance, w, err);
    if (!rc) {
      for (size_t i = 0; i < w->n_pools; i++)
        altar__worker_log(w, "serving pool %s from %s", w->pools[i].name, w->pools[i].topic);
      char note[600];
      altar__worker_caps_note(o->backend, note, sizeof note);
      if (note[0]) altar__worker_log(w, "%s", note);
    }
  }
  free(topics);
  if (rc) {
    altar__peers_free(w->peers);
    free(w->load_pools);
    free(w->load_free);
    altar__worker_pools_free(w);
    altar_transport_detach(o->transport);
    altar__offset_tracker_free(w->tracker);
  }
  return rc;
}

/* Phase: what peers announce, and this worker's own heartbeat. */
static void phase_fleet(worker_t *w, altar__heartbeat_t *hb, int64_t now) {
  altar__worker_fleet_read(w, now);
  altar__heartbeat_load_t load = {w->n_pools, w->load_pools, w->load_free, w->n_parts, altar__worker_load_part, w};
  bool load_changed = altar__worker_load_update(w);
  altar__heartbeat_tick(hb, now, w->n_tasks, running_key, w, w->load_free ? &load : NULL, load_changed);
}

/* Phase: 0 to go on, 1 to stop draining, 2 to stop at once. */
static int phase_stop_asked(const worker_t *w) {
  const altar_worker_opts_t *o = w->o;
  if (o->stop && *o->stop >= 2) return 2;
  if ((o->stop && *o->stop == 1) || (o->max_jobs > 0 && w->finished_jobs >= (uint64_t)o->max_jobs)) return 1;
  return 0;
}

/* With free slots and tasks out, waits on the log and the tasks at once, so
 * neither a new record nor a finished task waits out the other's timeout
 * (a task's exit used to wait for the next backend poll). True when the
 * log may have news; a task's change brings the backend poll forward. */
static bool wait_log_and_tasks(loop_clock_t *c, int log_fd, int task_fd, int wait) {
  struct pollfd pfd[2] = {{.fd = log_fd, .events = POLLIN}, {.fd = task_fd, .events = POLLIN}};
  if (poll(pfd, 2, wait) <= 0) return false;
  if (pfd[1].revents) c->next_poll = altar_mono_ms();
  return pfd[0].revents != 0;
}

/* Phase: take in from the log. Waits no longer than until the next backend
 * poll (and not at all right after a job: there may be more); with every
 * slot busy it waits on the backend instead, so a freed slot is seen at
 * once. The message read, if any, is returned for the idle-exit check. */
static altar_msg_t *phase_intake(worker_t *w, loop_clock_t *c, int64_t now) {
  const altar_worker_opts_t *o = w->o;
  altar__worker_update_gates(w);
  altar__worker_lookahead_feed(w);
  altar__worker_forward_waiting(w, now);
  /* Read again: taking records in may have started tasks (forks), and a
   * wait measured from the turn's start would overshoot the poll. */
  now = altar_mono_ms();
  int wait = c->got_job || c->committing ? 0 : (int)(c->next_poll > now ? c->next_poll - now : 0);
  if (wait > CONSUME_WAIT_MAX_MS) wait = CONSUME_WAIT_MAX_MS;
  if (w->paused && wait > 0) {
    int wc = altar_backend_wait_change(o->backend, wait);
    if (wc == 1) c->next_poll = altar_mono_ms();
    if (wc >= 0) wait = 0;
  }
  altar_msg_t *m = NULL;
  altar_error_t e = {0};
  bool both = wait > 0 && !w->paused && w->n_tasks;
  int log_fd = both ? altar_transport_wait_fd(o->transport) : -1;
  int task_fd = log_fd >= 0 ? altar_backend_change_fd(o->backend) : -1;
  both = task_fd >= 0;
  int rc = altar_transport_consume(o->transport, both ? 0 : wait, &m, &e);
  if (both && rc == ALTAR_OK && !m && wait_log_and_tasks(c, log_fd, task_fd, wait))
    rc = altar_transport_consume(o->transport, 0, &m, &e);
  c->got_job = rc == ALTAR_OK && m;
  if (c->got_job) {
    altar__worker_take_record(w, m);
  } else if (rc != ALTAR_OK) {
    consume_failed(w, &e);
  }
  return c->got_job ? m : NULL;
}

/* Whether a task may have changed, without blocking: through the backend's
 * change descriptor (one poll() call, so asked even on turns that took a
 * record: a busy intake must not hold a finished task back until the next
 * interval), else wait_change on quiet turns only. */
static bool task_changed(worker_t *w, bool got_job) {
  int fd = altar_backend_change_fd(w->o->backend);
  if (fd >= 0) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    return poll(&pfd, 1, 0) > 0;
  }
  return !got_job && altar_backend_wait_change(w->o->backend, 0) == 1;
}

/* Phase: the backend's tasks. A turn with tasks out asks (without
 * blocking) whether one changed, so a completion is polled within this turn
 * rather than at the next interval (a watch-fed backend knows at once). */
static void phase_poll_backend(worker_t *w, loop_clock_t *c, int64_t now) {
  if (!w->paused && w->n_tasks && task_changed(w, c->got_job)) c->next_poll = now;
  if (now >= c->next_poll) {
    altar__worker_poll_tasks(w, -1, NULL);
    altar__worker_refresh_capacity(w);
    c->next_poll = altar_mono_ms() + c->poll_every;
  }
}

/* Phase: the log's callbacks, expired waits, leases, the no-partition
 * warning, and acknowledged reports. */
static void phase_housekeeping(worker_t *w, loop_clock_t *c, int64_t now) {
  altar_transport_poll(w->o->transport, 0);
  if (w->n_waits) altar__worker_waits_expire(w);
  altar__worker_leases_if_due(w);
  if (w->n_parts) {
    c->idle_since = now;
    c->warned_idle = false;
  } else if (!c->warned_idle && now - c->idle_since > IDLE_WARN_AFTER_MS) {
    altar__worker_warn_no_partition(w);
    c->warned_idle = true;
  }
  altar__worker_reap_acked(w);
}

/* Phase: gauges, and commits. Commits are batched: a late commit only means
 * a rerun after a crash, and the finished offsets above it ride in the
 * metadata anyway. A periodic round is spread over turns, a partition per
 * turn: a local commit is two fsyncs and a Kafka one a round trip, and 32
 * of them in one turn held every exit seen in that turn back by their sum. */
static void phase_metrics_and_commits(worker_t *w, loop_clock_t *c, int64_t now) {
  if (now >= c->next_metrics) {
    altar__worker_metrics_update(&w->metrics, &w->stats, altar__worker_in_flight(w), w->paused);
    refresh_kept_logs(w);
    c->next_metrics = now + METRICS_EVERY_MS;
  }
  if (w->commit_soon) {
    w->commit_soon = false;
    altar__worker_commit_all(w);
    c->committing = false;
    c->next_commit = altar_mono_ms() + c->commit_every;
  } else if (c->committing || now >= c->next_commit) {
    if (!c->committing) c->commit_at = 0;
    c->committing = !altar__worker_commit_some(w, &c->commit_at, COMMITS_PER_TURN);
    if (!c->committing) c->next_commit = altar_mono_ms() + c->commit_every;
  }
}

/* Phase: with exit_when_idle, true once nothing is read, in flight or owed
 * and the log has no more for us. */
static bool phase_idle_done(worker_t *w, const altar_msg_t *m) {
  if (!w->o->exit_when_idle || m || w->n_tasks || w->n_waits || w->outstanding || !w->n_parts || w->ahead.records)
    return false;
  bool done = false;
  altar_error_t ce = {0};
  return altar_transport_caught_up(w->o->transport, &done, &ce) == ALTAR_OK && done;
}

/* Leaves the group first (the partitions move to the others now, their
 * commits carrying the held bound), then lets what runs here finish. */
static void worker_drain(worker_t *w) {
  int64_t deadline = altar_mono_ms() + (w->o->drain_ms < 0 ? ALTAR_WORKER_DRAIN_MS_DEFAULT : w->o->drain_ms);
  altar_error_t le = {0};
  int lrc = altar_transport_leave(w->o->transport, &le);
  if (lrc != ALTAR_OK && lrc != ALTAR_ENOTSUP) altar__worker_log(w, "leaving the group: %s", le.msg);
  drain(w, deadline);
}

/* The last commit (skipped on a second stop signal, even one that came
 * during the drain), the heartbeat's goodbye, owed reports, and everything
 * worker_open took. */
static int worker_close(worker_t *w, altar__heartbeat_t *hb, altar_worker_stats_t *pstats, altar_error_t *err) {
  const altar_worker_opts_t *o = w->o;
  /* The last commit gets a few tries: no later loop would retry it. */
  if (!w->fatal && !(o->stop && *o->stop >= 2))
    for (int tries = 0; altar__worker_commit_all(w) && tries < FINAL_COMMIT_TRIES; tries++)
      altar_transport_poll(o->transport, FINAL_COMMIT_POLL_MS);
  altar__heartbeat_stop(hb);
  /* Reports still owed (a hard stop, a fatal error) are served now, while
   * their records and tasks exist, not later inside the caller's close. */
  if (w->outstanding) {
    altar_error_t fe = {0};
    if (altar_transport_flush(o->transport, EXIT_FLUSH_MS, &fe) != ALTAR_OK) altar__worker_log(w, "flush: %s", fe.msg);
  }
  /* Unsubscribe by closing is the caller's job; detach our callbacks now
   * (its close revokes what is owned, and nothing here would hear it). */
  altar_transport_detach(o->transport);
  altar__worker_metrics_update(&w->metrics, &w->stats, altar__worker_in_flight(w), w->paused);
  if (pstats) *pstats = w->stats;
  for (size_t i = 0; i < w->n_tasks; i++) altar__worker_task_free(w->tasks[i]);
  free(w->tasks);
  for (size_t i = 0; i < w->n_parts; i++) free(w->parts[i].topic);
  free(w->parts);
  altar__worker_pools_free(w);
  for (size_t i = 0; i < w->n_waits; i++) altar_msg_free(w->waits[i].msg);
  free(w->waits);
  altar__lookahead_free(&w->ahead);
  altar__peers_free(w->peers);
  free(w->load_pools);
  free(w->load_free);
  altar__cancel_set_free(&w->cancels);
  altar__offset_tracker_free(w->tracker);
  if (w->fatal) {
    if (err) *err = w->fatal_err;
    return w->fatal;
  }
  return ALTAR_OK;
}

int altar__worker_run(const altar_worker_opts_t *o, altar_worker_stats_t *pstats, altar_error_t *err) {
  if (!o || !o->transport || !o->backend || !o->topics || o->slots < 1)
    return altar_error_set(err, ALTAR_EINVAL, "worker: transport, backend, topics and slots >= 1 are required");
  worker_t w;
  int rc = worker_open(&w, o, err);
  if (rc) return rc;
  int64_t start = altar_mono_ms();
  loop_clock_t c = {.poll_every = o->poll_interval_ms > 0 ? o->poll_interval_ms : ALTAR_WORKER_POLL_MS_DEFAULT,
                    /* Each commit of the local log is two fsyncs, and one of Kafka's a
       * round trip, per partition: at 100 ms with 32 busy partitions they
       * cost more than the tasks. A later commit only means a rerun after a crash. */
                    .commit_every = o->commit_interval_ms > 0 ? o->commit_interval_ms : ALTAR_WORKER_COMMIT_MS_DEFAULT,
                    .next_poll = start,
                    .next_commit = start,
                    .next_metrics = start,
                    .idle_since = start};
  altar__heartbeat_t *hb = altar__heartbeat_start(o, w.worker_id);
  int stop = 0;
  /* One turn: read the clock, then each phase in order; intake reads it
   * again before it waits, and the turn after it (it may block). */
  while (!w.fatal) {
    int64_t now = altar_mono_ms();
    phase_fleet(&w, hb, now);
    if ((stop = phase_stop_asked(&w))) break;
    altar_msg_t *m = phase_intake(&w, &c, now);
    now = altar_mono_ms();
    phase_poll_backend(&w, &c, now);
    phase_housekeeping(&w, &c, now);
    phase_metrics_and_commits(&w, &c, now);
    if (phase_idle_done(&w, m)) {
      stop = 1;
      break;
    }
  }
  if (stop == 1 && !w.fatal) worker_drain(&w);
  return worker_close(&w, hb, pstats, err);
}
