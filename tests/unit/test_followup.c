/* Follow-up stages: the `then:` template's strict checks (file, line,
 * field), its instantiation for a group event (labels carried, outputs as
 * inputs, identity from the event id), and the group event's outputs on
 * the wire. */
#include "altar/codec.h"
#include "altar/followup.h"
#include "altar/groups.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const BASE =
    "groups:\n"
    "  train:\n"
    "    group_by: [job_id, model_id]\n"
    "    ready_when: single\n"
    "    then:\n"
    "      kind: ensemble\n"
    "      image: img-{{model_id}}\n"
    "      command: [sh, -c, 'merge ${HOME} {{inputs}} > out/{{job_id}}-{{model_id}}']\n"
    "      labels: {stage: ensemble, of: '{{group_key}}'}\n"
    "      outputs: [{uri: 'file:///r/{{model_id}}.txt', logical_path: 'out/{{job_id}}-{{model_id}}'}]\n"
    "      timeout_s: 30\n"
    "  ensemble:\n"
    "    group_by: [job_id]\n"
    "    ready_when: {count_at_least: 2}\n";

static int load(const char *yaml, altar_group_specs_t *s, altar_error_t *err) {
  memset(s, 0, sizeof *s);
  return altar_group_specs_load_string(yaml, strlen(yaml), "groups.yaml", s, err);
}

static void bad(const char *yaml, const char *n1, const char *n2) {
  altar_group_specs_t s;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(load(yaml, &s, &err), ALTAR_ECONFIG);
  if (n1 && !strstr(err.msg, n1)) fprintf(stderr, "want '%s' in: %s\n", n1, err.msg);
  if (n2 && !strstr(err.msg, n2)) fprintf(stderr, "want '%s' in: %s\n", n2, err.msg);
  CU_ASSERT(!n1 || strstr(err.msg, n1) != NULL);
  CU_ASSERT(!n2 || strstr(err.msg, n2) != NULL);
  altar_group_specs_clear(&s);
}

static void test_config_errors(void) {
  const char *head = "groups:\n  t:\n    group_by: [job_id, m]\n    ready_when: single\n    then:\n";
  const char *tail = "  n:\n    group_by: [job_id]\n    ready_when: single\n";
  char y[2048];
#define BAD(body, n1, n2)                                                                                              \
  do {                                                                                                                 \
    snprintf(y, sizeof y, "%s%s%s", head, body, tail);                                                                 \
    bad(y, n1, n2);                                                                                                    \
  } while (0)
  BAD("      image: x\n      command: [a]\n", ":6: groups.t.then.kind", "missing");
  BAD("      kind: n\n      command: [a]\n", "groups.t.then.image", "missing");
  BAD("      kind: n\n      image: x\n", "groups.t.then.command", "list");
  BAD("      kind: n\n      image: x\n      command: []\n", ":8: groups.t.then.command", "must not be empty");
  BAD("      kind: n\n      image: x\n      command: [a, '{{modle}}']\n", ":8: groups.t.then.command[1]",
      "unknown placeholder {{modle}}");
  BAD("      kind: n\n      image: x\n      command: [a, '{{m']\n", "groups.t.then.command[1]", "without its");
  BAD("      kind: n\n      image: x\n      command: [a]\n      labels: {altar.after: x}\n",
      "groups.t.then.labels.altar.after", "set by altar");
  BAD("      kind: n\n      image: x\n      command: [a]\n      outputs: [{uri: u}]\n",
      "groups.t.then.outputs[0].logical_path", "missing");
  BAD("      kind: n\n      image: x\n      command: [a]\n      timeout_s: 0\n", ":9: groups.t.then.timeout_s",
      "must be in 1..");
  BAD("      kind: n\n      image: x\n      command: [a]\n      comand: [b]\n", ":9: groups.t.then",
      "unknown key 'comand'");
  BAD("      kind: n\n      image: x\n      command: [a]\n      inputs_dir: 'in/{{inputs}}'\n",
      "groups.t.then.inputs_dir", "unknown placeholder {{inputs}}");
  BAD("      kind: zz\n      image: x\n      command: [a]\n", ":6: groups.t.then.kind", "'zz' has no group spec");
#undef BAD
  /* a loop of stages */
  bad("groups:\n  a:\n    group_by: [j]\n    ready_when: single\n    then: {kind: b, image: x, command: [c]}\n"
      "  b:\n    group_by: [j]\n    ready_when: single\n    then: {kind: a, image: x, command: [c]}\n",
      "groups.a.then.kind", "leads back to 'a'");
  bad("groups:\n  a:\n    group_by: [j]\n    ready_when: single\n    event_outputs: maybe\n",
      ":5: groups.a.event_outputs", "true or false");
}

/* A fired event of two members of model m1 with these outputs. */
static void event_of(altar_group_event_t *g, altar_handle_t hs[2], altar_transfer_t outs[3]) {
  memset(g, 0, sizeof *g);
  for (int i = 0; i < 2; i++) {
    memset(&hs[i], 0, sizeof hs[i]);
    hs[i].backend = "process";
    hs[i].external_id = i ? "2" : "1";
    altar_strmap_set(&hs[i].labels, "job_id", "j-1");
    altar_strmap_set(&hs[i].labels, "model_id", "m1");
    altar_strmap_set(&hs[i].labels, "num_folds", "2");
    altar_strmap_set(&hs[i].labels, "fold", i ? "1" : "0");
  }
  outs[0] = (altar_transfer_t){.uri = "file:///f/0.txt", .logical_path = "folds/0.txt"};
  outs[1] = (altar_transfer_t){.uri = "file:///f/1.txt",
                               .logical_path = "folds/1.txt",
                               .digest = "sha256:"
                                         "0000000000000000000000000000000000000000000000000000000000000000"};
  outs[2] = (altar_transfer_t){.uri = "file:///f/shared.bin", .logical_path = "shared.bin"};
  *g = (altar_group_event_t){.v = 1,
                             .event = ALTAR_GROUP_FIRED,
                             .event_id = "ab12",
                             .kind = "train",
                             .group_key = "j-1:m1",
                             .shards = hs,
                             .n_shards = 2,
                             .ts = 5,
                             .outputs = outs,
                             .n_outputs = 3};
}

