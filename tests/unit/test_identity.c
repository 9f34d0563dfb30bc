/* Task identity, Kubernetes Job names and group event ids: the vectors in
 * schemas/vectors/identity/, and the rules behind them. */
#include "altar/codec.h"
#include "testutil.h"

#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static json_t *load_json(const char *rel) {
  char path[1024];
  snprintf(path, sizeof path, "%s/schemas/vectors/%s", altar_test_source_dir(), rel);
  json_error_t jerr;
  json_t *j = json_load_file(path, 0, &jerr);
  if (!j) fprintf(stderr, "\n  %s: %s\n", path, jerr.text);
  return j;
}

static altar_spec_t *spec_from_json_value(const json_t *j) {
  char *text = json_dumps(j, JSON_COMPACT);
  altar_spec_t *s = calloc(1, sizeof *s);
  altar_error_t err = {0};
  if (!text || altar_spec_from_json(text, strlen(text), s, &err)) {
    fprintf(stderr, "\n  spec: %s\n", err.msg);
    altar_spec_free(s);
    s = NULL;
  }
  free(text);
  return s;
}

static void sha256_hex(const void *data, size_t len, char out[65]) {
  unsigned char md[32];
  unsigned int n = 0;
  EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
  for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static bool dns1123_label(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 63) return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && !(c == '-' && i > 0 && i < n - 1)) return false;
  }
  return true;
}

/* ---- vectors ---- */

static void test_identity_vectors(void) {
  json_t *cases = load_json("identity/specs.json");
  CU_ASSERT_FATAL(cases != NULL && json_is_array(cases));
  CU_ASSERT(json_array_size(cases) >= 10);
  size_t i;
  json_t *c;
  json_array_foreach(cases, i, c) {
    const char *name = json_string_value(json_object_get(c, "name"));
    altar_spec_t *s = spec_from_json_value(json_object_get(c, "spec"));
    CU_ASSERT_PTR_NOT_NULL(s);
    if (!s) continue;
    char key[ALTAR_TASK_KEY_LEN + 1], job[ALTAR_JOB_NAME_MAX + 1];
    altar_error_t err = {0};
    CU_ASSERT_EQUAL(altar_spec_identity(s, key, &err), 0);
    CU_ASSERT_EQUAL(altar_spec_job_name(s, job, &err), 0);
    const char *want_key = json_string_value(json_object_get(c, "task_key"));
    const char *want_job = json_string_value(json_object_get(c, "job_name"));
    CU_ASSERT(want_key && !strcmp(key, want_key));
    CU_ASSERT(want_job && !strcmp(job, want_job));
    if (!want_key || strcmp(key, want_key) || !want_job || strcmp(job, want_job))
      fprintf(stderr, "\n  %s: got %s %s\n", name, key, job);
    CU_ASSERT(dns1123_label(job));
    altar_spec_free(s);
  }
  json_decref(cases);
}

