/* altar.yaml: defaults, reading, overrides, errors naming file and line. */
#include "altar/config.h"
#include "altar/plugin/transport.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *write_tmp(const char *text) {
  char *dir = altar_test_tmpdir("config");
  char *path = malloc(strlen(dir) + 16);
  snprintf(path, strlen(dir) + 16, "%s/altar.yaml", dir);
  altar_test_write_file(path, text, strlen(text));
  free(dir);
  return path;
}

static void test_defaults(void) {
  altar_config_t c;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_config_load("/nonexistent/altar.yaml", &c, &err), ALTAR_ECONFIG);
  CU_ASSERT(strstr(err.msg, "/nonexistent/altar.yaml") != NULL);
  altar_config_clear(&c);
  CU_ASSERT_EQUAL(altar_config_load(NULL, &c, &err), 0); /* no ./altar.yaml in the test dir */
  CU_ASSERT_STRING_EQUAL(c.transport_name, "local");
  CU_ASSERT_STRING_EQUAL(c.topics.jobs, "altar.jobs");
  CU_ASSERT_STRING_EQUAL(c.topics.dlq, "altar.dlq");
  CU_ASSERT_STRING_EQUAL(c.backend_name, "process");
  CU_ASSERT_EQUAL(c.topic_partitions, ALTAR_DEFAULT_TOPIC_PARTITIONS);
  long long slots;
  CU_ASSERT_EQUAL(altar_config_backend_int(&c, "slots", 4, 1, 1024, &slots, &err), 0);
  CU_ASSERT_EQUAL(slots, 4); /* absent: the caller's default */
  CU_ASSERT(altar_strmap_get(&c.backend_props, "data_root") == NULL);
  altar_config_clear(&c);
}

static void test_read_and_override(void) {
  char *path = write_tmp("transport:\n  name: kafka\n  kafka: {bootstrap.servers: \"127.0.0.1:9092\", "
                         "security.protocol: SASL_SSL}\n"
                         "topics: {jobs: j, status: s}\n"
                         "backend: {name: docker, data_root: /d, slots: 8}\n"
                         "ledger: {path: /l}\n"
                         "groups:\n  score: {group_by: [job_id], ready_when: single}\n");
  altar_config_t c;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_config_load(path, &c, &err), 0);
  CU_ASSERT_STRING_EQUAL(c.transport_name, "kafka");
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&c.transport_props, "bootstrap.servers"), "127.0.0.1:9092");
  CU_ASSERT_STRING_EQUAL(altar_strmap_get(&c.transport_props, "security.protocol"), "SASL_SSL");
  CU_ASSERT_STRING_EQUAL(c.topics.jobs, "j");
  CU_ASSERT_STRING_EQUAL(c.topics.ready, "altar.ready");
  CU_ASSERT_STRING_EQUAL(c.backend_name, "docker");
  CU_ASSERT_STRING_EQUAL(c.ledger_path, "/l");
  CU_ASSERT_EQUAL(altar_config_set(&c, "backend.slots", "2", &err), 0);
  long long slots;
  CU_ASSERT_EQUAL(altar_config_backend_int(&c, "slots", 1, 1, 1024, &slots, &err), 0);
  CU_ASSERT_EQUAL(slots, 2);
  CU_ASSERT_EQUAL(altar_config_set(&c, "backend.slots", "lots", &err), 0);
  CU_ASSERT_EQUAL(altar_config_backend_int(&c, "slots", 1, 1, 1024, &slots, &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "backend.slots") != NULL);
  CU_ASSERT_EQUAL(altar_config_set(&c, "bogus.key", "1", &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "bogus.key") != NULL);
  altar_config_clear(&c);
  free(path);
}

