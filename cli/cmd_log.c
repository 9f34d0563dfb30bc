/* altar log: produce, consume and inspect topics on any transport (the kcat
 * of altar). Altar messages print decoded as JSON lines, others as text. */
#include "altar/codec.h"
#include "altar/fleet.h"
#include "altar/ledger.h"
#include "altar/transport.h"
#include "cli.h"
#include "dashboard/fleet_view.h"
#include "fleet_common.h"
#include "reconciler/input_offsets.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LINE_MAX_BYTES (16u << 20)

static void usage(FILE *out) {
  fprintf(out,
          "usage: altar log <command> [--config FILE] [options]\n\n"
          "commands:\n"
          "  produce   --topic T [--key-delimiter C] [--partition N] [--encode TYPE]\n"
          "            [--partitions N]: one record per line of stdin (key before the\n"
          "            delimiter); a missing topic is created with N partitions (topics.partitions, 32); with\n"
          "            --encode job|status|group|spec|record each line is that message as JSON,\n"
          "            sent as msgpack\n"
          "  consume   --topic T [--group G] [--from-beginning] [--exit] [--key-delimiter C]\n"
          "            [--max N] [--headers]; altar messages print as JSON lines, others as\n"
          "            text. Without --group it reads every partition from the end (only new\n"
          "            records) or, with --from-beginning, from the first; with --group from\n"
          "            the group's committed offsets (the beginning for a new group), committing\n"
          "            as it goes. --exit stops once caught up. --headers prints each record's\n"
          "            headers as a JSON object and a tab before it (always on the DLQ topic,\n"
          "            whose altar.dlq.reason says why the record is there)\n"
          "  topics    [--topic T] [--json]: partitions with beginning and end offsets\n"
          "  offsets   --group G [--topic T] [--json]: end, committed offset and lag per partition\n"
          "            (for altar.reconcilers: the status topic, offsets from the ledger, --ledger DIR)\n"
          "  create-topic --topic T [--partitions N]\n"
          "  delete-records --topic T --before OFFSET|end [--partition N]: deletes the records\n"
          "            before OFFSET (end: every record so far) of one partition or all, as\n"
          "            retention would (Kafka: DeleteRecords; local: whole segments below it)\n\n"
          "transport options (also --dir DIR for --log-dir DIR):\n%s",
          altar_cli_fleet_flags(ALTAR_CLI_FLAGS_PARTITIONS | ALTAR_CLI_FLAGS_LEDGER));
  fputs(ALTAR_CLI_EXIT_HELP, out);
}

typedef struct opts {
  const char *topic, *group, *key_delim, *encode, *before;
  int32_t partition, partitions;
  bool from_beginning, exit_at_end, json, headers;
  bool dlq; /* the topic is the config's DLQ: headers always shown */
  long long max;
} opts_t;

static int parse_i64(const char *flag, const char *v, long long min, long long max, long long *pout) {
  char *end = NULL;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || !end || end == v || *end || x < min || x > max) {
    fprintf(stderr, "altar log: %s: expected an integer in [%lld, %lld], got '%s'\n", flag, min, max, v);
    return -1;
  }
  *pout = x;
  return 0;
}