/* The task key of each spec golden vector is the SHA-256 of its .msgpack file. */
static void test_identity_is_sha256_of_vector_bytes(void) {
  static const char *const names[] = {"minimal", "full", "empty", "unicode_labels", "cpu_memory_timeout", "gpu_pool"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/schemas/vectors/spec/%s.msgpack", altar_test_source_dir(), names[i]);
    size_t len;
    char *bytes = altar_test_read_file(path, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(bytes);
    altar_spec_t s;
    altar_error_t err = {0};
    CU_ASSERT_EQUAL(altar_decode_spec(bytes, len, &s, &err), 0);
    char want[65], got[ALTAR_TASK_KEY_LEN + 1];
    sha256_hex(bytes, len, want);
    CU_ASSERT_EQUAL(altar_spec_identity(&s, got, &err), 0);
    CU_ASSERT_STRING_EQUAL(got, want);
    altar_spec_clear(&s);
    free(bytes);
  }
}

static void test_group_event_id_vectors(void) {
  json_t *cases = load_json("identity/group_event_ids.json");
  CU_ASSERT_FATAL(cases != NULL && json_is_array(cases));
  CU_ASSERT(json_array_size(cases) >= 5);
  size_t i;
  json_t *c;
  json_array_foreach(cases, i, c) {
    json_t *keys = json_object_get(c, "task_keys");
    size_t n = json_array_size(keys);
    const char **tk = calloc(n + 1, sizeof *tk);
    for (size_t k = 0; k < n; k++) tk[k] = json_string_value(json_array_get(keys, k));
    char id[ALTAR_TASK_KEY_LEN + 1];
    CU_ASSERT_EQUAL(altar_group_event_id(json_string_value(json_object_get(c, "kind")),
                                         json_string_value(json_object_get(c, "group_key")), tk, n, id),
                    0);
    const char *want = json_string_value(json_object_get(c, "event_id"));
    CU_ASSERT(want && !strcmp(id, want));
    free(tk);
  }
  json_decref(cases);
}

/* The group golden vectors carry ids from group_event_ids.json. */
static void test_group_vectors_carry_ids(void) {
  json_t *fired = load_json("group/fired.json"), *ids = load_json("identity/group_event_ids.json");
  CU_ASSERT_FATAL(fired && ids);
  bool found = false;
  size_t i;
  json_t *c;
  json_array_foreach(ids, i, c) {
    if (!strcmp(json_string_value(json_object_get(c, "name")), "three_folds"))
      found = json_equal(json_object_get(c, "event_id"), json_object_get(fired, "event_id"));
  }
  CU_ASSERT(found);
  json_decref(fired);
  json_decref(ids);
}

/* ---- rules ---- */

static altar_spec_t *base_spec(void) {
  altar_spec_t *s = altar_spec_new("chrombpnet", "img:1");
  altar_spec_add_arg(s, "python");
  altar_spec_add_arg(s, "train.py");
  altar_spec_set_label(s, "fold", "1");
  altar_spec_set_label(s, "job_id", "j1");
  altar_spec_add_input(s, "gs://b/in", "in/x", "loc",
                       "sha256:"
                       "0000000000000000000000000000000000000000000000000000000000000000");
  altar_spec_add_output(s, "gs://b/out", "out/y");
  altar_spec_set_gpu(s, "a100", 2);
  s->resources.memory_mb = (altar_opt_i64_t){true, 1024};
  s->timeout_s = (altar_opt_i64_t){true, 60};
  s->plugin_identity = altar_strmap_new();
  altar_strmap_set(s->plugin_identity, "abi", "3");
  return s;
}

static void key_of(const altar_spec_t *s, char out[ALTAR_TASK_KEY_LEN + 1]) {
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_spec_identity(s, out, &err), 0);
}

static void test_avoid_hosts_not_identity(void) {
  altar_spec_t *a = base_spec(), *b = base_spec();
  altar_spec_add_avoid_host(b, "node-7");
  altar_spec_add_avoid_host(b, "node-8");
  char ka[65], kb[65], ja[64], jb[64];
  key_of(a, ka);
  key_of(b, kb);
  CU_ASSERT_STRING_EQUAL(ka, kb);
  altar_error_t err = {0};
  altar_spec_job_name(a, ja, &err);
  altar_spec_job_name(b, jb, &err);
  CU_ASSERT_STRING_EQUAL(ja, jb);
  altar_spec_free(a);
  altar_spec_free(b);
}

static void test_label_order_not_identity(void) {
  altar_spec_t *a = altar_spec_new("k", "i"), *b = altar_spec_new("k", "i");
  const char *keys[] = {"zeta", "alpha", "mid", "Alpha", "ünï", "a"};
  for (int i = 0; i < 6; i++) altar_spec_set_label(a, keys[i], "v");
  for (int i = 5; i >= 0; i--) altar_spec_set_label(b, keys[i], "v");
  char ka[65], kb[65];
  key_of(a, ka);
  key_of(b, kb);
  CU_ASSERT_STRING_EQUAL(ka, kb);
  altar_spec_free(a);
  altar_spec_free(b);
  /* the same through JSON with keys in a different order */
  const char *j1 = "{\"kind\":\"k\",\"image\":\"i\",\"command\":[\"x\"],\"labels\":{\"a\":\"1\",\"b\":\"2\"}}";
  const char *j2 = "{\"labels\":{\"b\":\"2\",\"a\":\"1\"},\"command\":[\"x\"],\"image\":\"i\",\"kind\":\"k\"}";
  altar_spec_t s1, s2;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_spec_from_json(j1, strlen(j1), &s1, &err), 0);
  CU_ASSERT_EQUAL(altar_spec_from_json(j2, strlen(j2), &s2, &err), 0);
  key_of(&s1, ka);
  key_of(&s2, kb);
  CU_ASSERT_STRING_EQUAL(ka, kb);
  altar_spec_clear(&s1);
  altar_spec_clear(&s2);
}