static void test_topic_partitions(void) {
  char *path = write_tmp("topics: {jobs: j, partitions: 64}\n");
  altar_config_t c;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_config_load(path, &c, &err), 0);
  CU_ASSERT_EQUAL(c.topic_partitions, 64);
  CU_ASSERT_EQUAL(altar_config_set(&c, "topics.partitions", "8", &err), 0);
  CU_ASSERT_EQUAL(c.topic_partitions, 8);
  CU_ASSERT_EQUAL(altar_config_set(&c, "topics.partitions", "0", &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "topics.partitions") != NULL);
  CU_ASSERT_EQUAL(altar_config_set(&c, "topics.partitions", "12x", &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_config_set(&c, "topics.partitions", "10001", &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(c.topic_partitions, 8);
  altar_config_clear(&c);
  free(path);
  path = write_tmp("topics:\n  partitions: lots\n");
  CU_ASSERT_EQUAL(altar_config_load(path, &c, &err), ALTAR_ECONFIG);
  CU_ASSERT(strstr(err.msg, ":2:") != NULL && strstr(err.msg, "topics.partitions") != NULL);
  /* The key is named once: "file:2: topics.partitions: must be ...". */
  const char *first = strstr(err.msg, "topics.partitions");
  CU_ASSERT(first && !strstr(first + 1, "topics.partitions"));
  CU_ASSERT(strstr(err.msg, "topics.partitions: must be an integer in [1, 10000], got \"lots\"") != NULL);
  altar_config_clear(&c);
  free(path);
}

/* storage.python: both forms of a scheme, typed options, each scheme's line
 * kept for the errors that come later, and mistakes refused with their line. */
static void storage_refused(const char *yaml, const char *want) {
  char *path = write_tmp(yaml);
  altar_config_t c;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_config_load(path, &c, &err), ALTAR_ECONFIG);
  if (!strstr(err.msg, want)) fprintf(stderr, "\n  wanted \"%s\" in: %s\n", want, err.msg);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, want));
  altar_config_clear(&c);
  free(path);
}

static void test_storage_python(void) {
  char *path = write_tmp("backend: {name: process}\n"
                         "storage:\n"
                         "  python:\n"
                         "    python: /venv/bin/python\n"
                         "    reply_timeout_ms: 9000\n"
                         "    schemes:\n"
                         "      vault: dirstore\n"
                         "      box: {adapter: dirstore, options: {root: /srv/box, depth: 2, cache: null}}\n");
  altar_config_t c;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_config_load(path, &c, &err), 0);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c.storage_python);
  CU_ASSERT_STRING_EQUAL(c.storage_python,
                         "{\"line\":4,\"python\":\"/venv/bin/python\",\"python_line\":4,\"reply_timeout_ms\":9000,"
                         "\"schemes\":[{\"adapter\":\"dirstore\",\"line\":7,\"options\":{},\"scheme\":\"vault\"},"
                         "{\"adapter\":\"dirstore\",\"line\":8,\"options\":{\"cache\":null,\"depth\":2,\"root\":"
                         "\"/srv/box\"},\"scheme\":\"box\"}]}");
  altar_config_clear(&c);
  free(path);
  path = write_tmp("backend: {name: process}\n");
  CU_ASSERT_EQUAL(altar_config_load(path, &c, &err), 0);
  CU_ASSERT_PTR_NULL(c.storage_python);
  altar_config_clear(&c);
  free(path);

  storage_refused("storage:\n  pyton: {}\n", ":2: storage.pyton: unknown key (did you mean \"python\"?)");
  storage_refused("storage: [python]\n", ":1: storage: expected a mapping");
  storage_refused("storage:\n  python:\n    python: p\n", ":3: storage.python: schemes: required");
  storage_refused("storage:\n  python:\n    schemes: {}\n", "storage.python: schemes: required");
  storage_refused("storage:\n  python:\n    schemes: {Vault: a}\n",
                  ":3: storage.python.schemes.Vault: a URI scheme is");
  storage_refused("storage:\n  python:\n    schemes: {v_x: a}\n", "storage.python.schemes.v_x: a URI scheme is");
  storage_refused("storage:\n  python:\n    schemes:\n      vault: [a]\n",
                  ":4: storage.python.schemes.vault: expected an adapter's name");
  storage_refused("storage:\n  python:\n    schemes:\n      vault: {options: {}}\n",
                  ":4: storage.python.schemes.vault: adapter: required");
  storage_refused("storage:\n  python:\n    schemes:\n      vault: {adapter: a, option: {}}\n",
                  ":4: storage.python.schemes.vault.option: unknown key (did you mean \"options\"?)");
  storage_refused("storage:\n  python:\n    schemes:\n      vault: {adapter: a, options: [1]}\n",
                  ":4: storage.python.schemes.vault.options: expected a mapping");
  storage_refused("storage:\n  python:\n    schemes:\n      vault: a\n      vault: b\n",
                  ":5: storage.python.schemes.vault: given twice");
  storage_refused("storage:\n  python:\n    schemes: {vault: a}\n    cancel_grace_ms: soon\n",
                  ":4: storage.python.cancel_grace_ms: expected a positive integer");
  storage_refused("storage:\n  python:\n    schemes: {vault: a}\n    reply_timeout: 5\n",
                  ":4: storage.python.reply_timeout: unknown key (did you mean \"reply_timeout_ms\"?)");
}

