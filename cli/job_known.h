/* Whether this fleet knows a job id (cli/job_known.c). */
#ifndef ALTAR_CLI_JOB_KNOWN_H
#define ALTAR_CLI_JOB_KNOWN_H

#include "altar/config.h"
#include "altar/error.h"

#include <stdbool.h>

/* *pknown: the ledger has a record labelled with job, or a job message of it
 * is on the jobs topic or a pool's jobs topic (read to their ends as of
 * now). A missing ledger counts as no record. 0, or an error code with err
 * set when the log could not be read (*pknown is then unset). */
int altar_cli_job_known(const altar_config_t *cfg, const char *job, bool *pknown, altar_error_t *err);

#endif
