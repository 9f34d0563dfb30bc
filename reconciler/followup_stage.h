/* The messages that start a group's next stage, made from its group event:
 * the follow-up job, or, when its template cannot be instantiated, the
 * status events that record it as failed (so the next stage's group sees a
 * failed member with the reason, and the daemon goes on). Internal to
 * reconciler/. */
#ifndef ALTAR_RECONCILER_FOLLOWUP_STAGE_H
#define ALTAR_RECONCILER_FOLLOWUP_STAGE_H

#include "altar/buf.h"
#include "altar/codec.h"
#include "altar/config.h"
#include "altar/groups.h"

/* Header on a follow-up job message: the group event id it follows. */
#define ALTAR_FOLLOWUP_HEADER "altar.followup.of"
/* Failure reason of a follow-up that could not be made. */
#define ALTAR_FOLLOWUP_INVALID "followup_invalid"

typedef struct altar__followup_rec {
  char *topic;
  char *key;
  altar_buf_t value;
} altar__followup_rec_t;

typedef struct altar__followup_out {
  altar__followup_rec_t recs[2]; /* the job; or the submitted and failed status events */
  size_t n;                      /* 0: g's kind declares no follow-up for this outcome */
  bool failed;                   /* the template could not be instantiated: recs are status events */
  char task_key[65];             /* the follow-up's */
  altar_error_t why;             /* when failed */
} altar__followup_out_t;

/* Makes the follow-up of g (deterministic: same g, same bytes). Errors only
 * for ALTAR_ENOMEM; a bad template or input is out->failed. Clear out with
 * altar__followup_out_clear (also after an error). */
int altar__followup_make(const altar_group_specs_t *groups, const altar_topics_t *topics, const altar_group_event_t *g,
                         altar__followup_out_t *out, altar_error_t *err);
void altar__followup_out_clear(altar__followup_out_t *out);

/* The jobs topics follow-ups of groups may go to (one per pool they name),
 * each once; *pn of them in out (at most max). */
size_t altar__followup_topics(const altar_group_specs_t *groups, const altar_topics_t *topics, char (*out)[512],
                              size_t max);

#endif
