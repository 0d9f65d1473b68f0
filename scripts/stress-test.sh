#!/usr/bin/env bash
# The whole suite (`make test`, the README's test command) on a fresh clone of this checkout's
# HEAD, with every core kept busy by a CPU hog: three runs, then one more with each file's tests
# in a shuffled order (tests/shuffle.py). A test that bets on the machine's speed, or on running
# after another test, fails here before it fails in CI (issue 22).
#   scripts/stress-test.sh                    # 3 loaded runs + 1 loaded, shuffled run
#   STRESS_RUNS=1 STRESS_SEED=7 scripts/stress-test.sh
#   STRESS_HOGS=0 scripts/stress-test.sh      # the same runs on a quiet machine
# Only committed work is tested (a clone). Build caches are not code: the Go toolchain and the
# Kubernetes, helm and axe-core files of this checkout are hard-linked into the clone when present,
# so that it does not spend 15 minutes rebuilding what their stamps prove identical; everything
# else (the virtualenv, the databases) the clone's own `make test` installs and starts.
# Prints each run's pytest summaries and wall time, writes them to .cache/stress/<time>/summary.txt,
# and exits 1 when any run failed. The clone stays there for a look at the logs.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
runs=${STRESS_RUNS:-3}
hogs=${STRESS_HOGS:-$(nproc)}
seed=${STRESS_SEED:-$((RANDOM * 32768 + RANDOM))}
work=$src/.cache/stress/$(date +%Y%m%d-%H%M%S)
clone=$work/schedweb
mkdir -p "$work"

hog_pids=()
stop_hogs() {
  if ((${#hog_pids[@]})); then kill "${hog_pids[@]}" 2>/dev/null || true; fi
  hog_pids=()
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM

git clone -q --no-local "$src" "$clone"
echo "stress: a clone of $(git rev-parse --short HEAD) in $clone"
mkdir -p "$clone/.cache"
for cache in go-toolchain k8s helm axe; do
  [[ -d .cache/$cache ]] && cp -al ".cache/$cache" "$clone/.cache/$cache"
done

for ((i = 0; i < hogs; i++)); do
  python3 -c 'while True: pass' &
  hog_pids+=($!)
done
echo "stress: $hogs CPU hogs running (pids ${hog_pids[*]:-none}), $(nproc) cores"

failed=0
summary=$work/summary.txt
: >"$summary"
run() { # run NAME [PYTEST_ADDOPTS]
  local name=$1 addopts=${2:-} log=$work/$1.log start=$SECONDS rc=0
  echo "stress: $name: make test${addopts:+ (PYTEST_ADDOPTS=$addopts)}, log $log"
  (cd "$clone" && PYTEST_ADDOPTS=$addopts make test) >"$log" 2>&1 || rc=$?
  local wall=$((SECONDS - start))
  ((rc == 0)) || failed=1
  {
    echo "$name: exit $rc, wall $wall s, $hogs hogs${addopts:+, $addopts}"
    grep -E '^=+ .*(passed|failed|error).* in [0-9.]+s' "$log" | sed 's/^/    /' || true
    ((rc == 0)) || grep -E '^(FAILED|ERROR) ' "$log" | sed 's/^/    /' || true
  } | tee -a "$summary"
}

for ((n = 1; n <= runs; n++)); do
  run "loaded-$n"
done
run shuffled "--shuffle-within-files=$seed"
stop_hogs

echo "stress: summary in $summary"
exit $failed