/* Parses the subcommand's own flags; the transport ones were taken already. */
static int parse_opts(int argc, char **argv, opts_t *o) {
  memset(o, 0, sizeof *o);
  o->partition = ALTAR_PARTITION_ANY;
  o->partitions = 0;
  o->max = -1;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    long long x;
    if (!strcmp(a, "--from-beginning")) o->from_beginning = true;
    else if (!strcmp(a, "--exit")) o->exit_at_end = true;
    else if (!strcmp(a, "--json")) o->json = true;
    else if (!strcmp(a, "--headers")) o->headers = true;
    else if (!strcmp(a, "--topic") || !strcmp(a, "--group") || !strcmp(a, "--key-delimiter") ||
             !strcmp(a, "--partition") || !strcmp(a, "--partitions") || !strcmp(a, "--max") || !strcmp(a, "--encode") ||
             !strcmp(a, "--before")) {
      if (!v) {
        fprintf(stderr, "altar log: %s needs a value\n", a);
        return -1;
      }
      i++;
      if (!strcmp(a, "--topic")) o->topic = v;
      else if (!strcmp(a, "--before")) {
        if (strcmp(v, "end") && parse_i64(a, v, 0, INT64_MAX, &x)) return -1;
        o->before = v;
      } else if (!strcmp(a, "--encode")) {
        altar_msg_type_t mt;
        if (altar_msg_type_parse(v, &mt) != 0) {
          fprintf(stderr, "altar log: --encode: unknown message type '%s'\n", v);
          return -1;
        }
        o->encode = v;
      } else if (!strcmp(a, "--group")) o->group = v;
      else if (!strcmp(a, "--key-delimiter")) {
        if (strlen(v) != 1) {
          fprintf(stderr, "altar log: --key-delimiter: expected one character\n");
          return -1;
        }
        o->key_delim = v;
      } else if (!strcmp(a, "--partition")) {
        if (parse_i64(a, v, 0, 100000, &x)) return -1;
        o->partition = (int32_t)x;
      } else if (!strcmp(a, "--partitions")) {
        if (parse_i64(a, v, 1, 10000, &x)) return -1;
        o->partitions = (int32_t)x;
      } else if (parse_i64(a, v, 0, INT64_MAX, &o->max)) {
        return -1;
      }
    } else {
      fprintf(stderr, "altar log %s: unknown option '%s' (see --help)\n", argv[1], a);
      return -1;
    }
  }
  return 0;
}

static int need(const char *what, const char *v) {
  if (v) return 0;
  fprintf(stderr, "altar log: %s is required\n", what);
  return -1;
}

/* ---- produce ------------------------------------------------------------ */

/* Creates the topic when it is missing (a broker may not auto-create). */
static int ensure_topic(altar_transport_t *t, const opts_t *o) {
  altar_topic_list_t *l = NULL;
  altar_error_t err = {0};
  int rc = altar_transport_list_topics(t, o->topic, 30000, &l, &err);
  altar_topic_list_free(l);
  if (rc == 0) return 0;
  if (rc != ALTAR_ENOTFOUND) {
    fprintf(stderr, "altar log: %s\n", err.msg);
    return -1;
  }
  int32_t n = o->partitions ? o->partitions : 4;
  rc = altar_transport_create_topic(t, o->topic, n, &err);
  if (rc == 0) fprintf(stderr, "altar log: created topic %s with %d partitions\n", o->topic, (int)n);
  else if (rc != ALTAR_EEXIST) {
    fprintf(stderr, "altar log: create topic %s: %s\n", o->topic, err.msg);
    return -1;
  }
  return 0;
}

typedef struct prod_stats {
  long long ok, failed;
} prod_stats_t;

static void on_delivery(altar_transport_t *t, const altar_delivery_t *dr, void *ctx) {
  (void)t;
  prod_stats_t *s = ctx;
  if (dr->err) {
    s->failed++;
    fprintf(stderr, "altar log produce: %s: %s\n", dr->topic, dr->errstr ? dr->errstr : altar_strerror(dr->err));
  } else {
    s->ok++;
  }
}

