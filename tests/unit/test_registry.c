/* Registries by name for backends, storage adapters and transports. */
#include "altar/registry.h"
#include "altar/plugin/storage.h"
#include "testutil.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static const int vt_a = 1, vt_b = 2;

static void test_register_lookup(void) {
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_registry_register(ALTAR_REGISTRY_BACKEND, "t-proc", &vt_a, &err), 0);
  CU_ASSERT_PTR_EQUAL(altar_registry_lookup(ALTAR_REGISTRY_BACKEND, "t-proc"), &vt_a);
  /* Kinds are separate namespaces. */
  CU_ASSERT_PTR_NULL(altar_registry_lookup(ALTAR_REGISTRY_TRANSPORT, "t-proc"));
  CU_ASSERT_EQUAL(altar_registry_register(ALTAR_REGISTRY_TRANSPORT, "t-proc", &vt_b, &err), 0);
  CU_ASSERT_PTR_EQUAL(altar_registry_lookup(ALTAR_REGISTRY_TRANSPORT, "t-proc"), &vt_b);
  /* Same pointer again: fine. Another pointer: taken. */
  CU_ASSERT_EQUAL(altar_registry_register(ALTAR_REGISTRY_BACKEND, "t-proc", &vt_a, &err), 0);
  CU_ASSERT_EQUAL(altar_registry_register(ALTAR_REGISTRY_BACKEND, "t-proc", &vt_b, &err), ALTAR_EEXIST);
  CU_ASSERT_PTR_NOT_NULL(strstr(err.msg, "t-proc"));
  CU_ASSERT_PTR_EQUAL(altar_registry_lookup(ALTAR_REGISTRY_BACKEND, "t-proc"), &vt_a);
  CU_ASSERT_TRUE(altar_registry_unregister(ALTAR_REGISTRY_BACKEND, "t-proc"));
  CU_ASSERT_FALSE(altar_registry_unregister(ALTAR_REGISTRY_BACKEND, "t-proc"));
  CU_ASSERT_PTR_NULL(altar_registry_lookup(ALTAR_REGISTRY_BACKEND, "t-proc"));
  altar_registry_unregister(ALTAR_REGISTRY_TRANSPORT, "t-proc");
}

