/* The write-behind thread of ledger/ledger_writer.h: one batch in
 * flight at a time, so a batch is never more than one commit behind. */
#include "ledger/ledger_writer.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct altar__lwriter {
  rocksdb_t *db;
  const rocksdb_writeoptions_t *wopts;
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  rocksdb_writebatch_t *busy; /* being written, or NULL */
  rocksdb_writebatch_t *idle; /* written and cleared: the next to fill */
  char *err;                  /* the first failed write's message */
  bool fail_next;             /* test hook: for the next batch handed over */
  bool busy_fails;            /* … which is the one in flight */
  bool stop;
};

static void *writer_main(void *arg) {
  altar__lwriter_t *w = arg;
  pthread_setname_np(pthread_self(), "altar-ledger-wr");
  pthread_mutex_lock(&w->mu);
  for (;;) {
    while (!w->busy && !w->stop) pthread_cond_wait(&w->cv, &w->mu);
    if (!w->busy) break;
    rocksdb_writebatch_t *b = w->busy;
    bool fail = w->busy_fails;
    pthread_mutex_unlock(&w->mu);
    char *dberr = NULL;
    if (fail) dberr = strdup("injected write failure");
    else rocksdb_write(w->db, w->wopts, b, &dberr);
    rocksdb_writebatch_clear(b);
    pthread_mutex_lock(&w->mu);
    if (dberr && !w->err) w->err = dberr;
    else free(dberr);
    w->idle = b;
    w->busy = NULL;
    pthread_cond_broadcast(&w->cv);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

altar__lwriter_t *altar__lwriter_start(rocksdb_t *db, const rocksdb_writeoptions_t *wopts) {
  altar__lwriter_t *w = calloc(1, sizeof *w);
  if (!w) return NULL;
  w->db = db;
  w->wopts = wopts;
  w->idle = rocksdb_writebatch_create();
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  if (pthread_create(&w->th, NULL, writer_main, w) != 0) {
    rocksdb_writebatch_destroy(w->idle);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
    return NULL;
  }
  return w;
}

/* With w->mu held: waits for the batch in flight; the sticky error, copied. */
static char *wait_idle(altar__lwriter_t *w) {
  while (w->busy) pthread_cond_wait(&w->cv, &w->mu);
  return w->err ? strdup(w->err) : NULL;
}

char *altar__lwriter_submit(altar__lwriter_t *w, rocksdb_writebatch_t **pwb) {
  pthread_mutex_lock(&w->mu);
  char *err = wait_idle(w);
  if (!err) {
    w->busy = *pwb;
    w->busy_fails = w->fail_next;
    w->fail_next = false;
    *pwb = w->idle;
    w->idle = NULL;
    pthread_cond_broadcast(&w->cv);
  }
  pthread_mutex_unlock(&w->mu);
  return err;
}

char *altar__lwriter_drain(altar__lwriter_t *w) {
  pthread_mutex_lock(&w->mu);
  char *err = wait_idle(w);
  pthread_mutex_unlock(&w->mu);
  return err;
}

char *altar__lwriter_failed(altar__lwriter_t *w) {
  pthread_mutex_lock(&w->mu);
  char *err = w->err ? strdup(w->err) : NULL;
  pthread_mutex_unlock(&w->mu);
  return err;
}

void altar__lwriter_fail_next(altar__lwriter_t *w) {
  pthread_mutex_lock(&w->mu);
  w->fail_next = true;
  pthread_mutex_unlock(&w->mu);
}

void altar__lwriter_stop(altar__lwriter_t *w) {
  if (!w) return;
  pthread_mutex_lock(&w->mu);
  w->stop = true;
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->th, NULL);
  if (w->idle) rocksdb_writebatch_destroy(w->idle);
  free(w->err);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
  free(w);
}