/* Each mutation changes one identity field; every resulting key must differ
 * from the base and from each other. */
static void test_any_field_changes_identity(void) {
  enum { N = 22 };
  char keys[N][65];
  for (int m = 0; m < N; m++) {
    altar_spec_t *s = base_spec();
    switch (m) {
    case 0: break; /* the base */
    case 1:
      free(s->kind);
      s->kind = strdup("chrombpnet2");
      break;
    case 2:
      free(s->image);
      s->image = strdup("img:2");
      break;
    case 3:
      free(s->command[1]);
      s->command[1] = strdup("train2.py");
      break;
    case 4: altar_spec_add_arg(s, "--fast"); break;
    case 5: altar_spec_set_label(s, "fold", "2"); break;
    case 6: altar_spec_set_label(s, "extra", ""); break;
    case 7:
      free(s->inputs[0].uri);
      s->inputs[0].uri = strdup("gs://b/in2");
      break;
    case 8:
      free(s->inputs[0].logical_path);
      s->inputs[0].logical_path = strdup("in/z");
      break;
    case 9:
      free(s->inputs[0].locality_key);
      s->inputs[0].locality_key = NULL;
      break;
    case 10: s->inputs[0].digest[7] = '1'; break;
    case 11:
      free(s->outputs[0].logical_path);
      s->outputs[0].logical_path = strdup("out/z");
      break;
    case 12:
      free(s->resources.gpu);
      s->resources.gpu = strdup("gpu");
      break;
    case 13: s->resources.count = 3; break;
    case 14: s->resources.memory_mb.v = 2048; break;
    case 15: s->resources.memory_mb.set = false; break;
    case 16: s->timeout_s.v = 61; break;
    case 17: s->timeout_s.set = false; break;
    case 18: altar_strmap_set(s->plugin_identity, "abi", "4"); break;
    case 19: altar_strmap_clear(s->plugin_identity); break; /* empty map is not absent */
    case 20:
      altar_strmap_free(s->plugin_identity);
      s->plugin_identity = NULL;
      break;
    case 21: { /* an input moved to outputs */
      altar_spec_add_output(s, s->inputs[0].uri, s->inputs[0].logical_path);
      break;
    }
    }
    key_of(s, keys[m]);
    altar_spec_free(s);
  }
  for (int a = 0; a < N; a++)
    for (int b = a + 1; b < N; b++) {
      if (!strcmp(keys[a], keys[b])) fprintf(stderr, "\n  mutations %d and %d share a key\n", a, b);
      CU_ASSERT(strcmp(keys[a], keys[b]) != 0);
    }
  /* and it is stable */
  altar_spec_t *s = base_spec();
  char again[65];
  key_of(s, again);
  CU_ASSERT_STRING_EQUAL(again, keys[0]);
  altar_spec_free(s);
}

