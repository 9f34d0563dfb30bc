/* `process`: what the backend and its long-lived supervisor parent say to
 * each other over their socket (AF_UNIX, SOCK_SEQPACKET: one message per
 * request and per reply, never split).
 *
 * Request: altar_proc_zyg_req_t, then NUL-terminated strings: task_dir,
 * cgroup_dir, log_dir, argc arguments, envc environment entries; the task
 * file's locked descriptor rides along (SCM_RIGHTS).
 * Reply: altar_proc_zyg_rep_t; with a pid, the read end of the task's end
 * pipe rides along: it ends once the task's status is final (the
 * supervisor closed the lock first, or died).
 * Between the parent and a supervisor it keeps (its own socket pair, also
 * SOCK_SEQPACKET): the request as it came, with the lock and the end pipe's
 * write end; one byte back when the supervisor is idle again. */
#ifndef ALTAR_PROCESS_ZYGOTE_H
#define ALTAR_PROCESS_ZYGOTE_H

#include <stdint.h>

#define ALTAR_PROC_ZYG_MAGIC 0x616c7a31u /* "alz1": this layout */
/* Largest request; a task whose argv and environment need more is started
 * by exec instead (a datagram this size fits the default socket buffer). */
#define ALTAR_PROC_ZYG_MSG_MAX (120u * 1024u)
/* How long the backend waits for a reply before it counts the parent hung. */
#define ALTAR_PROC_ZYG_REPLY_TIMEOUT_MS 10000
/* Failures in a row after which the backend stops restarting the parent and
 * execs supervisors for the rest of its life. */
#define ALTAR_PROC_ZYG_MAX_FAILURES 3

typedef struct altar_proc_zyg_req {
  uint32_t magic;
  uint32_t argc, envc;
  int32_t cgroup_version;
  int64_t timeout_s, memory_mb;
  uint64_t log_cap;
} altar_proc_zyg_req_t;

typedef struct altar_proc_zyg_rep {
  int32_t pid; /* > 0: the supervisor; -1: none, err says why */
  int32_t err; /* an errno value */
} altar_proc_zyg_rep_t;

#endif
