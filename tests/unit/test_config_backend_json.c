/* A mapping under backend: reaches the backend as JSON text (the python
 * backend's options), typed as YAML's core schema reads plain scalars;
 * what cannot be JSON is refused with the key and line. */
#include "altar/config.h"
#include "altar/plugin/backend.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

static char *dir;

/* Loads text as altar.yaml into c; returns the rc. */
static int load(const char *text, altar_config_t *c, altar_error_t *err) {
  char path[4096];
  snprintf(path, sizeof path, "%s/altar.yaml", dir);
  altar_test_write_file(path, text, strlen(text));
  return altar_config_load(path, c, err);
}

static void test_options_mapping_is_json(void) {
  altar_config_t c;
  altar_error_t err = {0};
  int rc = load("backend:\n"
                "  name: python\n"
                "  adapter: subprocess\n"
                "  options: {data_root: /var/x, slots: 8, ratio: 0.5, on: true, none: null, quoted: \"8\",\n"
                "            list: [a, 2], nested: {k: v}, word: 8x}\n",
                &c, &err);
  if (rc) fprintf(stderr, "load: %s\n", err.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  const char *opts = altar_strmap_get(&c.backend_props, "options");
  CU_ASSERT_PTR_NOT_NULL_FATAL(opts);
  CU_ASSERT_STRING_EQUAL(opts, "{\"data_root\":\"/var/x\",\"slots\":8,\"ratio\":0.5,\"on\":true,\"none\":null,"
                               "\"quoted\":\"8\",\"list\":[\"a\",2],\"nested\":{\"k\":\"v\"},\"word\":\"8x\"}");
  /* A JSON string given as a scalar passes unchanged. */
  altar_config_clear(&c);
  CU_ASSERT_EQUAL_FATAL(load("backend: {name: python, adapter: a, options: '{\"x\": 1}'}\n", &c, &err), 0);
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&c.backend_props, "options"), "{\"x\": 1}");
  altar_config_clear(&c);
}

static void test_options_that_cannot_be_json(void) {
  altar_config_t c;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(load("backend:\n  name: python\n  options: {a: 1, a: 2}\n", &c, &err), ALTAR_ECONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "backend.options"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, ":3"));
  altar_config_clear(&c);
  CU_ASSERT_EQUAL(load("backend:\n  name: python\n  options: {[a]: 1}\n", &c, &err), ALTAR_ECONFIG);
  altar_config_clear(&c);
  /* Deeper than a message may nest. */
  CU_ASSERT_EQUAL(load("backend: {name: python, options: {a: [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}}\n", &c, &err),
                  ALTAR_ECONFIG);
  altar_config_clear(&c);
}

static int setup(void) {
  altar_backend_register(&altar_backend_python_ops); /* so the reader knows its keys */
  dir = altar_test_tmpdir("config-json");
  return 0;
}

static int teardown(void) {
  altar_test_rmtree(dir);
  free(dir);
  return 0;
}

static void add(void) {
  ALTAR_SUITE("config: backend mappings as JSON", setup, teardown);
  ALTAR_TEST(test_options_mapping_is_json);
  ALTAR_TEST(test_options_that_cannot_be_json);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
