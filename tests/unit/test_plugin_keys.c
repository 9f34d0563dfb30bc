/* One declaration of configuration keys for every plug-in kind: the check
 * (what passes, the hint a refusal carries, the message's shape), and every
 * built-in plug-in's declaration read the same way. */
#include "altar/plugin/backend.h"
#include "altar/plugin/ledger.h"
#include "altar/plugin/storage.h"
#include "altar/plugin/transport.h"
#include "altar/plugin/transport_kafka.h"
#include "altar/plugin_keys.h"
#include "testutil.h"

#include <string.h>

static const altar_plugin_key_t two[] = {{"data_root", "a directory"}, {"slots", "how many"}, ALTAR_PLUGIN_KEYS_END};
static const altar_plugin_key_t none[] = {ALTAR_PLUGIN_KEYS_END};

static void test_allow(void) {
  char hint[200];
  CU_ASSERT_EQUAL(altar_plugin_keys_count(two), 2);
  CU_ASSERT_EQUAL(altar_plugin_keys_count(none), 0);
  CU_ASSERT_EQUAL(altar_plugin_keys_count(NULL), 0);
  CU_ASSERT(altar_plugin_keys_allow(two, "slots", hint, sizeof hint) && !hint[0]);
  /* "name" picks the plug-in, whatever it declares. */
  CU_ASSERT(altar_plugin_keys_allow(two, "name", hint, sizeof hint));
  CU_ASSERT(altar_plugin_keys_allow(none, "name", hint, sizeof hint));
  /* Undeclared: every key passes (kafka's librdkafka properties). */
  CU_ASSERT(altar_plugin_keys_allow(NULL, "anything.at.all", hint, sizeof hint) && !hint[0]);
  /* A near miss, a declaration of none, and a far miss. */
  CU_ASSERT_FALSE(altar_plugin_keys_allow(two, "slotz", hint, sizeof hint));
  CU_ASSERT_STRING_EQUAL(hint, " (did you mean \"slots\"?)");
  CU_ASSERT_FALSE(altar_plugin_keys_allow(none, "dir", hint, sizeof hint));
  CU_ASSERT_STRING_EQUAL(hint, " (it takes none)");
  CU_ASSERT_FALSE(altar_plugin_keys_allow(two, "colour", hint, sizeof hint));
  CU_ASSERT_STRING_EQUAL(hint, " (known: data_root, slots)");
  /* No room for a hint is no hint, not an overrun. */
  CU_ASSERT_FALSE(altar_plugin_keys_allow(two, "colour", NULL, 0));
}

static void test_known_list_is_cut_to_fit(void) {
  static const altar_plugin_key_t many[] = {
      {"aaaaaaaaaa", NULL}, {"bbbbbbbbbb", NULL}, {"cccccccccc", NULL}, {"dddddddddd", NULL}, ALTAR_PLUGIN_KEYS_END};
  char hint[40];
  CU_ASSERT_FALSE(altar_plugin_keys_allow(many, "zzz", hint, sizeof hint));
  CU_ASSERT_STRING_EQUAL(hint, " (known: aaaaaaaaaa, bbbbbbbbbb, ...)");
  CU_ASSERT(strlen(hint) < sizeof hint);
}

static void test_refusal_message(void) {
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_plugin_keys_refuse(two, "altar.yaml:3: ", "backend", "process", "slotz", &err), ALTAR_ECONFIG);
  CU_ASSERT_STRING_EQUAL(err.msg,
                         "altar.yaml:3: backend.slotz: unknown key for the process backend (did you mean \"slots\"?)");
  CU_ASSERT_EQUAL(err.code, ALTAR_ECONFIG);
  CU_ASSERT_EQUAL(altar_plugin_keys_refuse(none, NULL, "ledger", "memory", "dir", &err), ALTAR_ECONFIG);
  CU_ASSERT_STRING_EQUAL(err.msg, "ledger.dir: unknown key for the memory ledger (it takes none)");
  /* A key is named, but bounded: a megabyte-long key does not fill the message. */
  char long_key[300];
  memset(long_key, 'k', sizeof long_key - 1);
  long_key[sizeof long_key - 1] = '\0';
  altar_plugin_keys_refuse(none, "--set ", "transport", "local", long_key, &err);
  CU_ASSERT(strncmp(err.msg, "--set transport.kkkk", 20) == 0);
  CU_ASSERT(strstr(err.msg, ": unknown key for the local transport (it takes none)") != NULL);
  CU_ASSERT(strlen(err.msg) < 64 + 80);
}

static void test_check_names_the_first_unknown(void) {
  altar_error_t err = {0};
  altar_strmap_t cfg = {0};
  CU_ASSERT_EQUAL(altar_plugin_keys_check(two, "backend", "process", NULL, &err), ALTAR_OK);
  altar_strmap_set(&cfg, "name", "process");
  altar_strmap_set(&cfg, "slots", "2");
  CU_ASSERT_EQUAL(altar_plugin_keys_check(two, "backend", "process", &cfg, &err), ALTAR_OK);
  altar_strmap_set(&cfg, "data_rot", "/x");
  CU_ASSERT_EQUAL(altar_plugin_keys_check(two, "backend", "process", &cfg, &err), ALTAR_ECONFIG);
  CU_ASSERT_STRING_EQUAL(err.msg,
                         "backend.data_rot: unknown key for the process backend (did you mean \"data_root\"?)");
  CU_ASSERT_EQUAL(altar_plugin_keys_check(NULL, "transport", "kafka", &cfg, &err), ALTAR_OK);
  altar_strmap_clear(&cfg);
}

