/* The reconciler's hash map: puts, gets and deletes (which shift entries
 * back) against a plain array, including runs that wrap around the table. */
#include "core/hmap.h"
#include "testutil.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NKEYS 600

typedef struct {
  char key[16];
  bool present;
  int val;
} ref_t;

static void ref_init(ref_t *ref, const char *prefix) {
  for (int i = 0; i < NKEYS; i++) {
    snprintf(ref[i].key, sizeof ref[i].key, "%s%d", prefix, i);
    ref[i].present = false;
    ref[i].val = i;
  }
}

/* Every key gets what the reference says, and the count agrees. */
static void check_all(const altar__hmap_t *m, ref_t *ref) {
  size_t live = 0;
  for (int i = 0; i < NKEYS; i++) {
    void *v = altar__hmap_get(m, ref[i].key, strlen(ref[i].key));
    if (ref[i].present) {
      live++;
      CU_ASSERT_PTR_EQUAL(v, &ref[i].val);
    } else {
      CU_ASSERT_PTR_NULL(v);
    }
  }
  CU_ASSERT_EQUAL(m->n, live);
  size_t in_slots = 0;
  for (size_t i = 0; i < m->cap; i++) {
    in_slots += m->slots[i].key != NULL;
    /* a slot is taken exactly when its control byte says so, with its hash's tag */
    CU_ASSERT_EQUAL(m->ctrl[i] != 0, m->slots[i].key != NULL);
    if (m->ctrl[i]) CU_ASSERT_EQUAL(m->ctrl[i], 0x80 | (m->slots[i].hash >> 57));
  }
  CU_ASSERT_EQUAL(in_slots, live);
}

static void test_random_against_reference(void) {
  static ref_t ref[NKEYS];
  ref_init(ref, "k");
  altar__hmap_t m = {0};
  srand(7);
  /* Few live keys and many deletes keep the table small and its runs long
   * enough to wrap; then the live set grows so the table is resized. */
  for (int round = 0; round < 40000; round++) {
    int span = round < 20000 ? 24 : NKEYS;
    int i = rand() % span;
    if (rand() % 3) {
      /* half the puts with the hash given, which also tells the value replaced */
      size_t kl = strlen(ref[i].key);
      void *old = &m;
      int rc = rand() % 2 ? altar__hmap_put_h(&m, ref[i].key, kl, altar__hash(ref[i].key, kl), &ref[i].val, &old)
                          : altar__hmap_put(&m, ref[i].key, kl, &ref[i].val);
      CU_ASSERT_EQUAL_FATAL(rc, 0);
      if (old != &m) CU_ASSERT_PTR_EQUAL(old, ref[i].present ? &ref[i].val : NULL);
      CU_ASSERT_PTR_EQUAL(altar__hmap_get_h(&m, ref[i].key, kl, altar__hash(ref[i].key, kl)), &ref[i].val);
      ref[i].present = true;
    } else {
      void *v = altar__hmap_del(&m, ref[i].key, strlen(ref[i].key));
      CU_ASSERT_PTR_EQUAL(v, ref[i].present ? &ref[i].val : NULL);
      ref[i].present = false;
    }
    if (round % 997 == 0) check_all(&m, ref);
  }
  check_all(&m, ref);
  altar__hmap_clear(&m);
  for (int i = 0; i < NKEYS; i++) ref[i].present = false;
  check_all(&m, ref);
  altar__hmap_free(&m);
}

/* Runs that wrap: keys homed at the last slot spill into slot 0 and on,
 * where keys homed at slot 0 sit too; deleting from such a run must move
 * back exactly the entries that would otherwise become unreachable. */
static void test_wrapping_run(void) {
  static ref_t ref[NKEYS];
  ref_init(ref, "w");
  int last[3], first[3], n_last = 0, n_first = 0;
  for (int i = 0; i < NKEYS && (n_last < 3 || n_first < 3); i++) {
    uint64_t home = altar__hash(ref[i].key, strlen(ref[i].key)) & 15;
    if (home == 15 && n_last < 3) last[n_last++] = i;
    if (home == 0 && n_first < 3) first[n_first++] = i;
  }
  CU_ASSERT_EQUAL_FATAL(n_last, 3);
  CU_ASSERT_EQUAL_FATAL(n_first, 3);
  /* Each order of deletes, starting from slot 15 = last[0], slot 0 =
   * first[0], then the rest interleaved. */
  int order[6] = {last[0], first[0], last[1], first[1], last[2], first[2]};
  for (int start = 0; start < 6; start++) {
    altar__hmap_t m = {0};
    for (int k = 0; k < 6; k++) {
      ref_t *r = &ref[order[k]];
      CU_ASSERT_EQUAL_FATAL(altar__hmap_put(&m, r->key, strlen(r->key), &r->val), 0);
      r->present = true;
    }
    CU_ASSERT_EQUAL(m.cap, 16);
    check_all(&m, ref);
    for (int k = 0; k < 6; k++) {
      ref_t *r = &ref[order[(start + k) % 6]];
      CU_ASSERT_PTR_EQUAL(altar__hmap_del(&m, r->key, strlen(r->key)), &r->val);
      r->present = false;
      check_all(&m, ref);
    }
    altar__hmap_free(&m);
  }
}

