/* group_by and every readiness predicate, including the misconfigured one. */
#include "altar/groups.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shards with labels from "k=v,k=v" strings. */
#define MAXS 16
static altar_handle_t hs[MAXS];
static const altar_handle_t *ps[MAXS];
static size_t ns;

static void shards(const char *const *specs, size_t n) {
  for (size_t i = 0; i < ns; i++) altar_handle_clear(&hs[i]);
  ns = n;
  for (size_t i = 0; i < n; i++) {
    char id[16];
    snprintf(id, sizeof id, "t%zu", i);
    altar_handle_init(&hs[i], "process", id);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", specs[i]);
    for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
      char *eq = strchr(kv, '=');
      if (!eq) continue;
      *eq = '\0';
      altar_strmap_set(&hs[i].labels, kv, eq + 1);
    }
    ps[i] = &hs[i];
  }
}

static bool ready(const altar_predicate_t *p) {
  bool r = true;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_predicate_eval(p, ps, ns, &r, &err), 0);
  return r;
}

static void test_group_by(void) {
  const char *labels[] = {"job_id", "model_id"};
  altar_group_by_t g;
  CU_ASSERT_EQUAL_FATAL(altar_group_by_init(&g, labels, 2), 0);
  const char *s[] = {"job_id=j1,model_id=m2,fold=0", "model_id=m2", "job_id=j1", ""};
  shards(s, 4);
  char *k = altar_group_by_key(&g, &hs[0]);
  CU_ASSERT_STRING_EQUAL(k, "j1:m2");
  free(k);
  k = altar_group_by_key(&g, &hs[1]); /* missing label: empty segment, no crash */
  CU_ASSERT_STRING_EQUAL(k, ":m2");
  free(k);
  k = altar_group_by_key(&g, &hs[2]);
  CU_ASSERT_STRING_EQUAL(k, "j1:");
  free(k);
  k = altar_group_by_key(&g, &hs[3]);
  CU_ASSERT_STRING_EQUAL(k, ":");
  free(k);
  /* Into a buffer: the length either way, the key only when it fits. */
  char buf[6] = "xxxxx";
  CU_ASSERT_EQUAL(altar_group_by_key_into(&g, &hs[0], buf, 3), 5);
  CU_ASSERT_EQUAL(altar_group_by_key_into(&g, &hs[0], NULL, 0), 5);
  CU_ASSERT_EQUAL(altar_group_by_key_into(&g, &hs[0], buf, sizeof buf), 5);
  CU_ASSERT_STRING_EQUAL(buf, "j1:m2");
  altar_group_by_clear(&g);
  const char *one[] = {"job_id"};
  altar_group_by_init(&g, one, 1);
  k = altar_group_by_key(&g, &hs[0]);
  CU_ASSERT_STRING_EQUAL(k, "j1");
  free(k);
  altar_group_by_clear(&g);
}

static void test_single_and_count(void) {
  altar_predicate_t p;
  altar_error_t err = {0};
  altar_predicate_single(&p);
  shards(NULL, 0);
  CU_ASSERT_FALSE(ready(&p));
  const char *one[] = {"fold=0"};
  shards(one, 1);
  CU_ASSERT(ready(&p));
  altar_predicate_clear(&p);
  CU_ASSERT_EQUAL(altar_predicate_count_at_least(&p, 2, &err), 0);
  CU_ASSERT_FALSE(ready(&p));
  const char *two[] = {"a=1", "a=2"};
  shards(two, 2);
  CU_ASSERT(ready(&p));
  altar_predicate_clear(&p);
  CU_ASSERT_EQUAL(altar_predicate_count_at_least(&p, 0, &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "count_at_least") != NULL);
}

