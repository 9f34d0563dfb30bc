/* altar — a pool of threads sharing a list of independent jobs. */
#include "core/job_pool.h"

#include <pthread.h>
#include <unistd.h>

#define JOB_POOL_MAX_THREADS 8

typedef struct {
  void (*run)(void *ctx, size_t i);
  void *ctx;
  size_t n, next;
  pthread_mutex_t mu;
} job_pool_t;

static void *worker_main(void *arg) {
  job_pool_t *pool = arg;
  for (;;) {
    pthread_mutex_lock(&pool->mu);
    size_t i = pool->next < pool->n ? pool->next++ : pool->n;
    pthread_mutex_unlock(&pool->mu);
    if (i == pool->n) return NULL;
    pool->run(pool->ctx, i);
  }
}

void altar__run_jobs(size_t n, void (*run)(void *ctx, size_t i), void *ctx) {
  if (n == 0) return;
  job_pool_t pool = {.run = run, .ctx = ctx, .n = n};
  pthread_mutex_init(&pool.mu, NULL);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  size_t want = cores < 1 ? 1 : cores > JOB_POOL_MAX_THREADS ? JOB_POOL_MAX_THREADS : (size_t)cores;
  if (want > n) want = n;
  pthread_t th[JOB_POOL_MAX_THREADS];
  size_t started = 0;
  while (started + 1 < want && pthread_create(&th[started], NULL, worker_main, &pool) == 0) started++;
  worker_main(&pool);
  for (size_t t = 0; t < started; t++) pthread_join(th[t], NULL);
  pthread_mutex_destroy(&pool.mu);
}
