/* A task's output made fit for a failure's detail: the last bytes of its
 * stderr and stdout, bounded, valid UTF-8, with the values of secret-looking
 * environment variables replaced. Every backend builds its detail with these,
 * so the same output gives the same detail whatever ran it. */
#ifndef ALTAR_LOG_TAIL_H
#define ALTAR_LOG_TAIL_H

#include <stdbool.h>
#include <stddef.h>

#define ALTAR_REDACTED "[redacted]"
/* Values shorter than this are never redacted: "1" or "yes" would blank out
 * half the text and protect nothing. */
#define ALTAR_REDACT_MIN 4

/* Whether the environment variable NAME (n bytes) names a secret: its name
 * holds SECRET, TOKEN, PASSWORD, PASSWD, CREDENTIAL, PRIVATE, AUTH, API_KEY
 * or ACCESS_KEY, or ends in _KEY / _PASS / _PWD (case-insensitive). */
bool altar_env_name_secret(const char *name, size_t n);

/* The last at most max bytes of data[0..len), as text: values of the secret
 * entries of envp ("NAME=value", NULL-terminated; NULL: none) replaced by
 * ALTAR_REDACTED before cutting, invalid UTF-8 and NUL bytes replaced by '?',
 * control characters other than newline and tab by ' ', the cut made at a
 * character boundary. *pcut (may be NULL) tells whether bytes were dropped at
 * the front. Returns a NUL-terminated malloc'd string (caller frees), NULL
 * when out of memory. */
char *altar_log_tail_text(const char *data, size_t len, size_t max, const char *const *envp, bool *pcut);

/* A failure detail of at most bound bytes (bound >= 64): base (NULL: none),
 * then "\n--- stderr (last N bytes) ---\n" and the tail of err, then the
 * same for out, each cleaned as altar_log_tail_text does. stderr gets three
 * quarters of the room when both have output, all of it when only one has.
 * Empty streams are left out; with both empty the result is base. Returns a
 * malloc'd string (caller frees), NULL when out of memory. */
char *altar_detail_with_output(const char *base, const char *err, size_t err_len, const char *out, size_t out_len,
                               const char *const *envp, size_t bound);

/* The text s with every secret value of envp replaced (as above); malloc'd,
 * caller frees; NULL when out of memory. */
char *altar_redact_env(const char *s, const char *const *envp);
/* The same for *plen bytes of data (NUL bytes allowed); *plen becomes the
 * result's length. */
char *altar_redact_env_n(const char *data, size_t *plen, const char *const *envp);

#endif
