#!/bin/sh
# Fails when a part's archive references a symbol that another part defines
# and DESIGN.md's arrows do not let the first reach. The arrows are written
# once, as ALTAR_REACH_<part> in the top-level CMakeLists.txt, which passes
# them here.
#
# usage: check_part_links.sh NM PART=ARCHIVE=REACHES...
#   REACHES is a comma-separated list of parts (empty: the part reaches none).
# Exit 0: every cross-part reference follows an arrow; 1: a forbidden one
# (each printed with the symbol and the objects on both sides); 2: bad usage.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 NM PART=ARCHIVE=REACHES..." >&2; exit 2; }
nm=$1; shift
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT INT TERM

: >"$tmp/defs"; : >"$tmp/refs"; : >"$tmp/reach"
for spec in "$@"; do
  part=${spec%%=*}; rest=${spec#*=}; archive=${rest%%=*}; reach=${rest#*=}
  [ "$part" != "$spec" ] && [ "$archive" != "$rest" ] || { echo "$0: bad argument '$spec'" >&2; exit 2; }
  [ -f "$archive" ] || { echo "$0: part $part: no archive $archive" >&2; exit 2; }
  printf '%s %s\n' "$part" "$part" >>"$tmp/reach"
  for r in $(echo "$reach" | tr ',' ' '); do printf '%s %s\n' "$part" "$r" >>"$tmp/reach"; done
  # "archive[member.o]: symbol TYPE value size": defined (not U, w, v) and referenced (U).
  "$nm" -P -A -g "$archive" | awk -v p="$part" '
    { sub(/:$/, "", $1); m = $1; sub(/^.*\[/, "", m); sub(/\]$/, "", m) }
    $3 == "U" { print $2, p, m >> "'"$tmp/refs"'"; next }
    $3 !~ /^[wv]$/ { print $2, p, m >> "'"$tmp/defs"'" }'
done

# A symbol defined in two parts is itself a boundary fault: say so.
dups=$(awk '{print $1, $2}' "$tmp/defs" | sort -u | awk '{n[$1]++} END {for (s in n) if (n[s] > 1) print s}')
[ -z "$dups" ] || { echo "symbols defined in more than one part: $dups" >&2; exit 1; }

awk -v reachf="$tmp/reach" -v defsf="$tmp/defs" '
  BEGIN {
    while ((getline l < reachf) > 0) { split(l, a, " "); ok[a[1] " " a[2]] = 1 }
    while ((getline l < defsf) > 0) { split(l, a, " "); owner[a[1]] = a[2]; where[a[1]] = a[3] }
  }
  ($1 in owner) && !((($2 " " owner[$1])) in ok) {
    printf "forbidden: %s (%s) references %s, defined in %s (%s)\n", $2, $3, $1, owner[$1], where[$1]
    bad++
  }
  END { exit bad ? 1 : 0 }' "$tmp/refs" && status=0 || status=1
if [ $status -ne 0 ]; then
  echo "a part reaches one it may not (the arrows: ALTAR_REACH_* in CMakeLists.txt; the rules: DESIGN.md, who may include whom)" >&2
  exit 1
fi
echo "part boundaries hold: $(wc -l <"$tmp/refs") undefined references of $# parts checked"