/* Every built-in declares its keys in the one shape: named, documented,
 * each once. */
static void check_declared(const char *what, const altar_plugin_key_t *keys) {
  size_t n = altar_plugin_keys_count(keys);
  for (size_t i = 0; i < n; i++) {
    bool ok = keys[i].name[0] && keys[i].doc && keys[i].doc[0] && strcmp(keys[i].name, "name");
    for (size_t j = 0; j < i; j++) ok = ok && strcmp(keys[i].name, keys[j].name);
    if (!ok) fprintf(stderr, "%s: key %zu (%s) undocumented, reserved or declared twice\n", what, i, keys[i].name);
    CU_ASSERT(ok);
  }
}

static void test_builtins_declare_the_same_way(void) {
  const altar_backend_ops_t *backends[] = {&altar_backend_process_ops, &altar_backend_docker_ops,
                                           &altar_backend_kubernetes_ops, &altar_backend_modal_ops,
                                           &altar_backend_python_ops};
  for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
    CU_ASSERT_PTR_NOT_NULL(backends[i]->config_keys);
    CU_ASSERT(altar_plugin_keys_count(backends[i]->config_keys) > 0);
    check_declared(backends[i]->name, backends[i]->config_keys);
  }
  CU_ASSERT(altar_plugin_keys_count(altar_transport_local_ops.config_keys) > 0);
  check_declared("transport local", altar_transport_local_ops.config_keys);
  CU_ASSERT_PTR_NULL(altar_transport_kafka_ops.config_keys); /* any librdkafka property, under kafka: */
  const altar_storage_ops_t *stores[] = {&altar_storage_local_ops, &altar_storage_http_ops, &altar_storage_gcs_ops,
                                         &altar_storage_s3_ops};
  for (size_t i = 0; i < sizeof stores / sizeof stores[0]; i++) {
    CU_ASSERT_PTR_NOT_NULL(stores[i]->config_keys);
    check_declared(stores[i]->name, stores[i]->config_keys);
  }
  CU_ASSERT_EQUAL(altar_plugin_keys_count(altar_storage_local_ops.config_keys), 0);
  CU_ASSERT_EQUAL(altar_plugin_keys_count(altar_ledger_memory_ops.config_keys), 0);
  CU_ASSERT_PTR_NOT_NULL(altar_ledger_memory_ops.config_keys);
  check_declared("ledger rocksdb", altar_ledger_rocksdb_ops.config_keys);
  CU_ASSERT(altar_plugin_keys_allow(altar_ledger_rocksdb_ops.config_keys, "dir", NULL, 0));
}

/* The same typo, refused with the same message shape by each kind's open. */
static void test_each_kind_refuses_at_open(void) {
  altar_error_t err = {0};
  altar_strmap_t cfg = {0};
  altar_strmap_set(&cfg, "slotz", "2");
  CU_ASSERT_PTR_NULL(altar_backend_open(&altar_backend_process_ops, &cfg, &err));
  CU_ASSERT_EQUAL(err.code, ALTAR_ECONFIG);
  CU_ASSERT_STRING_EQUAL(err.msg, "backend.slotz: unknown key for the process backend (did you mean \"slots\"?)");
  altar_strmap_clear(&cfg);
  altar_strmap_set(&cfg, "sycn", "true");
  CU_ASSERT_PTR_NULL(altar_ledger_open(&altar_ledger_rocksdb_ops, &cfg, &err));
  CU_ASSERT_EQUAL(err.code, ALTAR_ECONFIG);
  CU_ASSERT_STRING_EQUAL(err.msg, "ledger.sycn: unknown key for the rocksdb ledger (did you mean \"sync\"?)");
  altar_strmap_clear(&cfg);
  altar_storage_register_builtin();
  altar_storage_t *s = NULL;
  altar_strmap_set(&cfg, "max_bytez", "10");
  CU_ASSERT_EQUAL(altar_storage_open("http", &cfg, &s, &err), ALTAR_ECONFIG);
  CU_ASSERT_STRING_EQUAL(err.msg, "storage.max_bytez: unknown key for the http storage (did you mean \"max_bytes\"?)");
  CU_ASSERT_PTR_NULL(s);
  altar_strmap_clear(&cfg);
}

static void add(void) {
  ALTAR_SUITE("plugin_keys", NULL, NULL);
  ALTAR_TEST(test_allow);
  ALTAR_TEST(test_known_list_is_cut_to_fit);
  ALTAR_TEST(test_refusal_message);
  ALTAR_TEST(test_check_names_the_first_unknown);
  ALTAR_TEST(test_builtins_declare_the_same_way);
  ALTAR_TEST(test_each_kind_refuses_at_open);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
