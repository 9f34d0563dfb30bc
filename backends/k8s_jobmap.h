/* A hash map from Job name to what a watch knows of it: one lookup per
 * handle a poll asks about, whatever the number of Jobs; removal keeps it
 * the size of what the watch still knows. Not thread-safe
 * (the watch holds its lock around every call). Not public. */
#ifndef ALTAR_K8S_JOBMAP_H
#define ALTAR_K8S_JOBMAP_H

#include "backends/k8s_api.h"

/* A Kubernetes uid is 36 characters; a longer one is refused as malformed. */
#define ALTAR_K8S_UID_MAX 40
#define ALTAR_K8S_LABEL_MAX 64

typedef struct altar__k8s_jobent {
  char *name;    /* owned; NULL: an empty slot */
  uint64_t hash; /* of name: a probe past another key compares this, not the string behind a pointer */
  char uid[ALTAR_K8S_UID_MAX];
  char pool[ALTAR_K8S_LABEL_MAX]; /* the altar.dev/pool label, "" when absent */
  altar_state_t state;
  altar_k8s_seen_t seen;
  bool confirmed;     /* the watch (or a list) reported this uid */
  uint32_t listed;    /* the list epoch that last saw this Job */
  double deleted_at;  /* monotonic s this Job was reported deleted (a tombstone's age) */
  double deadline_at; /* wall s its activeDeadlineSeconds ends it; 0: no deadline or not seen yet */
} altar__k8s_jobent_t;

typedef struct altar__k8s_jobmap {
  altar__k8s_jobent_t *slots;
  size_t cap, n;
} altar__k8s_jobmap_t;

/* The entry for name, or NULL. */
altar__k8s_jobent_t *altar__k8s_jobmap_get(const altar__k8s_jobmap_t *m, const char *name);
/* The entry for name, made (zeroed, seen UNKNOWN) when absent; NULL when out
 * of memory. Pointers stay valid until the next put or remove. */
altar__k8s_jobent_t *altar__k8s_jobmap_put(altar__k8s_jobmap_t *m, const char *name);
/* Drops name's entry; false when there was none. Moves other entries. */
bool altar__k8s_jobmap_remove(altar__k8s_jobmap_t *m, const char *name);
void altar__k8s_jobmap_clear(altar__k8s_jobmap_t *m);

#endif