static void test_all_folds(void) {
  altar_predicate_t p;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_predicate_all_folds(&p, 3, &err), 0);
  const char *partial[] = {"fold=0", "fold=2"};
  shards(partial, 2);
  CU_ASSERT_FALSE(ready(&p));
  const char *dup[] = {"fold=0", "fold=2", "fold=2"};
  shards(dup, 3);
  CU_ASSERT_FALSE(ready(&p)); /* three shards but fold 1 missing */
  const char *full[] = {"fold=2", "fold=0", "fold=1"};
  shards(full, 3);
  CU_ASSERT(ready(&p));
  altar_predicate_clear(&p);
  CU_ASSERT_EQUAL(altar_predicate_all_folds(&p, 0, &err), ALTAR_EINVAL);
  /* A rule may need more shards than one message lists (a wide group's
   * event is paged), up to the default most a group may hold. */
  CU_ASSERT_EQUAL(altar_predicate_all_folds(&p, ALTAR_MAX_ARRAY + 1, &err), 0);
  altar_predicate_clear(&p);
  CU_ASSERT_EQUAL(altar_predicate_all_folds(&p, ALTAR_GROUP_MAX_WIDTH_DEFAULT, &err), 0);
  altar_predicate_clear(&p);
  CU_ASSERT_EQUAL(altar_predicate_all_folds(&p, ALTAR_GROUP_MAX_WIDTH_DEFAULT + 1, &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_predicate_count_at_least(&p, ALTAR_GROUP_MAX_WIDTH_DEFAULT + 1, &err), ALTAR_EINVAL);
  CU_ASSERT(strstr(err.msg, "1000000") != NULL);
}

/* A fold is named only by its plain decimal: "01", "+1", "1 " and "-0" name
 * none, and values past the last fold are ignored. */
static void test_fold_spellings(void) {
  altar_predicate_t p;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_predicate_all_folds(&p, 2, &err), 0);
  const char *odd[] = {"fold=00", "fold=01", "fold=+1", "fold=1 ", "fold=-0", "fold=2", "fold=", "fold=10"};
  shards(odd, 8);
  CU_ASSERT_FALSE(ready(&p));
  const char *plain[] = {"fold=01", "fold=1", "fold=2", "fold=0"};
  shards(plain, 4);
  CU_ASSERT(ready(&p));
  altar_predicate_clear(&p);
  /* Wide: 12 folds among 16 shards, each fold once, in any order. */
  CU_ASSERT_EQUAL(altar_predicate_all_folds(&p, 12, &err), 0);
  const char *wide[] = {"fold=11", "fold=3", "fold=10", "fold=0", "fold=7",  "fold=1", "fold=9", "fold=2",
                        "fold=4",  "fold=8", "fold=5",  "fold=6", "fold=12", "fold=3", "fold=x", "fold=011"};
  shards(wide, 16);
  CU_ASSERT(ready(&p));
  shards(wide + 1, 15); /* fold 11 gone */
  CU_ASSERT_FALSE(ready(&p));
  altar_predicate_clear(&p);
}

/* The least number of succeeded shards each rule can be ready with. */
static void test_min_succeeded(void) {
  altar_predicate_t p;
  altar_error_t err = {0};
  altar_predicate_single(&p);
  CU_ASSERT_EQUAL(altar_predicate_min_succeeded(&p, NULL), 1);
  altar_predicate_clear(&p);
  altar_predicate_count_at_least(&p, 7, &err);
  CU_ASSERT_EQUAL(altar_predicate_min_succeeded(&p, NULL), 7);
  altar_predicate_clear(&p);
  altar_predicate_all_folds(&p, 5, &err);
  CU_ASSERT_EQUAL(altar_predicate_min_succeeded(&p, NULL), 5);
  altar_predicate_clear(&p);
  const char *vals[] = {"a", "b"};
  altar_predicate_all_label_values(&p, "x", vals, 2, &err);
  CU_ASSERT_EQUAL(altar_predicate_min_succeeded(&p, NULL), 1);
  altar_predicate_clear(&p);
  altar_predicate_all_expected_folds(&p, "fold", "num_folds", NULL, &err);
  const char *member[] = {"fold=0,num_folds=40", "fold=1,num_folds=x", "fold=2"};
  shards(member, 3);
  CU_ASSERT_EQUAL(altar_predicate_min_succeeded(&p, &hs[0]), 40);
  CU_ASSERT_EQUAL(altar_predicate_min_succeeded(&p, &hs[1]), 1); /* no valid count: no bound */
  CU_ASSERT_EQUAL(altar_predicate_min_succeeded(&p, &hs[2]), 1);
  CU_ASSERT_EQUAL(altar_predicate_min_succeeded(&p, NULL), 1);
  altar_predicate_clear(&p);
}

