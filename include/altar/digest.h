/* altar — SHA-256 content digests, verification records, and the POSIX sh
 * verifier that init containers run.
 *
 * A digest is exactly "sha256:" followed by 64 lowercase hex characters and
 * covers the bytes of one regular file (symlinks are followed). A digest in
 * any other form is a usage error (ALTAR_EINVAL); a file that is missing, is
 * not a regular file, or whose bytes differ is an integrity failure
 * (ALTAR_EINTEGRITY). See docs/digests.md for the record format. */
#ifndef ALTAR_DIGEST_H
#define ALTAR_DIGEST_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include "altar/error.h"
#include "altar/spec.h"

#include <stdbool.h>
#include <stddef.h>

#define ALTAR_DIGEST_PREFIX "sha256:"
#define ALTAR_DIGEST_HEX_LEN 64
/* strlen("sha256:") + 64 */
#define ALTAR_DIGEST_LEN 71
/* Room for a digest and its NUL. */
#define ALTAR_DIGEST_BUFSZ (ALTAR_DIGEST_LEN + 1)

/* Whether digest (may be NULL) is exactly "sha256:" + 64 lowercase hex. */
bool altar_digest_is_valid(const char *digest);
/* Same check, as an error: 0, or ALTAR_EINVAL with a message naming `field`
 * ("inputs[1].digest: malformed (want sha256:<64 lowercase hex>)"). */
int altar_digest_check(const char *field, const char *digest, altar_error_t *err);

/* "sha256:<hex>" of len bytes into out (ALTAR_DIGEST_BUFSZ). 0 or ALTAR_EIO
 * when OpenSSL fails. */
int altar_sha256_bytes(const void *data, size_t len, char out[ALTAR_DIGEST_BUFSZ], altar_error_t *err);

/* Streams one regular file (symlinks followed) through SHA-256 and writes
 * "sha256:<hex>" into out. A missing path, a directory or another non-regular
 * file is ALTAR_EINTEGRITY (the message says which); a read failure ALTAR_EIO.
 * Reads the file in fixed-size chunks, never all at once. */
int altar_sha256_file(const char *path, char out[ALTAR_DIGEST_BUFSZ], altar_error_t *err);

/* For a digest-bearing input at path (symlinks followed): ALTAR_EINTEGRITY
 * when it is a directory, the failure a mismatch is, since a digest covers
 * one regular file ("<path>: is a directory, ..."); 0 otherwise, a path
 * that does not exist included. Staging calls it on a source and on a
 * destination before it copies, so a directory is reported the same way
 * wherever it is found. */
int altar_digest_refuse_directory(const char *path, altar_error_t *err);

/* ---- verification records --------------------------------------------------
 * A record is a one-line file beside the target, `<dir>/.<name>.altar-verified`,
 * saying that the bytes matched a digest when the file had a given size,
 * mtime, ctime and inode. The C code below and the sh program write and accept
 * the same records. */

/* Path of the record for `path` (string operation only). Caller frees.
 * NULL on allocation failure or an empty path. */
char *altar_verification_record_path(const char *path);

/* True only when path is a regular file (symlinks followed) and its record
 * names digest and the file's current size, mtime, ctime and inode. Reads
 * the file's metadata and the small record, never the file's bytes. A
 * missing, unreadable, stale or malformed record (or a malformed digest)
 * gives false. */
bool altar_has_verification_record(const char *path, const char *digest);

/* Checks that path is a regular file whose SHA-256 is digest.
 * trust_record: a current record (above) accepts the file without hashing.
 * record: after a successful hash, writes a record atomically (temp file +
 *   rename); failing to write it never fails the check.
 * *phashed (may be NULL) is set to true when the bytes were hashed and false
 * when a record accepted the file.
 * Returns 0 on a match; ALTAR_EINVAL for a malformed digest (the file is not
 * touched); ALTAR_EINTEGRITY for a missing path, a non-regular file or a
 * mismatch; ALTAR_EIO when the file cannot be read. */
int altar_verify_file_digest(const char *path, const char *digest, bool trust_record, bool record, bool *phashed,
                             altar_error_t *err);

/* Verifies path against an input transfer's optional digest. No digest → 0
 * without touching the path. Otherwise always hashes (records are never
 * trusted here: this is where bytes enter storage); with record, a match
 * writes a record. Pass record only for a copy the caller owns. Errors as
 * altar_verify_file_digest; the message names the transfer's uri. */
int altar_verify_transfer_digest(const altar_transfer_t *transfer, const char *path, bool record, altar_error_t *err);

/* The POSIX sh program that verifies files the way altar_verify_file_digest
 * does. Run it as
 *   sh -c "$PROGRAM" NAME "<64 hex>  <path>" ...
 * (the sha256sum -c line format). For each line it requires a regular file,
 * accepts a current record when trust_records, else hashes with sha256sum and
 * writes a record after a match; prints one result line per file ("OK <path>
 * (record)", "OK <path> (hashed)", "FAILED <path>: <why>") and exits 1 when
 * any line failed. Needs only POSIX sh, stat -L -c and sha256sum (coreutils
 * or busybox). Static string; do not free. */
const char *altar_digest_verifier_program(bool trust_records);

ALTAR_API_END

#endif
