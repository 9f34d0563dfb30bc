/* Dropping managedFields from JSON text before parsing: hand-picked shapes
 * (first, middle, last and only member, nested, pretty-printed, the name as
 * a value, brackets and escaped quotes inside strings), then many random
 * documents checked against the parsed tree with the member removed, and
 * malformed text that must stay malformed. */
#include "backends/k8s_json_trim.h"
#include "testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY "managedFields"

static char *trimmed(const char *in) {
  size_t n = strlen(in);
  char *t = malloc(n + 1);
  memcpy(t, in, n + 1);
  t[altar__k8s_json_drop_member(t, n, KEY)] = '\0';
  return t;
}

static void expect(const char *in, const char *want) {
  char *got = trimmed(in);
  if (strcmp(got, want)) fprintf(stderr, "trim(%s)\n  = %s\n  want %s\n", in, got, want);
  CU_ASSERT_STRING_EQUAL(got, want);
  free(got);
}

static void test_shapes(void) {
  expect("{\"managedFields\":[{\"a\":1}],\"name\":\"x\"}", "{\"name\":\"x\"}");
  expect("{\"name\":\"x\",\"managedFields\":[{\"a\":1}]}", "{\"name\":\"x\"}");
  expect("{\"a\":1,\"managedFields\":{\"f:x\":{}},\"b\":2}", "{\"a\":1,\"b\":2}");
  expect("{\"managedFields\":[]}", "{}");
  expect("{\"items\":[{\"metadata\":{\"name\":\"j\",\"managedFields\":[{\"fieldsV1\":{\"f:s\":{}}}]}},"
         "{\"metadata\":{\"managedFields\":[],\"uid\":\"u\"}}]}",
         "{\"items\":[{\"metadata\":{\"name\":\"j\"}},{\"metadata\":{\"uid\":\"u\"}}]}");
  /* Pretty-printed, as some servers answer. */
  expect("{\n  \"a\": 1,\n  \"managedFields\" : [ 1, 2 ]\n}", "{\n  \"a\": 1\n}");
  expect("{\n  \"managedFields\": \"s\" ,\n  \"a\": 1\n}", "{\n  \n  \"a\": 1\n}");
  /* The name as a value, or inside a string, or escaped, is no member. */
  expect("{\"a\":\"managedFields\",\"b\":[\"managedFields\"]}", "{\"a\":\"managedFields\",\"b\":[\"managedFields\"]}");
  expect("{\"a\":\"\\\"managedFields\\\":1\"}", "{\"a\":\"\\\"managedFields\\\":1\"}");
  expect("{\"managed\\u0046ields\":1}", "{\"managed\\u0046ields\":1}");
  /* Brackets and escaped quotes inside the dropped value's strings. */
  expect("{\"managedFields\":[\"]}\\\"{[\",{\"k\":\"}\"}],\"z\":0}", "{\"z\":0}");
  /* Scalars of every kind as the value. */
  expect("{\"managedFields\":null,\"a\":true}", "{\"a\":true}");
  expect("{\"a\":false,\"managedFields\":-1.5e3}", "{\"a\":false}");
  expect("[]", "[]");
  expect("", "");
}

/* ---- random documents ---- */

static unsigned long long seed = 88172645463325252ull;
static unsigned rnd(unsigned n) {
  seed ^= seed << 13;
  seed ^= seed >> 7;
  seed ^= seed << 17;
  return (unsigned)(seed % n);
}

static json_t *random_value(int depth) {
  static const char *keys[] = {KEY, "metadata", "name", "f:status", "managed", "Fields", "]}\"", "a"};
  static const char *strs[] = {KEY, "", "x\"y", "{[", "\\", "\xc3\xa9", "]}"};
  unsigned kind = depth > 3 ? rnd(4) : rnd(6);
  switch (kind) {
  case 0: return json_integer((json_int_t)rnd(1000) - 500);
  case 1: return json_string(strs[rnd(sizeof strs / sizeof *strs)]);
  case 2: return rnd(2) ? json_true() : json_null();
  case 3: return json_real(rnd(100) / 8.0);
  case 4: {
    json_t *a = json_array();
    for (unsigned i = rnd(4); i > 0; i--) json_array_append_new(a, random_value(depth + 1));
    return a;
  }
  default: {
    json_t *o = json_object();
    for (unsigned i = rnd(5); i > 0; i--)
      json_object_set_new(o, keys[rnd(sizeof keys / sizeof *keys)], random_value(depth + 1));
    return o;
  }
  }
}

/* v with every member named KEY removed, at any depth. */
static void strip(json_t *v) {
  if (json_is_object(v)) {
    json_object_del(v, KEY);
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) strip(x);
  } else if (json_is_array(v)) {
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) strip(x);
  }
}

static void test_random_documents(void) {
  size_t bad = 0, dropped = 0;
  for (int i = 0; i < 20000; i++) {
    json_t *doc = json_object();
    json_object_set_new(doc, "items", random_value(0));
    if (rnd(2)) json_object_set_new(doc, KEY, random_value(1));
    size_t flags = rnd(2) ? JSON_COMPACT : JSON_INDENT(rnd(4));
    char *text = json_dumps(doc, flags | JSON_ENSURE_ASCII * rnd(2));
    char *t = trimmed(text);
    json_t *got = json_loads(t, 0, NULL);
    strip(doc);
    if (!json_equal(got, doc)) {
      if (bad++ < 3) fprintf(stderr, "in:  %s\nout: %s\n", text, t);
    }
    dropped += strlen(t) < strlen(text);
    json_decref(got);
    json_decref(doc);
    free(text);
    free(t);
  }
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT(dropped > 1000); /* the key did come up */
}

/* Malformed text stays malformed: the scan stops where it cannot follow. */
static void test_malformed_stays_malformed(void) {
  const char *bad[] = {
      "{\"managedFields\":[1,2",       /* the value never ends */
      "{\"managedFields\":\"abc",      /* nor its string */
      "{\"a\":\"never closed",         /* a string before it */
      "{\"managedFields\":[\"x\\\"]}", /* an escaped quote hides the end */
      "{\"managedFields\":",           "\"", "{\"managedFields\"",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char *t = trimmed(bad[i]);
    json_t *v = json_loads(t, 0, NULL);
    CU_ASSERT_PTR_NULL(v);
    CU_ASSERT_STRING_EQUAL(t, bad[i]); /* nothing was dropped */
    json_decref(v);
    free(t);
  }
}

static void add_suites(void) {
  ALTAR_SUITE("k8s-json-trim", NULL, NULL);
  ALTAR_TEST(test_shapes);
  ALTAR_TEST(test_random_documents);
  ALTAR_TEST(test_malformed_stays_malformed);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add_suites); }