/* ledger.settled_cache_entries: a default, a file's value, bounds named. */
static void test_settled_cache_entries(void) {
  char *path = write_tmp("ledger: {settled_cache_entries: 5000}\n");
  altar_config_t c;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_config_load(NULL, &c, &err), 0);
  CU_ASSERT_EQUAL(c.ledger_settled_cache_entries, ALTAR_DEFAULT_SETTLED_CACHE_ENTRIES);
  altar_config_clear(&c);
  CU_ASSERT_EQUAL(altar_config_load(path, &c, &err), 0);
  CU_ASSERT_EQUAL(c.ledger_settled_cache_entries, 5000);
  CU_ASSERT_EQUAL(altar_config_set(&c, "ledger.settled_cache_entries", "0", &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "ledger.settled_cache_entries") != NULL);
  CU_ASSERT_EQUAL(altar_config_set(&c, "ledger.settled_cache_entries", "-3", &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_config_set(&c, "ledger.settled_cache_entries", "1e5", &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_config_set(&c, "ledger.settled_cache_entries", "100000001", &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(c.ledger_settled_cache_entries, 5000);
  CU_ASSERT_EQUAL(altar_config_set(&c, "ledger.settled_cache_entries", "1", &err), 0);
  CU_ASSERT_EQUAL(c.ledger_settled_cache_entries, 1);
  altar_config_clear(&c);
  free(path);
}

/* ledger.standby and ledger.standby_poll_ms: defaults, a file's values,
 * bad values refused naming the key. */
static void test_standby_keys(void) {
  char *path = write_tmp("ledger: {standby: true, standby_poll_ms: 250}\n");
  altar_config_t c;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_config_load(NULL, &c, &err), 0);
  CU_ASSERT(!c.ledger_standby);
  CU_ASSERT_EQUAL(c.ledger_standby_poll_ms, ALTAR_DEFAULT_STANDBY_POLL_MS);
  altar_config_clear(&c);
  CU_ASSERT_EQUAL(altar_config_load(path, &c, &err), 0);
  CU_ASSERT(c.ledger_standby);
  CU_ASSERT_EQUAL(c.ledger_standby_poll_ms, 250);
  CU_ASSERT_EQUAL(altar_config_set(&c, "ledger.standby", "yes", &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "ledger.standby") != NULL);
  CU_ASSERT(c.ledger_standby);
  CU_ASSERT_EQUAL(altar_config_set(&c, "ledger.standby", "false", &err), 0);
  CU_ASSERT(!c.ledger_standby);
  CU_ASSERT_EQUAL(altar_config_set(&c, "ledger.standby_poll_ms", "5", &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "ledger.standby_poll_ms") != NULL);
  CU_ASSERT_EQUAL(altar_config_set(&c, "ledger.standby_poll_ms", "60001", &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_config_set(&c, "ledger.standby_poll_ms", "1s", &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(c.ledger_standby_poll_ms, 250);
  altar_config_clear(&c);
  free(path);
}

static void test_errors_name_line(void) {
  char *path = write_tmp("transport: {name: local}\ntopics:\n  jobs: a\n  jbos: b\n");
  altar_config_t c;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_config_load(path, &c, &err), ALTAR_ECONFIG);
  CU_ASSERT(strstr(err.msg, ":4: topics.jbos: unknown key (did you mean \"jobs\"?)") != NULL);
  altar_config_clear(&c);
  free(path);
  path = write_tmp("transprt: {name: local}\n");
  CU_ASSERT_EQUAL(altar_config_load(path, &c, &err), ALTAR_ECONFIG);
  CU_ASSERT(strstr(err.msg, ":1: transprt: unknown key (did you mean \"transport\"?)") != NULL);
  altar_config_clear(&c);
  free(path);
  path = write_tmp("topics: [a, b\n");
  CU_ASSERT_EQUAL(altar_config_load(path, &c, &err), ALTAR_ECONFIG);
  CU_ASSERT(strstr(err.msg, path) != NULL);
  altar_config_clear(&c);
  free(path);
  path = write_tmp("topics: {jobs: [x]}\n");
  CU_ASSERT_EQUAL(altar_config_load(path, &c, &err), ALTAR_ECONFIG);
  CU_ASSERT(strstr(err.msg, "topics.jobs: expected a scalar") != NULL);
  altar_config_clear(&c);
  free(path);
}

/* A key under transport: that the named transport does not read is refused
 * with its line and the closest key: `dri:` would otherwise leave the log at
 * its default directory. Kafka properties live under transport.kafka and
 * are not checked here. */
static void test_transport_key_typo(void) {
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_transport_register(&altar_transport_local_ops), 0);
  char *path = write_tmp("transport:\n  name: local\n  dri: ./x\n  kafka: {bootstrap.servers: h:1}\n");
  altar_config_t c;
  CU_ASSERT_EQUAL(altar_config_load(path, &c, &err), ALTAR_ECONFIG);
  CU_ASSERT(strstr(err.msg, path) != NULL);
  CU_ASSERT(strstr(err.msg, ":3: transport.dri: unknown key for the local transport (did you mean \"dir\"?)") != NULL);
  altar_config_clear(&c);
  free(path);
  path = write_tmp("transport:\n  name: local\n  dir: ./x\n  fsync: never\n");
  CU_ASSERT_EQUAL(altar_config_load(path, &c, &err), 0);
  altar_config_clear(&c);
  free(path);
  path = write_tmp("transport: {name: local, dir: ./x}\nbackend: {name: process}\nledgr: {path: ./l}\n");
  CU_ASSERT_EQUAL(altar_config_load(path, &c, &err), ALTAR_ECONFIG);
  CU_ASSERT(strstr(err.msg, ":3: ledgr: unknown key (did you mean \"ledger\"?)") != NULL);
  altar_config_clear(&c);
  free(path);
}

/* plugins: entries resolve against the config file's directory and keep
 * their line, for the loader's FILE:LINE messages. */
static void test_plugins_list(void) {
  char *path = write_tmp("backend: {name: mine}\nplugins:\n  - plug/mine.so\n  - /abs/other.so\n");
  char *dir = strdup(path);
  *strrchr(dir, '/') = '\0';
  altar_config_t c;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL_FATAL(altar_config_load(path, &c, &err), 0);
  CU_ASSERT_EQUAL_FATAL(c.n_plugins, 2);
  char want[4200];
  snprintf(want, sizeof want, "%s/plug/mine.so", dir);
  CU_ASSERT_STRING_EQUAL(c.plugins[0], want);
  CU_ASSERT_EQUAL(c.plugin_lines[0], 3);
  CU_ASSERT_STRING_EQUAL(c.plugins[1], "/abs/other.so");
  CU_ASSERT_EQUAL(c.plugin_lines[1], 4);
  altar_config_clear(&c);
  free(path);
  free(dir);
  static const char *const bad[][2] = {
      {"plugins: mine.so\n", ":1: plugins: expected a list of plug-in files"},
      {"plugins:\n  - {a: b}\n", ":2: plugins[0]: expected the path of a plug-in file"},
      {"plugins: [a.so]\nplugins: [b.so]\n", ":2: plugins: given twice"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    path = write_tmp(bad[i][0]);
    CU_ASSERT_EQUAL(altar_config_load(path, &c, &err), ALTAR_ECONFIG);
    if (!strstr(err.msg, bad[i][1])) fprintf(stderr, "want '%s' in '%s'\n", bad[i][1], err.msg);
    CU_ASSERT(strstr(err.msg, bad[i][1]) != NULL);
    altar_config_clear(&c);
    free(path);
  }
}

/* The lines of the plug-in names (checked by the CLI once plug-ins are
 * loaded) and the two metrics keys, one per kind of daemon. */
static void test_name_lines_and_metrics_keys(void) {
  char *path = write_tmp("ledger: {path: /l}\n"
                         "backend:\n  slots: 2\n  name: process\n"
                         "transport: {name: lcoal, dir: /x}\n"
                         "metrics: {addr: \"127.0.0.1:9464\", worker_addr: \"127.0.0.1:9470-9479\"}\n");
  altar_config_t c;
  altar_error_t err = {0};
  /* An unregistered transport name reads (the CLI refuses it, naming this line). */
  CU_ASSERT_EQUAL_FATAL(altar_config_load(path, &c, &err), 0);
  CU_ASSERT_STRING_EQUAL(c.transport_name, "lcoal");
  CU_ASSERT_EQUAL(c.transport_name_line, 5);
  CU_ASSERT_EQUAL(c.backend_name_line, 4);
  CU_ASSERT_STRING_EQUAL(c.metrics_addr, "127.0.0.1:9464");
  CU_ASSERT_STRING_EQUAL(c.metrics_worker_addr, "127.0.0.1:9470-9479");
  CU_ASSERT_EQUAL(altar_config_set(&c, "metrics.worker_addr", "127.0.0.1:9500", &err), 0);
  CU_ASSERT_STRING_EQUAL(c.metrics_worker_addr, "127.0.0.1:9500");
  altar_config_clear(&c);
  free(path);
  /* Without a file, or without the keys, no line. */
  CU_ASSERT_EQUAL(altar_config_load(NULL, &c, &err), 0);
  CU_ASSERT_EQUAL(c.transport_name_line, 0);
  CU_ASSERT_EQUAL(c.backend_name_line, 0);
  CU_ASSERT_PTR_NULL(c.metrics_worker_addr);
  altar_config_clear(&c);
  path = write_tmp("metrics: {worker_adr: x}\n");
  CU_ASSERT_EQUAL(altar_config_load(path, &c, &err), ALTAR_ECONFIG);
  CU_ASSERT(strstr(err.msg, ":1: metrics.worker_adr: unknown key (did you mean \"worker_addr\"?)") != NULL);
  altar_config_clear(&c);
  free(path);
}

static void add(void) {
  ALTAR_SUITE("config", NULL, NULL);
  ALTAR_TEST(test_plugins_list);
  ALTAR_TEST(test_defaults);
  ALTAR_TEST(test_read_and_override);
  ALTAR_TEST(test_errors_name_line);
  ALTAR_TEST(test_storage_python);
  ALTAR_TEST(test_topic_partitions);
  ALTAR_TEST(test_settled_cache_entries);
  ALTAR_TEST(test_standby_keys);
  ALTAR_TEST(test_transport_key_typo);
  ALTAR_TEST(test_name_lines_and_metrics_keys);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
