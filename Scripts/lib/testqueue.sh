# shellcheck shell=bash
# Scripts/lib/testqueue.sh: run every test of the built test bundle as a queue of suites, WORKERS
# test processes at a time, each suite in a process of its own.
#
#   source Scripts/lib/testqueue.sh
#   tk_run_test_queue BUNDLE WORKERS LOGDIR [DURATIONS]
#       status 0 when every suite passed; DURATIONS (a file, optional) orders the queue by the
#       last run's times and is rewritten with this run's when every suite passed
#
# Why: swift-testing runs a test that is not `async` on a thread of Swift's cooperative pool,
# which has one thread per CPU; the end-to-end tests spend their time waiting on the programs
# they start (posix_spawn, waitpid), so in one process a 2-CPU machine runs two of them at a time
# and sits mostly idle. Several processes, each with a pool of its own, keep it busy. The tests
# already run concurrently with one another in one process (every one has a sandbox of its own:
# HOME, XDG directories, runtime directory, profile locks), so they may run in several.
#
# The queue starts with the long poles (the serialized suites, then the other end-to-end ones);
# each suite's output is printed whole when it ends (never interleaved), and the failing suites
# are named again at the end with the command that runs one alone.

# The suites of BUNDLE ("Module.Type", the first component of each test's ID), slowest first: the
# durations of the last run on this machine (DURATIONS, "suite seconds" lines) where there is one;
# else the suites marked `.serialized` (their tests run one after another, so their time is the sum)
# found in the sources under Tests, then the other end-to-end suites, each group most tests first.
tk_test_suites() {
  local bundle=$1 durations=${2:-} serialized
  serialized=$(grep -rh -A3 --include='*.swift' '@Suite(.*\.serialized)' Tests |
    sed -n 's/^\(.* \)\{0,1\}\(struct\|final class\|class\|enum\) \([A-Za-z0-9_]*\).*/\3/p' | sort -u | tr '\n' ' ')
  "$bundle" --testing-library swift-testing --list-tests 2>/dev/null |
    awk -F/ -v serialized=" $serialized" '
      { count[$1]++ }
      END {
        for (s in count) {
          type = s; sub(/^[^.]*\./, "", type)
          rank = index(serialized, " " type " ") ? 2 : (s ~ /^TokenctlEndToEndTests\./ ? 1 : 0)
          print rank, count[s], s
        }
      }' |
    sort -k1,1nr -k2,2nr -k3,3 | awk '{ print $3 }' |
    if [[ -s $durations ]]; then
      # The last run's seconds per suite, where known, come first (longest first); new suites
      # keep the order above after them.
      awk 'NR == FNR { seconds[$1] = $2; next } { print (($0 in seconds) ? seconds[$0] : -1), NR, $0 }' \
        "$durations" - | sort -k1,1nr -k2,2n | awk '{ print $3 }'
    else
      cat
    fi
}

# Run one suite (called by xargs): its log, then its output printed under a lock.
tk_run_test_suite() {
  local bundle=$1 logdir=$2 suite=$3 status=0
  local log="$logdir/$suite.log"
  local started=$SECONDS
  "$bundle" --testing-library swift-testing --filter "^${suite//./\\.}/" >"$log" 2>&1 </dev/null || status=$?
  {
    flock 9
    echo "==> $suite: $([[ $status == 0 ]] && echo passed || echo "FAILED (status $status)") in $((SECONDS - started)) s" >&2
    echo "$suite $((SECONDS - started))" >>"$logdir/.durations"
    cat "$log"
  } 9>"$logdir/.print.lock"
  [[ $status == 0 ]] || echo "$suite" >>"$logdir/.failed"
  return 0
}

tk_run_test_queue() {
  local bundle=$1 workers=$2 logdir=$3 durations=${4:-}
  mkdir -p "$logdir"
  rm -f "$logdir/.failed" "$logdir/.durations"
  local suites
  suites=$(tk_test_suites "$bundle" "$durations")
  [[ -n $suites ]] || { echo "testqueue: $bundle lists no tests" >&2; return 1; }
  echo "==> $(wc -l <<<"$suites") suites, $workers test processes at a time" >&2
  export -f tk_run_test_suite
  xargs -P "$workers" -I{} bash -c 'tk_run_test_suite "$@"' _ "$bundle" "$logdir" {} <<<"$suites"
  tk_test_queue_verdict "$logdir" "$(wc -l <<<"$suites")" || return 1
  if [[ -n $durations ]]; then cp "$logdir/.durations" "$durations"; fi
}

# The verdict of the run in LOGDIR (SUITES suites): the totals, and for each failing suite its
# failing tests' own lines again, so that a reader of only the end of the output (a CI log's tail)
# sees what failed and where. Status 1 when a suite failed. Scripts/test calls it again as its last
# words, after the self-tests' logs.
tk_test_queue_verdict() {
  local logdir=$1 suite_count=$2 tests suite
  # The totals, from each suite's last line ("Test run with N tests in M suites passed|failed").
  tests=$(cat "$logdir"/*.log | sed -n 's/.*Test run with \([0-9]*\) tests\{0,1\} .*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
  if [[ -s $logdir/.failed ]]; then
    echo "==> FAILED: $(wc -l <"$logdir/.failed") suite(s) of $tests tests: $(tr '\n' ' ' <"$logdir/.failed")" >&2
    while read -r suite; do
      echo "--- $suite: what failed" >&2
      # swift-testing marks a failing test and its issues with ✘; a crash leaves no such line,
      # so the log's last lines stand in for them.
      if grep -q '✘' "$logdir/$suite.log"; then
        grep -A4 '✘' "$logdir/$suite.log" | head -n 80 >&2
      else
        tail -n 30 "$logdir/$suite.log" >&2
      fi
    done <"$logdir/.failed"
    echo "    Run one alone with: Scripts/test --filter SUITE" >&2
    return 1
  fi
  echo "==> swift test: $tests tests in $suite_count suites passed" >&2
}