static void test_bad_names(void) {
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_registry_register(ALTAR_REGISTRY_STORAGE, "", &vt_a, &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_registry_register(ALTAR_REGISTRY_STORAGE, NULL, &vt_a, &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_registry_register(ALTAR_REGISTRY_STORAGE, "has space", &vt_a, &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_registry_register(ALTAR_REGISTRY_STORAGE, "ok", NULL, &err), ALTAR_EINVAL);
  char longname[100];
  memset(longname, 'x', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  CU_ASSERT_EQUAL(altar_registry_register(ALTAR_REGISTRY_STORAGE, longname, &vt_a, &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_registry_register((altar_registry_kind_t)7, "x", &vt_a, &err), ALTAR_EINVAL);
  CU_ASSERT_PTR_NULL(altar_registry_lookup((altar_registry_kind_t)7, "x"));
}

static void test_names_and_get(void) {
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_storage_register_builtin(), 0);
  CU_ASSERT_EQUAL(altar_storage_register_builtin(), 0); /* idempotent */
  const char *names[16];
  size_t n = altar_registry_names(ALTAR_REGISTRY_STORAGE, names, 16);
  CU_ASSERT_EQUAL_FATAL(n, 7);
  static const char *const want[] = {"file", "gcs", "gs", "http", "https", "local", "s3"};
  for (size_t i = 0; i < 7; i++) CU_ASSERT_STRING_EQUAL(names[i], want[i]);
  CU_ASSERT_PTR_EQUAL(altar_registry_lookup(ALTAR_REGISTRY_STORAGE, "gcs"), &altar_storage_gcs_ops);
  CU_ASSERT_PTR_EQUAL(altar_registry_lookup(ALTAR_REGISTRY_STORAGE, "s3"), &altar_storage_s3_ops);
  CU_ASSERT_PTR_EQUAL(altar_registry_lookup(ALTAR_REGISTRY_STORAGE, "file"), &altar_storage_local_ops);
  CU_ASSERT_PTR_EQUAL(altar_registry_lookup(ALTAR_REGISTRY_STORAGE, "https"), &altar_storage_http_ops);
  const void *p = &vt_a;
  CU_ASSERT_EQUAL(altar_registry_get(ALTAR_REGISTRY_STORAGE, "ftp", &p, &err), ALTAR_ENOTFOUND);
  CU_ASSERT_PTR_NULL(p);
  CU_ASSERT_STRING_EQUAL(err.msg, "storage 'ftp' is not registered (known: file, gcs, gs, http, https, local, s3)");
  CU_ASSERT_EQUAL(altar_registry_get(ALTAR_REGISTRY_STORAGE, "local", &p, &err), 0);
  CU_ASSERT_PTR_EQUAL(p, &altar_storage_local_ops);
  CU_ASSERT_STRING_EQUAL(altar_registry_kind_name(ALTAR_REGISTRY_BACKEND), "backend");
  CU_ASSERT_STRING_EQUAL(altar_registry_kind_name(ALTAR_REGISTRY_TRANSPORT), "transport");
}

static void test_full(void) {
  static const char marks[ALTAR_REGISTRY_MAX + 1];
  char name[32];
  altar_error_t err = {0};
  size_t ok = 0;
  for (unsigned i = 0; i <= ALTAR_REGISTRY_MAX; i++) {
    snprintf(name, sizeof name, "full-%u", i);
    if (altar_registry_register(ALTAR_REGISTRY_TRANSPORT, name, &marks[i], &err) == 0) ok++;
  }
  CU_ASSERT_EQUAL(ok, ALTAR_REGISTRY_MAX);
  CU_ASSERT_EQUAL(err.code, ALTAR_ETOOBIG);
  for (unsigned i = 0; i <= ALTAR_REGISTRY_MAX; i++) {
    snprintf(name, sizeof name, "full-%u", i);
    altar_registry_unregister(ALTAR_REGISTRY_TRANSPORT, name);
  }
  CU_ASSERT_EQUAL(altar_registry_names(ALTAR_REGISTRY_TRANSPORT, NULL, 0), 0);
}

static const char thread_marks[8];
static void *reg_thread(void *arg) {
  size_t i = (size_t)arg;
  char name[32];
  snprintf(name, sizeof name, "thr-%zu", i);
  for (int k = 0; k < 200; k++) {
    if (altar_registry_register(ALTAR_REGISTRY_BACKEND, name, &thread_marks[i], NULL)) return (void *)1;
    if (altar_registry_lookup(ALTAR_REGISTRY_BACKEND, name) != &thread_marks[i]) return (void *)1;
  }
  return NULL;
}

static void test_threads(void) {
  pthread_t t[8];
  for (size_t i = 0; i < 8; i++) pthread_create(&t[i], NULL, reg_thread, (void *)i);
  for (size_t i = 0; i < 8; i++) {
    void *r;
    pthread_join(t[i], &r);
    CU_ASSERT_PTR_NULL(r);
  }
  const char *names[16];
  CU_ASSERT_EQUAL(altar_registry_names(ALTAR_REGISTRY_BACKEND, names, 16), 8);
  CU_ASSERT_STRING_EQUAL(names[0], "thr-0");
  CU_ASSERT_STRING_EQUAL(names[7], "thr-7");
}

static void add(void) {
  ALTAR_SUITE("registry", NULL, NULL);
  ALTAR_TEST(test_register_lookup);
  ALTAR_TEST(test_bad_names);
  ALTAR_TEST(test_names_and_get);
  ALTAR_TEST(test_full);
  ALTAR_TEST(test_threads);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