static void test_build(void) {
  altar_group_specs_t s;
  altar_error_t err = {0};
  CU_ASSERT_FATAL(load(BASE, &s, &err) == 0);
  const altar_group_spec_t *gs = altar_group_specs_find(&s, "train");
  CU_ASSERT_FATAL(gs && gs->then && !gs->then_dead);
  altar_handle_t hs[2];
  altar_transfer_t outs[3];
  altar_group_event_t g;
  event_of(&g, hs, outs);
  CU_ASSERT_PTR_EQUAL(altar_followup_for(gs, &g), gs->then);
  altar_spec_t *f = NULL;
  CU_ASSERT_FATAL(altar_followup_build(gs->then, gs, &g, &f, &err) == 0);
  CU_ASSERT_STRING_EQUAL(f->kind, "ensemble");
  CU_ASSERT_STRING_EQUAL(f->image, "img-m1");
  CU_ASSERT_STRING_EQUAL(f->command[2], "merge ${HOME} inputs/ab12 > out/j-1-m1");
  /* carried: what both members share (not fold); then the template's; then the event id */
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&f->labels, "job_id"), "j-1");
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&f->labels, "num_folds"), "2");
  CU_ASSERT_PTR_NULL(altar_strmap_get(&f->labels, "fold"));
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&f->labels, "of"), "j-1:m1");
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&f->labels, ALTAR_FOLLOWUP_LABEL), "ab12");
  CU_ASSERT_EQUAL_FATAL(f->n_inputs, 3);
  CU_ASSERT_STRING_EQUAL(f->inputs[1].logical_path, "inputs/ab12/1/folds/1.txt");
  CU_ASSERT_STRING_EQUAL(f->inputs[1].uri, "file:///f/1.txt");
  CU_ASSERT_PTR_NOT_NULL(f->inputs[1].digest);
  CU_ASSERT_STRING_EQUAL(f->outputs[0].uri, "file:///r/m1.txt");
  CU_ASSERT(f->timeout_s.set && f->timeout_s.v == 30);
  /* the same event makes the same task; another event id another one */
  altar_spec_t *again = NULL;
  CU_ASSERT_FATAL(altar_followup_build(gs->then, gs, &g, &again, &err) == 0);
  char k1[65], k2[65];
  CU_ASSERT(altar_spec_identity(f, k1, &err) == 0 && altar_spec_identity(again, k2, &err) == 0);
  CU_ASSERT_STRING_EQUAL(k1, k2);
  altar_spec_free(again);
  g.event_id = "cd34";
  CU_ASSERT_FATAL(altar_followup_build(gs->then, gs, &g, &again, &err) == 0);
  CU_ASSERT(altar_spec_identity(again, k2, &err) == 0);
  CU_ASSERT(strcmp(k1, k2) != 0);
  altar_spec_free(again);
  /* a member output climbing out of its root cannot be an input: refused with the field */
  outs[2].logical_path = "../../../../etc/passwd"; /* out of inputs/ab12/2/ and past the root */
  CU_ASSERT_EQUAL(altar_followup_build(gs->then, gs, &g, &again, &err), ALTAR_EINVAL);
  CU_ASSERT_PTR_NULL(again);
  CU_ASSERT(strstr(err.msg, "inputs[2]") != NULL);
  /* a dead-lettered group has no then_dead here: nothing to start */
  g.event = ALTAR_GROUP_DEAD_LETTERED;
  CU_ASSERT_PTR_NULL(altar_followup_for(gs, &g));
  altar_spec_free(f);
  for (int i = 0; i < 2; i++) altar_strmap_clear(&hs[i].labels);
  altar_group_specs_clear(&s);
}

static void test_event_outputs_wire(void) {
  altar_handle_t hs[2];
  altar_transfer_t outs[3];
  altar_group_event_t g, back;
  event_of(&g, hs, outs);
  altar_buf_t b = {0};
  altar_error_t err = {0};
  CU_ASSERT_FATAL(altar_encode_group(&g, &b, &err) == 0);
  CU_ASSERT_FATAL(altar_decode_group(b.data, b.len, &back, &err) == 0);
  CU_ASSERT(altar_group_event_equal(&g, &back));
  CU_ASSERT_EQUAL(back.n_outputs, 3);
  altar_group_event_clear(&back);
  /* without outputs the key is not written: older events keep their bytes */
  altar_buf_t nb = {0};
  g.n_outputs = 0;
  CU_ASSERT_FATAL(altar_encode_group(&g, &nb, &err) == 0);
  CU_ASSERT(nb.len < b.len);
  CU_ASSERT_PTR_NULL(memmem(nb.data, nb.len, "outputs", 7));
  altar_buf_free(&b);
  altar_buf_free(&nb);
  for (int i = 0; i < 2; i++) altar_strmap_clear(&hs[i].labels);
}

static void add(void) {
  ALTAR_SUITE("followup", NULL, NULL);
  ALTAR_TEST(test_config_errors);
  ALTAR_TEST(test_build);
  ALTAR_TEST(test_event_outputs_wire);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
