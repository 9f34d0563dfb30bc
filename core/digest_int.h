/* Shared between core/digest.c, core/verify_record.c and core/identity.c;
 * not public API. */
#ifndef ALTAR_DIGEST_INT_H
#define ALTAR_DIGEST_INT_H

#include "altar/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

/* SHA-256 of data into md (32 bytes); 0, or -1 when OpenSSL fails. */
int altar__sha256(const void *data, size_t len, unsigned char md[32]);

/* First token of every record line; bump the number if the format changes. */
#define ALTAR__RECORD_TAG "altar-verified/1"
#define ALTAR__RECORD_SUFFIX ".altar-verified"
/* A record line is far shorter; anything longer is not a record. */
#define ALTAR__RECORD_MAX 512

/* Formats the record line (without newline) for digest and st into out.
 * Returns the length, or -1 when it does not fit. */
int altar__record_line(const char *digest, const struct stat *st, char *out, size_t outsz);

/* Whether the record beside path names digest and matches st (the target's
 * current metadata, already known to be a regular file). */
bool altar__record_matches(const char *path, const char *digest, const struct stat *st);

/* Writes the record for path atomically. Failures are reported but callers
 * that verify ignore them. */
int altar__record_write(const char *path, const char *digest, const struct stat *st, altar_error_t *err);

#endif