/* A slot shows the key pointer a put gave it, replaced with the value. */
static void test_slot_keeps_put_key(void) {
  altar__hmap_t m = {0};
  char a[] = "task", b[] = "task";
  int va = 1, vb = 2;
  CU_ASSERT_PTR_NULL(altar__hmap_slot_h(&m, a, 4, altar__hash(a, 4)));
  CU_ASSERT_EQUAL(altar__hmap_put(&m, a, 4, &va), 0);
  const altar__hslot_t *s = altar__hmap_slot_h(&m, b, 4, altar__hash(b, 4));
  CU_ASSERT(s && s->key == a && s->val == &va && s->len == 4);
  CU_ASSERT_EQUAL(altar__hmap_put(&m, b, 4, &vb), 0);
  s = altar__hmap_slot_h(&m, a, 4, altar__hash(a, 4));
  CU_ASSERT(s && s->key == b && s->val == &vb);
  altar__hmap_free(&m);
}

/* reserve makes room at once: the puts it made room for never move the
 * table (entries found before and after); clear keeps a table of up to
 * 65,536 slots, and a larger one only while well used (it frees what one
 * wide batch grew once later batches are small). */
static void test_reserve_and_clear_bound(void) {
  enum { N = 40000 };
  char(*keys)[16] = malloc(N * sizeof *keys);
  CU_ASSERT_FATAL(keys != NULL);
  altar__hmap_t m = {0};
  CU_ASSERT_EQUAL(altar__hmap_put(&m, "first", 5, keys), 0);
  CU_ASSERT_EQUAL(altar__hmap_reserve(&m, N), 0);
  size_t cap = m.cap;
  CU_ASSERT((m.n + N) * 2 <= cap);
  CU_ASSERT_PTR_EQUAL(altar__hmap_get(&m, "first", 5), keys);
  altar__hslot_t *slots = m.slots;
  for (int i = 0; i < N; i++) {
    int kl = snprintf(keys[i], sizeof keys[i], "k%d", i);
    CU_ASSERT_EQUAL_FATAL(altar__hmap_put(&m, keys[i], (size_t)kl, &keys[i]), 0);
  }
  CU_ASSERT(m.cap == cap && m.slots == slots); /* no step grew it */
  CU_ASSERT_EQUAL(altar__hmap_reserve(&m, 10), 0);
  CU_ASSERT(m.cap == cap); /* room enough already */
  for (int i = 0; i < N; i += 997) CU_ASSERT_PTR_EQUAL(altar__hmap_get(&m, keys[i], strlen(keys[i])), &keys[i]);
  CU_ASSERT(cap > (1u << 16));
  altar__hmap_clear(&m); /* large and well used (a run of large batches): kept, emptied */
  CU_ASSERT(m.cap == cap && m.n == 0);
  CU_ASSERT_PTR_NULL(altar__hmap_get(&m, "first", 5));
  for (int i = 0; i < 1000; i++) CU_ASSERT_EQUAL_FATAL(altar__hmap_put(&m, keys[i], strlen(keys[i]), &keys[i]), 0);
  altar__hmap_clear(&m); /* large, little used (what one wide batch left): freed */
  CU_ASSERT(m.cap == 0 && m.n == 0 && m.slots == NULL);
  for (int i = 0; i < 1000; i++) CU_ASSERT_EQUAL_FATAL(altar__hmap_put(&m, keys[i], strlen(keys[i]), &keys[i]), 0);
  cap = m.cap;
  altar__hmap_clear(&m); /* small: kept, emptied */
  CU_ASSERT(m.cap == cap && m.n == 0);
  CU_ASSERT_PTR_NULL(altar__hmap_get(&m, keys[0], strlen(keys[0])));
  altar__hmap_free(&m);
  free(keys);
}

static void add(void) {
  ALTAR_SUITE("hmap", NULL, NULL);
  ALTAR_TEST(test_random_against_reference);
  ALTAR_TEST(test_wrapping_run);
  ALTAR_TEST(test_slot_keeps_put_key);
  ALTAR_TEST(test_reserve_and_clear_bound);
}

int main(int argc, char **argv) { return altar_test_main(argc, argv, add); }