static void test_all_label_values(void) {
  altar_predicate_t p;
  altar_error_t err = {0};
  const char *vals[] = {"ref", "alt"};
  CU_ASSERT_EQUAL(altar_predicate_all_label_values(&p, "allele", vals, 2, &err), 0);
  const char *a[] = {"allele=ref"};
  shards(a, 1);
  CU_ASSERT_FALSE(ready(&p));
  const char *b[] = {"allele=ref", "allele=alt", "allele=het"};
  shards(b, 3);
  CU_ASSERT(ready(&p));
  altar_predicate_clear(&p);
  /* A fold is a string: "3", not 3. */
  const char *folds[] = {"0", "1", "2"};
  altar_predicate_all_label_values(&p, "fold", folds, 3, &err);
  const char *c[] = {"fold=0", "fold=1", "fold=02"};
  shards(c, 3);
  CU_ASSERT_FALSE(ready(&p));
  altar_predicate_clear(&p);
  CU_ASSERT_EQUAL(altar_predicate_all_label_values(&p, "fold", folds, 0, &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_predicate_all_label_values(&p, "", folds, 3, &err), ALTAR_EINVAL);
}

static void test_all_expected_folds(void) {
  altar_predicate_t p;
  altar_error_t err = {0};
  CU_ASSERT_EQUAL(altar_predicate_all_expected_folds(&p, "fold", "num_folds", NULL, &err), 0);
  /* A 5-fold model completes at 5 ... */
  const char *four[] = {"fold=0,num_folds=5", "fold=1,num_folds=5", "fold=2,num_folds=5", "fold=3,num_folds=5"};
  shards(four, 4);
  CU_ASSERT_FALSE(ready(&p));
  const char *five[] = {"fold=0,num_folds=5", "fold=1,num_folds=5", "fold=2,num_folds=5", "fold=3,num_folds=5",
                        "fold=4,num_folds=5"};
  shards(five, 5);
  CU_ASSERT(ready(&p));
  /* ... and a 1-shard model at 1, with the same spec. */
  const char *one[] = {"fold=0,num_folds=1"};
  shards(one, 1);
  CU_ASSERT(ready(&p));
  /* Several counts: the largest wins, so a partly labelled group waits. */
  const char *mixed[] = {"fold=0,num_folds=1", "fold=1,num_folds=3"};
  shards(mixed, 2);
  CU_ASSERT_FALSE(ready(&p));
  const char *partly[] = {"fold=0", "fold=1,num_folds=2"};
  shards(partly, 2);
  CU_ASSERT(ready(&p));
  /* Invalid counts are ignored. */
  const char *junk[] = {"fold=0,num_folds=x", "fold=1,num_folds=-2", "fold=2,num_folds=2"};
  shards(junk, 3);
  CU_ASSERT(ready(&p));
  /* No label and no default: an error, never pending forever. */
  const char *none[] = {"fold=0", "fold=1"};
  shards(none, 2);
  bool r = true;
  CU_ASSERT_EQUAL(altar_predicate_eval(&p, ps, ns, &r, &err), ALTAR_EPREDICATE);
  CU_ASSERT_FALSE(r);
  CU_ASSERT(strstr(err.msg, "num_folds") != NULL);
  altar_predicate_clear(&p);
  /* With a default the unlabelled group uses it. */
  int64_t def = 2;
  CU_ASSERT_EQUAL(altar_predicate_all_expected_folds(&p, "fold", "num_folds", &def, &err), 0);
  CU_ASSERT(ready(&p));
  def = 3;
  altar_predicate_clear(&p);
  altar_predicate_all_expected_folds(&p, "fold", "num_folds", &def, &err);
  CU_ASSERT_FALSE(ready(&p));
  altar_predicate_clear(&p);
  def = 0;
  CU_ASSERT_EQUAL(altar_predicate_all_expected_folds(&p, "fold", "num_folds", &def, &err), ALTAR_EINVAL);
  CU_ASSERT_EQUAL(altar_predicate_all_expected_folds(&p, "fold", "", NULL, &err), ALTAR_EINVAL);
  /* A count past what one group event lists is still a count: the group
   * waits for it (and is refused when it would be published), it does not
   * fall back to the default. */
  {
    int64_t two = 2;
    altar_predicate_t q;
    CU_ASSERT_EQUAL(altar_predicate_all_expected_folds(&q, "fold", "num_folds", &two, &err), 0);
    const char *wide[] = {"fold=0,num_folds=5000", "fold=1,num_folds=5000"};
    shards(wide, 2);
    CU_ASSERT_FALSE(ready(&q));
    altar_predicate_clear(&q);
  }
}

static int raising(void *ctx, const altar_handle_t *const *s, size_t n, bool *pready, altar_error_t *err) {
  (void)ctx;
  (void)s;
  (void)n;
  (void)pready;
  return altar_error_set(err, ALTAR_EPREDICATE, "custom says no");
}

static void test_custom_and_copy(void) {
  altar_predicate_t p, q;
  altar_error_t err = {0};
  altar_predicate_custom(&p, raising, NULL);
  bool r;
  CU_ASSERT_EQUAL(altar_predicate_eval(&p, ps, ns, &r, &err), ALTAR_EPREDICATE);
  CU_ASSERT_STRING_EQUAL(err.msg, "custom says no");
  const char *vals[] = {"a", "b"};
  altar_predicate_all_label_values(&p, "x", vals, 2, &err);
  CU_ASSERT_EQUAL(altar_predicate_copy(&q, &p), 0);
  altar_predicate_clear(&p);
  CU_ASSERT_EQUAL(q.n_values, 2);
  CU_ASSERT_STRING_EQUAL(q.values[1], "b");
  altar_predicate_clear(&q);
}

static void test_group_specs_set(void) {
  altar_group_specs_t s = {0};
  altar_group_spec_t g = {0};
  altar_error_t err = {0};
  g.kind = strdup("train");
  altar_predicate_single(&g.ready_when);
  CU_ASSERT_EQUAL(altar_group_specs_add(&s, &g, &err), 0);
  CU_ASSERT(g.kind == NULL); /* taken over */
  g.kind = strdup("train");
  CU_ASSERT_EQUAL(altar_group_specs_add(&s, &g, &err), ALTAR_EEXIST);
  altar_group_spec_clear(&g);
  CU_ASSERT(altar_group_specs_find(&s, "train") != NULL);
  CU_ASSERT(altar_group_specs_find(&s, "score") == NULL);
  CU_ASSERT_STRING_EQUAL(altar_failed_policy_name(ALTAR_ON_FAILED_DEAD_LETTER), "dead_letter");
  altar_group_specs_clear(&s);
}

static int cleanup(void) {
  shards(NULL, 0);
  return 0;
}

static void add(void) {
  ALTAR_SUITE("groups", NULL, cleanup);
  ALTAR_TEST(test_group_by);
  ALTAR_TEST(test_single_and_count);
  ALTAR_TEST(test_all_folds);
  ALTAR_TEST(test_fold_spellings);
  ALTAR_TEST(test_min_succeeded);
  ALTAR_TEST(test_all_label_values);
  ALTAR_TEST(test_all_expected_folds);
  ALTAR_TEST(test_custom_and_copy);
  ALTAR_TEST(test_group_specs_set);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
