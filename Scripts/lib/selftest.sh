# The checks every *-selftest.sh prints: `ok NAME`, `bad NAME` (counted in $fails) and
# `expect NAME GOT WANT`. Sourced; the self-test exits non-zero when $fails is not 0.
fails=0
ok()  { printf 'ok   %s\n' "$1"; }
bad() { printf 'FAIL %s\n' "$1" >&2; fails=$((fails + 1)); }
expect() { if [[ $2 == "$3" ]]; then ok "$1"; else bad "$1: got '$2', want '$3'"; fi; }