static int cmd_produce(altar_config_t *cfg, const opts_t *o) {
  if (need("--topic", o->topic)) return 2;
  altar_error_t nerr = {0};
  if (altar_transport_check_name("--topic", o->topic, &nerr) != 0) {
    fprintf(stderr, "altar log produce: %s\n", nerr.msg);
    return 2;
  }
  prod_stats_t st = {0};
  altar_transport_opts_t topts = {.on_delivery = on_delivery, .delivery_ctx = &st};
  altar_transport_t *t = altar_cli_open_transport(cfg, &topts);
  if (!t) return 1;
  if (ensure_topic(t, o) != 0) {
    altar_transport_close(t);
    return 1;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  long long lineno = 0;
  int rc = 0;
  altar_error_t err = {0};
  while ((n = getline(&line, &cap, stdin)) >= 0) {
    lineno++;
    if ((size_t)n > LINE_MAX_BYTES) {
      fprintf(stderr, "altar log produce: stdin line %lld: longer than %u bytes\n", lineno, LINE_MAX_BYTES);
      rc = 1;
      break;
    }
    if (n > 0 && line[n - 1] == '\n') line[--n] = '\0';
    altar_produce_rec_t rec = {.topic = o->topic, .partition = o->partition, .value = line, .value_len = (size_t)n};
    if (o->key_delim) {
      char *d = memchr(line, o->key_delim[0], (size_t)n);
      if (d) {
        rec.key = line;
        rec.key_len = (size_t)(d - line);
        rec.value = d + 1;
        rec.value_len = (size_t)n - rec.key_len - 1;
      }
    }
    altar_buf_t enc = {0};
    if (o->encode) {
      altar_msg_type_t mt;
      altar_msg_type_parse(o->encode, &mt);
      if (altar_codec_json_to_msgpack(mt, rec.value, rec.value_len, &enc, &err) != 0) {
        fprintf(stderr, "altar log produce: stdin line %lld: %s\n", lineno, err.msg);
        altar_buf_free(&enc);
        rc = 1;
        break;
      }
      rec.value = enc.data;
      rec.value_len = enc.len;
    }
    int prc;
    while ((prc = altar_transport_produce(t, &rec, &err)) == ALTAR_EAGAIN) altar_transport_poll(t, 100);
    altar_buf_free(&enc);
    if (prc) {
      fprintf(stderr, "altar log produce: stdin line %lld: %s\n", lineno, err.msg);
      rc = 1;
      break;
    }
    altar_transport_poll(t, 0);
  }
  free(line);
  if (altar_transport_flush(t, 60000, &err) != 0) {
    fprintf(stderr, "altar log produce: %s\n", err.msg);
    rc = 1;
  }
  altar_transport_close(t);
  fprintf(stderr, "altar log produce: %lld acknowledged, %lld failed (topic %s)\n", st.ok, st.failed, o->topic);
  return rc || st.failed ? 1 : 0;
}

/* ---- consume ------------------------------------------------------------ */

typedef struct cons_state {
  const opts_t *o;
  int32_t parts[1024];
  int64_t next[1024]; /* offset after the last one printed, -1 = none */
  size_t n;
  long long since_commit;
} cons_state_t;

static int64_t *slot(cons_state_t *s, int32_t p) {
  for (size_t i = 0; i < s->n; i++)
    if (s->parts[i] == p) return &s->next[i];
  if (s->n == sizeof s->parts / sizeof s->parts[0]) return NULL;
  s->parts[s->n] = p;
  s->next[s->n] = -1;
  return &s->next[s->n++];
}

static void commit_all(altar_transport_t *t, cons_state_t *s, const altar_tp_t *only, size_t n_only) {
  if (!s->o->group) return;
  for (size_t i = 0; i < s->n; i++) {
    if (s->next[i] < 0) continue;
    bool in = !only;
    for (size_t k = 0; only && k < n_only; k++) in |= only[k].partition == s->parts[i];
    if (!in) continue;
    altar_error_t err = {0};
    if (altar_transport_commit(t, s->o->topic, s->parts[i], s->next[i], "altar log consume", &err) != 0)
      fprintf(stderr, "altar log consume: commit: %s\n", err.msg);
    else s->next[i] = -1;
  }
  s->since_commit = 0;
}

static void on_rebalance(altar_transport_t *t, altar_rebalance_kind_t kind, const altar_tp_t *parts, size_t n,
                         void *ctx) {
  cons_state_t *s = ctx;
  if (kind == ALTAR_REBALANCE_REVOKE) {
    commit_all(t, s, parts, n);
    return;
  }
  if (!s->o->from_beginning) return;
  for (size_t i = 0; i < n; i++) {
    altar_error_t err = {0};
    if (altar_transport_seek(t, parts[i].topic, parts[i].partition, ALTAR_OFFSET_BEGINNING, &err) != 0)
      fprintf(stderr, "altar log consume: seek: %s\n", err.msg);
  }
}

static bool printable(const void *p, size_t n) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++)
    if ((c[i] < 0x20 && c[i] != '\t') || c[i] == 0x7f) return false;
  return true;
}

