/* A helper process spoken to in JSON Lines over a socketpair: the plumbing
 * the modal backend's SDK bridge and the python backend's adapter host
 * share. One request line, one reply line, in order; every reply bounded;
 * a late reply gets the helper SIGINT (so it can cancel the call in flight
 * and say so) and a helper that stays silent is killed. A socketpair rather
 * than pipes, so a write to a helper that died fails instead of raising
 * SIGPIPE. Not thread-safe: one caller at a time, as a backend is used. */
#ifndef ALTAR_BRIDGE_PIPE_H
#define ALTAR_BRIDGE_PIPE_H

#include "altar/buf.h"
#include "altar/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct altar__pipe {
  const char *label; /* prefix of every message ("modal bridge"); borrowed */
  size_t max_reply;  /* bytes one reply line may hold */
  pid_t pid;         /* 0 when not running */
  int fd;            /* our end; -1 when not running */
  altar_buf_t in;    /* bytes read past the last reply */
} altar__pipe_t;

/* A stopped pipe; label must outlive it. */
void altar__pipe_init(altar__pipe_t *p, const char *label, size_t max_reply);
/* Starts argv[0] (searched in PATH) with envp (NULL: this environment), its
 * stdin and stdout on the socketpair, stderr inherited. ALTAR_ECONFIG when it
 * cannot be run. */
int altar__pipe_spawn(altar__pipe_t *p, char *const argv[], char *const envp[], altar_error_t *err);
/* Closes our end (EOF: the helper exits), waits a little, then kills and
 * reaps it. Safe on a stopped pipe. */
void altar__pipe_stop(altar__pipe_t *p);
/* altar__pipe_stop and frees the buffer. */
void altar__pipe_free(altar__pipe_t *p);
static inline bool altar__pipe_running(const altar__pipe_t *p) { return p->fd >= 0; }

/* One line within limit_ms into *pline (malloc'd, without the newline).
 * ALTAR_ETIMEOUT (retriable) when late, ALTAR_EBACKEND (retriable) when the
 * helper closed its end, ALTAR_ETOOBIG past max_reply. */
int altar__pipe_read_line(altar__pipe_t *p, long limit_ms, char **pline, altar_error_t *err);
/* Writes text and a newline. ALTAR_EBACKEND (retriable) when the helper is gone. */
int altar__pipe_send(altar__pipe_t *p, const char *text, altar_error_t *err);
/* After a missed deadline: SIGINT, then up to grace_ms for the helper's
 * answer to the interrupted request (malloc'd, or NULL after stopping a
 * helper that stayed silent). */
char *altar__pipe_interrupt(altar__pipe_t *p, long grace_ms);

#endif