static void test_job_name_rules(void) {
  static const struct {
    const char *kind;
    const char *want_prefix; /* the safe kind; NULL: only check the shape */
  } cases[] = {
      {"score", "score"},
      {"ChromBPNet_Train", "chrombpnet-train"},
      {"my.kind.v2", "my-kind-v2"},
      {"--x--", "x"},
      {"___", "task"},
      {"", "task"},
      {"9lives", "9lives"},
      {"a b\tc\nd", "a-b-c-d"},
      {"日本語", "task"},
      {"UPPER", "upper"},
      {"kind-with-ünï", "kind-with-n"},
      {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", NULL},
      {"x_y_z_x_y_z_x_y_z_x_y_z_x_y_z_x_y_z_x_y_z_x_y_z_x_y_z_x_y_z_x_y_z_x_y_z", NULL},
      {"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxy_z", NULL}, /* '-' would land at char 52 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    altar_spec_t *s = altar_spec_new(cases[i].kind, "img");
    altar_spec_add_arg(s, "x");
    char key[65], job[ALTAR_JOB_NAME_MAX + 1];
    altar_error_t err = {0};
    key_of(s, key);
    CU_ASSERT_EQUAL(altar_spec_job_name(s, job, &err), 0);
    size_t n = strlen(job);
    CU_ASSERT(dns1123_label(job));
    CU_ASSERT(n <= 63);
    CU_ASSERT(n > 11 && job[n - 11] == '-' && !strncmp(job + n - 10, key, 10));
    if (cases[i].want_prefix) {
      size_t p = strlen(cases[i].want_prefix);
      CU_ASSERT(n == p + 11 && !strncmp(job, cases[i].want_prefix, p));
      if (n != p + 11 || strncmp(job, cases[i].want_prefix, p))
        fprintf(stderr, "\n  kind \"%s\": got %s\n", cases[i].kind, job);
    } else {
      CU_ASSERT(n >= 60); /* long kinds are truncated, not dropped */
    }
    altar_spec_free(s);
  }
}

static void test_group_event_id_rules(void) {
  const char *k1 = "aaaa", *k2 = "bbbb", *k3 = "cccc";
  const char *order1[] = {k1, k2, k3}, *order2[] = {k3, k1, k2}, *dup[] = {k2, k1, k3, k3};
  char a[65], b[65], c[65], d[65], e[65], f[65];
  CU_ASSERT_EQUAL(altar_group_event_id("kind", "g", order1, 3, a), 0);
  CU_ASSERT_EQUAL(altar_group_event_id("kind", "g", order2, 3, b), 0);
  CU_ASSERT_EQUAL(altar_group_event_id("kind", "g", dup, 4, c), 0);
  CU_ASSERT_STRING_EQUAL(a, b);
  CU_ASSERT_STRING_EQUAL(a, c);
  CU_ASSERT_EQUAL(altar_group_event_id("kind", "g", order1, 2, d), 0);
  CU_ASSERT_EQUAL(altar_group_event_id("kind2", "g", order1, 3, e), 0);
  CU_ASSERT_EQUAL(altar_group_event_id("kind", "g2", order1, 3, f), 0);
  CU_ASSERT(strcmp(a, d) && strcmp(a, e) && strcmp(a, f));
  /* kind and group key are not run together: ("ab","c") differs from ("a","bc") */
  CU_ASSERT_EQUAL(altar_group_event_id("ab", "c", NULL, 0, d), 0);
  CU_ASSERT_EQUAL(altar_group_event_id("a", "bc", NULL, 0, e), 0);
  CU_ASSERT_STRING_NOT_EQUAL(d, e);
  CU_ASSERT_EQUAL(strlen(a), 64);
  CU_ASSERT_EQUAL(altar_group_event_id(NULL, "g", order1, 3, a), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_group_event_id("k", NULL, order1, 3, a), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_group_event_id("k", "g", NULL, 3, a), ALTAR_EINVAL);
  const char *withnull[] = {k1, NULL};
  CU_ASSERT_EQUAL(altar_group_event_id("k", "g", withnull, 2, a), ALTAR_EINVAL);
}

static void test_identity_errors(void) {
  altar_spec_t s;
  memset(&s, 0, sizeof s); /* no kind: not encodable, so no identity */
  char key[65], job[64];
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_spec_identity(&s, key, &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "spec.") != NULL);
  CU_ASSERT_EQUAL(altar_spec_job_name(&s, job, &err), ALTAR_EINVAL);
}

static void add_suites(void) {
  ALTAR_SUITE("identity", NULL, NULL);
  ALTAR_TEST(test_identity_vectors);
  ALTAR_TEST(test_identity_is_sha256_of_vector_bytes);
  ALTAR_TEST(test_group_event_id_vectors);
  ALTAR_TEST(test_group_vectors_carry_ids);
  ALTAR_TEST(test_avoid_hosts_not_identity);
  ALTAR_TEST(test_label_order_not_identity);
  ALTAR_TEST(test_any_field_changes_identity);
  ALTAR_TEST(test_job_name_rules);
  ALTAR_TEST(test_group_event_id_rules);
  ALTAR_TEST(test_identity_errors);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add_suites); }
