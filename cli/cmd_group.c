/* `altar group members EVENT_ID`: the whole member list (and outputs) of
 * one group event, however wide: its head and, for a group too wide for one
 * message, its pages, read from the ready and dead topics. */
#include "cli.h"
#include "fleet_common.h"

#include "altar/codec.h"
#include "altar/transport.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
  fprintf(out,
          "usage: altar group members [--config FILE] [--outputs] [--json] EVENT_ID\n\n"
          "Prints every member of the group event EVENT_ID (the event_id of a fired,\n"
          "dead-lettered or cancelled group), one per line as BACKEND:EXTERNAL_ID, in the\n"
          "event's order; with --outputs, the members' outputs instead (uri TAB logical\n"
          "path). --json prints one JSON object per line: the handle, or the output.\n"
          "A group too wide for one message is published as a head and pages\n"
          "(schemas/README.md, \"group events of any width\"); this reads both from the\n"
          "ready and dead topics and prints the whole list.\n\n"
          "exit status: 3 no such event on the topics, 4 the event's pages are not all there.\n%s",
          ALTAR_CLI_EXIT_HELP);
}

typedef struct found {
  const char *id;
  altar_group_event_t g; /* the head, pages taken into it */
  bool have;
} found_t;

static void on_msg(found_t *f, const altar_msg_t *m) {
  if (!m->value) return;
  altar_group_event_t d = {0};
  if (!f->have && altar_decode_group(m->value, m->value_len, &d, NULL) == ALTAR_OK && d.event_id &&
      !strcmp(d.event_id, f->id)) {
    f->g = d;
    f->have = true;
    return;
  }
  altar_group_event_clear(&d);
  if (f->have && f->g.page < f->g.pages && altar_decode_group_page(m->value, m->value_len, &d, NULL) == ALTAR_OK &&
      !strcmp(d.event_id, f->id))
    (void)altar_group_event_take_page(&f->g, &d);
  altar_group_event_clear(&d);
}

/* Reads topic from its beginning to its end as of now into f. */
static int scan(altar_config_t *cfg, const char *topic, found_t *f) {
  altar_transport_t *t = altar_cli_open_transport(cfg, NULL);
  if (!t) return -1;
  altar_topic_list_t *tl = NULL;
  altar_error_t err = {0};
  int rc = altar_transport_list_topics(t, topic, 10000, &tl, &err);
  if (rc == ALTAR_ENOTFOUND) {
    altar_transport_close(t);
    return 0;
  }
  size_t np = rc ? 0 : tl->topics[0].n_partitions, left = 0;
  altar_tp_t *tps = calloc(np ? np : 1, sizeof *tps);
  int64_t *ends = calloc(np ? np : 1, sizeof *ends);
  for (size_t i = 0; tps && ends && i < np; i++) {
    tps[i] = (altar_tp_t){topic, tl->topics[0].partitions[i].partition, ALTAR_OFFSET_BEGINNING};
    ends[i] = tl->topics[0].partitions[i].end;
    left += ends[i] > tl->topics[0].partitions[i].beginning;
  }
  if (rc || !tps || !ends) {
    fprintf(stderr, "altar group: cannot read %s: %s\n", topic, rc ? err.msg : "out of memory");
    rc = -1;
  } else if (left && altar_transport_assign(t, tps, np, &err)) {
    fprintf(stderr, "altar group: cannot read %s: %s\n", topic, err.msg);
    rc = -1;
    left = 0;
  }
  while (left && !(f->have && f->g.page == f->g.pages)) {
    altar_msg_t *m = NULL;
    if (altar_transport_consume(t, 1000, &m, &err) || !m) continue;
    on_msg(f, m);
    for (size_t i = 0; i < np; i++)
      if (tps[i].partition == m->partition && m->offset + 1 == ends[i]) left--;
    altar_msg_free(m);
  }
  free(tps);
  free(ends);
  altar_topic_list_free(tl);
  altar_transport_close(t);
  return rc;
}

static void print_json(json_t *o) {
  char *s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  if (s) puts(s);
  free(s);
  json_decref(o);
}

static json_t *jstr(const char *s) { return s ? json_string(s) : json_null(); }

static int members(int argc, char **argv) {
  altar_config_t cfg;
  argc = altar_cli_fleet_config(argc, argv, &cfg);
  const char *id;
  bool json, outputs;
  int arc = altar_cli_id_and_view_flags(argc, argv, "group", usage, &cfg, &id, &json, &outputs);
  if (arc) return arc;
  found_t f = {.id = id};
  int rc = scan(&cfg, cfg.topics.ready, &f);
  if (!rc && !(f.have && f.g.page == f.g.pages) && strcmp(cfg.topics.ready, cfg.topics.dead))
    rc = scan(&cfg, cfg.topics.dead, &f);
  int out = rc ? 1 : 0;
  if (!rc && !f.have) {
    fprintf(stderr, "altar group: no group event %s on %s or %s\n", id, cfg.topics.ready, cfg.topics.dead);
    out = 3;
  } else if (!rc && f.g.page != f.g.pages) {
    fprintf(stderr, "altar group: event %s: %zu of its %zu pages found (%zu of %zu members)\n", id, f.g.page, f.g.pages,
            f.g.n_shards, f.g.members_total);
    out = 4;
  }
  if (!out && outputs) {
    for (size_t i = 0; i < f.g.n_outputs; i++) {
      const altar_transfer_t *o = &f.g.outputs[i];
      if (json)
        print_json(json_pack("{s:o, s:o, s:o, s:o}", "uri", jstr(o->uri), "logical_path", jstr(o->logical_path),
                             "digest", jstr(o->digest), "locality_key", jstr(o->locality_key)));
      else printf("%s\t%s\n", o->uri, o->logical_path);
    }
  } else if (!out) {
    for (size_t i = 0; i < f.g.n_shards; i++) {
      const altar_handle_t *h = &f.g.shards[i];
      if (json) {
        char *s = altar_handle_to_json(h, NULL);
        if (s) puts(s);
        free(s);
      } else {
        printf("%s:%s\n", h->backend, h->external_id);
      }
    }
  }
  altar_group_event_clear(&f.g);
  altar_config_clear(&cfg);
  return out;
}

int altar_cmd_group(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "members")) return members(argc - 1, argv + 1);
  fprintf(stderr, "altar group: unknown subcommand '%s' (members)\n", argv[1]);
  return 2;
}
