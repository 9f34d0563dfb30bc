/* The POSIX sh program that checks staged files against their digests inside
 * an init container, the way altar_verify_file_digest does in C. It needs
 * only sh, test, stat -L -c and sha256sum (coreutils or busybox).
 *
 * It writes and accepts the record format of verify_record.c. Nanosecond
 * times are assembled from %Y/%Z (whole seconds) and the 9-digit fraction of
 * %y/%z, since busybox stat has no %.9Y; a stat that prints no 9-digit
 * fraction yields no metadata, so records are then neither trusted nor
 * written (the file is always hashed). */
#include "altar/digest.h"

/* Prints the metadata part of a record line for $1, or nothing. The fields
 * of `stat -c '%s %Y %Z %i %y %z'` are: size, mtime s, ctime s, inode, then
 * date, time.fraction, zone for %y and again for %z. */
#define ALTAR__SH_META                                                                                                 \
  "altar_meta() {\n"                                                                                                   \
  "  m=$(stat -L -c '%s %Y %Z %i %y %z' -- \"$1\" 2>/dev/null) || return 0\n"                                          \
  "  set -- $m\n"                                                                                                      \
  "  [ $# -eq 10 ] || return 0\n"                                                                                      \
  "  mf=${6#*.}; cf=${9#*.}\n"                                                                                         \
  "  case $mf$cf in\n"                                                                                                 \
  "    [0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]"                                    \
  "[0-9][0-9][0-9]) ;;\n"                                                                                              \
  "    *) return 0 ;;\n"                                                                                               \
  "  esac\n"                                                                                                           \
  "  mt=$2$mf; ct=$3$cf\n"                                                                                             \
  "  while :; do case $mt in 0?*) mt=${mt#0} ;; *) break ;; esac; done\n"                                              \
  "  while :; do case $ct in 0?*) ct=${ct#0} ;; *) break ;; esac; done\n"                                              \
  "  printf 'size=%s mtime_ns=%s ctime_ns=%s ino=%s' \"$1\" \"$mt\" \"$ct\" \"$4\"\n"                                  \
  "}\n"

/* One result line per argument; rc=1 once anything fails. */
#define ALTAR__SH_BODY                                                                                                 \
  ALTAR__SH_META                                                                                                       \
  "rc=0\n"                                                                                                             \
  "for line do\n"                                                                                                      \
  "  hex=${line%%  *}\n"                                                                                               \
  "  p=${line#*  }\n"                                                                                                  \
  "  if [ \"$hex\" = \"$line\" ] || [ -z \"$p\" ]; then\n"                                                             \
  "    echo \"FAILED $line: malformed line (want '<64 hex>  <path>')\"; rc=1; continue\n"                              \
  "  fi\n"                                                                                                             \
  "  case $hex in\n"                                                                                                   \
  "    *[!0-9a-f]*) ok=no ;;\n"                                                                                        \
  "    *) if [ ${#hex} -eq 64 ]; then ok=yes; else ok=no; fi ;;\n"                                                     \
  "  esac\n"                                                                                                           \
  "  if [ $ok = no ]; then\n"                                                                                          \
  "    echo \"FAILED $p: malformed digest (want 64 lowercase hex)\"; rc=1; continue\n"                                 \
  "  fi\n"                                                                                                             \
  "  if [ ! -e \"$p\" ]; then echo \"FAILED $p: missing\"; rc=1; continue; fi\n"                                       \
  "  if [ -d \"$p\" ]; then echo \"FAILED $p: is a directory\"; rc=1; continue; fi\n"                                  \
  "  if [ ! -f \"$p\" ]; then echo \"FAILED $p: not a regular file\"; rc=1; continue; fi\n"                            \
  "  case $p in */*) d=${p%/*}/ ;; *) d= ;; esac\n"                                                                    \
  "  rec=$d.${p##*/}.altar-verified\n"                                                                                 \
  "  before=$(altar_meta \"$p\")\n"                                                                                    \
  "  if [ $trust = 1 ] && [ -n \"$before\" ] && [ -f \"$rec\" ]; then\n"                                               \
  "    have=\n"                                                                                                        \
  "    IFS= read -r have 2>/dev/null <\"$rec\"\n"                                                                      \
  "    if [ \"$have\" = \"altar-verified/1 sha256:$hex $before\" ]; then\n"                                            \
  "      echo \"OK $p (record)\"; continue\n"                                                                          \
  "    fi\n"                                                                                                           \
  "  fi\n"                                                                                                             \
  "  if ! sum=$(sha256sum <\"$p\"); then echo \"FAILED $p: unreadable\"; rc=1; continue; fi\n"                         \
  "  sum=${sum%% *}\n"                                                                                                 \
  "  if [ \"$sum\" != \"$hex\" ]; then\n"                                                                              \
  "    echo \"FAILED $p: mismatch (got sha256:$sum)\"; rc=1; continue\n"                                               \
  "  fi\n"                                                                                                             \
  "  after=$(altar_meta \"$p\")\n"                                                                                     \
  "  if [ -n \"$before\" ] && [ \"$before\" = \"$after\" ]; then\n"                                                    \
  "    tmp=$rec.tmp.$$\n"                                                                                              \
  "    { printf '%s\\n' \"altar-verified/1 sha256:$hex $after\" >\"$tmp\" &&"                                          \
  " mv -f \"$tmp\" \"$rec\"; } 2>/dev/null || rm -f \"$tmp\" 2>/dev/null\n"                                            \
  "  fi\n"                                                                                                             \
  "  echo \"OK $p (hashed)\"\n"                                                                                        \
  "done\n"                                                                                                             \
  "exit $rc\n"

static const char program_trusting[] = "trust=1\n" ALTAR__SH_BODY;
static const char program_hashing[] = "trust=0\n" ALTAR__SH_BODY;

const char *altar_digest_verifier_program(bool trust_records) {
  return trust_records ? program_trusting : program_hashing;
}