static void print_bytes(const void *p, size_t n) {
  if (printable(p, n)) {
    fwrite(p, 1, n, stdout);
    return;
  }
  /* Binary: JSON string escapes keep one record per line. */
  json_t *s = json_stringn_nocheck(p, n);
  char *txt = s ? json_dumps(s, JSON_ENCODE_ANY | JSON_ENSURE_ASCII) : NULL;
  if (txt) fputs(txt, stdout);
  free(txt);
  json_decref(s);
}

/* The record's headers as one JSON object, then a tab. */
static void print_headers(const altar_msg_t *m) {
  json_t *h = json_object();
  for (size_t i = 0; h && i < m->n_headers; i++) {
    const altar_header_t *hd = &m->headers[i];
    json_t *v = hd->value ? json_stringn(hd->value, hd->value_len) : json_null();
    if (!v) v = json_stringn_nocheck(hd->value, hd->value_len); /* not UTF-8: kept escaped */
    json_object_set_new(h, hd->name, v);
  }
  char *txt = h ? json_dumps(h, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
  fputs(txt ? txt : "{}", stdout);
  fputc('\t', stdout);
  free(txt);
  json_decref(h);
}

static void print_msg(const opts_t *o, const altar_msg_t *m) {
  if (o->headers || o->dlq) print_headers(m);
  if (o->key_delim) {
    if (m->key) print_bytes(m->key, m->key_len);
    fputc(o->key_delim[0], stdout);
  }
  char type[32];
  altar_msg_type_t mt;
  if (m->value && altar_peek_type(m->value, m->value_len, type, sizeof type) == 0 &&
      altar_msg_type_parse(type, &mt) == 0) {
    altar_error_t err = {0};
    char *js = altar_codec_msgpack_to_json(mt, m->value, m->value_len, &err);
    if (js) {
      fputs(js, stdout);
      fputc('\n', stdout);
      free(js);
      return;
    }
    fprintf(stderr, "altar log consume: %s/%d@%lld: undecodable %s message: %s\n", m->topic, (int)m->partition,
            (long long)m->offset, type, err.msg);
  }
  if (m->value) print_bytes(m->value, m->value_len);
  fputc('\n', stdout);
}

/* Without a group: every partition of the topic, no commits. */
static int assign_all(altar_transport_t *t, const opts_t *o) {
  altar_topic_list_t *l = NULL;
  altar_error_t err = {0};
  if (altar_transport_list_topics(t, o->topic, 30000, &l, &err) != 0) {
    fprintf(stderr, "altar log consume: %s\n", err.msg);
    return -1;
  }
  size_t n = l->n_topics ? l->topics[0].n_partitions : 0;
  altar_tp_t *tps = calloc(n ? n : 1, sizeof *tps);
  for (size_t i = 0; tps && i < n; i++)
    tps[i] = (altar_tp_t){o->topic, l->topics[0].partitions[i].partition,
                          o->from_beginning ? ALTAR_OFFSET_BEGINNING : ALTAR_OFFSET_END};
  int rc = tps ? altar_transport_assign(t, tps, n, &err) : ALTAR_ENOMEM;
  if (rc) fprintf(stderr, "altar log consume: assign: %s\n", err.msg);
  free(tps);
  altar_topic_list_free(l);
  return rc ? -1 : 0;
}

static int cmd_consume(altar_config_t *cfg, const opts_t *o) {
  if (need("--topic", o->topic)) return 2;
  altar_transport_t *t = altar_cli_open_transport(cfg, NULL);
  if (!t) return 1;
  cons_state_t *s = calloc(1, sizeof *s);
  if (!s) {
    altar_transport_close(t);
    return 1;
  }
  s->o = o;
  altar_error_t err = {0};
  int rc = 0;
  altar_topic_list_t *tl = NULL;
  if (altar_transport_list_topics(t, o->topic, 30000, &tl, &err) != 0) {
    fprintf(stderr, "altar log consume: %s\n", err.msg);
    rc = 1;
  }
  altar_topic_list_free(tl);
  if (!rc && o->group) {
    const char *topics[] = {o->topic};
    if (altar_transport_subscribe(t, o->group, topics, 1, on_rebalance, s, &err) != 0) {
      fprintf(stderr, "altar log consume: %s\n", err.msg);
      rc = 1;
    }
  } else if (!rc && assign_all(t, o) != 0) {
    rc = 1;
  }
  /* Say where reading starts: from the end, an --exit run prints only what
   * arrives while it runs, which looks like an empty topic otherwise. */
  if (!rc) {
    if (o->group)
      fprintf(stderr, "altar log consume: %s as group %s, from its committed offsets (the beginning for a new group)\n",
              o->topic, o->group);
    else if (o->from_beginning)
      fprintf(stderr, "altar log consume: %s from the beginning of every partition\n", o->topic);
    else
      fprintf(stderr, "altar log consume: %s from the end of every partition: only records produced from now on%s\n",
              o->topic, o->exit_at_end ? "; with --exit that is usually none (add --from-beginning or --group G)" : "");
  }
  static volatile sig_atomic_t stop;
  stop = 0;
  altar_cli_install_stop_signals(&stop);
  long long printed = 0;
  int idle = 0, errors = 0;
  while (!rc && !stop && (o->max < 0 || printed < o->max)) {
    altar_msg_t *m = NULL;
    int crc = altar_transport_consume(t, 500, &m, &err);
    if (crc) {
      /* A corrupt record or a broker hiccup: report and go on. */
      fprintf(stderr, "altar log consume: %s\n", err.msg);
      if (o->exit_at_end && ++errors >= 20) {
        fprintf(stderr, "altar log consume: giving up after %d errors in a row\n", errors);
        rc = 1;
      }
      continue;
    }
    errors = 0;
    if (m) {
      idle = 0;
      print_msg(o, m);
      /* Following, each record goes out as it comes: a pipe would otherwise
       * hold it until the buffer fills or the log falls quiet. */
      if (!o->exit_at_end) fflush(stdout);
      printed++;
      int64_t *nx = slot(s, m->partition);
      if (nx) *nx = m->offset + 1;
      if (o->group && ++s->since_commit >= 1000) commit_all(t, s, NULL, 0);
      altar_msg_free(m);
      continue;
    }
    fflush(stdout);
    if (!o->exit_at_end) continue;
    bool done = false;
    int urc = altar_transport_caught_up(t, &done, &err);
    if (urc == ALTAR_ENOTSUP) done = ++idle >= 6; /* about 3 s with nothing new */
    else if (urc) fprintf(stderr, "altar log consume: %s\n", err.msg);
    if (done) break;
  }
  fflush(stdout);
  if (!rc && o->exit_at_end && !printed)
    fprintf(stderr, "altar log consume: no records%s\n",
            o->group || o->from_beginning ? "" : " arrived after the start (it began at the end)");
  commit_all(t, s, NULL, 0);
  altar_transport_close(t);
  free(s);
  return rc;
}

/* ---- topics / offsets / create-topic ------------------------------------ */

static int cmd_topics(altar_config_t *cfg, const opts_t *o) {
  altar_transport_t *t = altar_cli_open_transport(cfg, NULL);
  if (!t) return 1;
  altar_topic_list_t *l = NULL;
  altar_error_t err = {0};
  int rc = altar_transport_list_topics(t, o->topic, 30000, &l, &err);
  if (rc) {
    fprintf(stderr, "altar log topics: %s\n", err.msg);
    altar_transport_close(t);
    return 1;
  }
  if (o->json) {
    json_t *arr = json_array();
    for (size_t i = 0; i < l->n_topics; i++) {
      json_t *parts = json_array();
      for (size_t j = 0; j < l->topics[i].n_partitions; j++) {
        const altar_partition_info_t *p = &l->topics[i].partitions[j];
        json_array_append_new(parts, json_pack("{s:i,s:I,s:I}", "partition", (int)p->partition, "beginning",
                                               (json_int_t)p->beginning, "end", (json_int_t)p->end));
      }
      json_array_append_new(arr, json_pack("{s:s,s:o}", "topic", l->topics[i].name, "partitions", parts));
    }
    char *txt = json_dumps(arr, JSON_COMPACT);
    if (txt) puts(txt);
    free(txt);
    json_decref(arr);
  } else {
    printf("%-40s %9s %14s %14s\n", "TOPIC", "PARTITION", "BEGINNING", "END");
    for (size_t i = 0; i < l->n_topics; i++)
      for (size_t j = 0; j < l->topics[i].n_partitions; j++) {
        const altar_partition_info_t *p = &l->topics[i].partitions[j];
        printf("%-40s %9d %14lld %14lld\n", l->topics[i].name, (int)p->partition, (long long)p->beginning,
               (long long)p->end);
      }
  }
  altar_topic_list_free(l);
  altar_transport_close(t);
  return 0;
}

/* The reconciler keeps its input offsets in its ledger, atomically with what
 * they caused, and commits them to the log only on revoke and at shutdown:
 * the ledger's are the current ones. Read-only, so a running reconciler is
 * fine. */
static int reconciler_offsets(const altar_config_t *cfg, altar_lag_list_t *l) {
  altar_error_t err = {0};
  /* One implementation with the dashboard's lag, so the two always agree. */
  if (altar__fleet_reconciler_offsets(cfg->ledger_path, l, &err)) {
    fprintf(stderr, "altar log offsets: group %s keeps its offsets in its ledger; %s: %s (--ledger DIR)\n",
            ALTAR_RECONCILER_GROUP, cfg->ledger_path, err.msg);
    return -1;
  }
  fprintf(stderr, "altar log offsets: %s: offsets as stored in the ledger %s\n", ALTAR_RECONCILER_GROUP,
          cfg->ledger_path);
  return 0;
}

static int cmd_offsets(altar_config_t *cfg, const opts_t *o) {
  if (need("--group", o->group)) return 2;
  altar_transport_t *t = altar_cli_open_transport(cfg, NULL);
  if (!t) return 1;
  altar_lag_list_t *l = NULL;
  altar_error_t err = {0};
  /* The reconcilers read the status topic; name it, or a group that has not
   * committed on the log yet would list no topic at all. */
  const char *topic = o->topic;
  if (!topic && !strcmp(o->group, ALTAR_RECONCILER_GROUP)) topic = cfg->topics.status;
  if (altar_transport_lag(t, o->group, topic, 30000, &l, &err) != 0) {
    fprintf(stderr, "altar log offsets: %s\n", err.msg);
    altar_transport_close(t);
    return 1;
  }
  if (!strcmp(o->group, ALTAR_RECONCILER_GROUP) && reconciler_offsets(cfg, l)) {
    altar_lag_list_free(l);
    altar_transport_close(t);
    return 1;
  }
  if (o->json) {
    json_t *arr = json_array();
    for (size_t i = 0; i < l->n; i++) {
      const altar_lag_entry_t *e = &l->entries[i];
      json_t *c = e->committed == ALTAR_OFFSET_INVALID ? json_null() : json_integer(e->committed);
      json_array_append_new(arr, json_pack("{s:s,s:i,s:I,s:o,s:I,s:s?}", "topic", e->topic, "partition",
                                           (int)e->partition, "end", (json_int_t)e->end, "committed", c, "lag",
                                           (json_int_t)e->lag, "metadata", e->metadata));
    }
    char *txt = json_dumps(arr, JSON_COMPACT);
    if (txt) puts(txt);
    free(txt);
    json_decref(arr);
  } else {
    printf("%-40s %9s %14s %14s %10s\n", "TOPIC", "PARTITION", "END", "COMMITTED", "LAG");
    for (size_t i = 0; i < l->n; i++) {
      const altar_lag_entry_t *e = &l->entries[i];
      char c[32];
      if (e->committed == ALTAR_OFFSET_INVALID) snprintf(c, sizeof c, "-");
      else snprintf(c, sizeof c, "%lld", (long long)e->committed);
      printf("%-40s %9d %14lld %14s %10lld\n", e->topic, (int)e->partition, (long long)e->end, c, (long long)e->lag);
    }
  }
  altar_lag_list_free(l);
  altar_transport_close(t);
  return 0;
}

static int cmd_create_topic(altar_config_t *cfg, const opts_t *o) {
  if (need("--topic", o->topic)) return 2;
  altar_transport_t *t = altar_cli_open_transport(cfg, NULL);
  if (!t) return 1;
  altar_error_t err = {0};
  int rc = altar_transport_create_topic(t, o->topic, o->partitions ? o->partitions : 4, &err);
  if (rc) fprintf(stderr, "altar log create-topic: %s\n", err.msg);
  altar_transport_close(t);
  return rc ? 1 : 0;
}

static int cmd_delete_records(altar_config_t *cfg, const opts_t *o) {
  if (need("--topic", o->topic) || need("--before", o->before)) return 2;
  altar_transport_t *t = altar_cli_open_transport(cfg, NULL);
  if (!t) return 1;
  altar_error_t err = {0};
  altar_topic_list_t *tl = NULL;
  int rc = altar_transport_list_topics(t, o->topic, 10000, &tl, &err);
  for (size_t i = 0; !rc && i < tl->topics[0].n_partitions; i++) {
    const altar_partition_info_t *pi = &tl->topics[0].partitions[i];
    if (o->partition != ALTAR_PARTITION_ANY && pi->partition != o->partition) continue;
    int64_t before = !strcmp(o->before, "end") ? pi->end : strtoll(o->before, NULL, 10), beginning = -1;
    rc = altar_transport_delete_records(t, o->topic, pi->partition, before, &beginning, &err);
    if (!rc)
      printf("%s %d: beginning %lld (was %lld), end %lld\n", o->topic, (int)pi->partition, (long long)beginning,
             (long long)pi->beginning, (long long)pi->end);
  }
  if (rc) fprintf(stderr, "altar log delete-records: %s\n", err.msg);
  altar_topic_list_free(tl);
  altar_transport_close(t);
  return rc ? 1 : 0;
}

int altar_cmd_log(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    }
  static const char *const cmds[] = {"produce", "consume", "topics", "offsets", "create-topic", "delete-records"};
  bool known = false;
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) known |= !strcmp(argv[1], cmds[i]);
  if (!known) {
    fprintf(stderr, "altar log: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
  }
  /* --dir is this command's short name for --log-dir. */
  char **args = calloc((size_t)argc + 1, sizeof *args);
  if (!args) return 1;
  args[0] = argv[0];
  for (int i = 1; i < argc; i++) args[i] = !strcmp(argv[i], "--dir") ? "--log-dir" : argv[i];
  altar_config_t cfg;
  int n = altar_cli_fleet_config(argc, args, &cfg);
  int rc = 2;
  opts_t o;
  if (n >= 0 && parse_opts(n, args, &o) == 0) {
    const char *c = argv[1];
    /* --partitions is a fleet flag (topics.partitions): it reached cfg. */
    if (!o.partitions) o.partitions = cfg.topic_partitions;
    o.dlq = o.topic && cfg.topics.dlq && !strcmp(o.topic, cfg.topics.dlq);
    /* Reading commands create nothing: not even the local log's directories. */
    bool reads = strcmp(c, "produce") && strcmp(c, "create-topic");
    if (reads && (rc = altar_cli_require_existing_log(&cfg, "log"))) {
      /* rc is the exit code */
    } else if (!strcmp(c, "produce")) rc = cmd_produce(&cfg, &o);
    else if (!strcmp(c, "consume")) rc = cmd_consume(&cfg, &o);
    else if (!strcmp(c, "topics")) rc = cmd_topics(&cfg, &o);
    else if (!strcmp(c, "offsets")) rc = cmd_offsets(&cfg, &o);
    else if (!strcmp(c, "delete-records")) rc = cmd_delete_records(&cfg, &o);
    else rc = cmd_create_topic(&cfg, &o);
  }
  altar_config_clear(&cfg);
  free(args);
  return rc;
}
