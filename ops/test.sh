#!/usr/bin/env bash
# The test command: installs SeaweedFS 4.48 into .tools/ if needed, then runs
# every test (unit, property and end-to-end against a real loopback cluster).
#
# With arguments it is plain `cargo test --locked ARGS` (one binary, a filter).
# Without, it builds every test binary once and runs them TEST_JOBS (default 4)
# at a time, longest first: most end-to-end binaries spend their time waiting
# on the cluster (the filer's log flush, rate-capped deletes), not on the CPU,
# and each starts its own loopback cluster on ports of its own choosing, so
# they do not interfere. There is one binary per cluster shape (tests/README.md);
# `single_node` holds most end-to-end tests and runs SINGLE_NODE_THREADS
# (default 4) of them at once on its shared cluster. Each binary's output is
# kept whole and printed when it ends; a failing binary fails the run after all
# have finished.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
WEED_BIN="$(ops/install-seaweedfs.sh)"
export WEED_BIN
if [ $# -gt 0 ]; then
  exec cargo test --locked "$@"
fi

jobs_max="${TEST_JOBS:-4}"
logdir="$(mktemp -d "${TMPDIR:-/tmp}/s3lc-tests.XXXXXX")"
# Build everything first; cargo prints one `Executable <target> (<path>)` per binary.
cargo test --locked --no-run 2>&1 | tee "$logdir/build.log" >&2
mapfile -t exes < <(sed -n 's/^ *Executable \(.*\) (\(.*\))$/\1|\2/p' "$logdir/build.log")
if [ "${#exes[@]}" -eq 0 ]; then
  echo "ops/test.sh: cargo test --no-run listed no test binaries" >&2
  exit 1
fi

# Slowest first (seconds in the last CI run), so the long ones overlap the rest.
slow_first=(single_node faults e2e_due_index e2e_retention seaweed_retention
  e2e_plugin_worker tls two_filers)
ordered=()
for s in "${slow_first[@]}"; do
  for e in "${exes[@]}"; do
    case "${e%%|*}" in "tests/$s.rs" | "tests/$s/main.rs") ordered+=("$e") ;; esac
  done
done
for e in "${exes[@]}"; do
  case " ${ordered[*]} " in *" $e "*) ;; *) ordered+=("$e") ;; esac
done

run_one() {
  local name="$1" exe="$2" log="$3" t0 rc=0
  t0=$(date +%s)
  local threads="${RUST_TEST_THREADS:-}"
  [ "$name" = "tests/single_node/main.rs" ] && threads="${SINGLE_NODE_THREADS:-4}"
  { echo "     Running $name ($exe)"; env ${threads:+RUST_TEST_THREADS=$threads} "$exe"; } >"$log" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "ok      $name ($(($(date +%s) - t0)) s)"
  else
    echo "FAILED  $name (exit $rc, $(($(date +%s) - t0)) s)"
    echo "$name" >>"$logdir/failed"
  fi
}

t_all=$(date +%s)
i=0
for e in "${ordered[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  i=$((i + 1))
  run_one "${e%%|*}" "${e##*|}" "$logdir/$(printf %03d $i).log" &
done
wait
echo "all test binaries ran in $(($(date +%s) - t_all)) s (TEST_JOBS=$jobs_max)"

for log in "$logdir"/[0-9]*.log; do cat "$log"; done
if [ -s "$logdir/failed" ]; then
  echo "failing test binaries (output above; logs in $logdir):" >&2
  sed 's/^/  /' "$logdir/failed" >&2
  exit 1
fi
cargo test --locked --doc
rm -rf "$logdir"
