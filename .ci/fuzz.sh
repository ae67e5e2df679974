#!/usr/bin/env bash
# Bounded fuzz smoke: run every Go fuzz target in the module for FUZZTIME each (default
# 8s; about 13 targets, under 3 minutes on 2 cores including the instrumented builds).
#
#   bash .ci/fuzz.sh                 # all targets
#   FUZZTIME=1m bash .ci/fuzz.sh     # longer, e.g. nightly
#   bash .ci/fuzz.sh rubric faulttest   # only targets whose package path contains a word
#
# A target that fails leaves the failing input in <package>/testdata/fuzz/<Target>/.
# Commit that file: `go test` replays it from then on as a regression test. The script
# lists such new files and exits 1. -fuzzminimizetime is kept short: minimising a large
# input for the default 60 s would eat the whole budget of a slow target.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME=${FUZZTIME:-8s}
MINIMIZE=${FUZZMINIMIZETIME:-1s}

# "package-dir target" pairs, from the test files that declare fuzz targets.
mapfile -t targets < <(
	git ls-files -z -- '*_test.go' | xargs -0 grep -HoE '^func Fuzz[A-Za-z0-9_]+\(' |
		sed -E 's#^(.*)/[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]+)\($#\1 \2#; s#^[^/]+_test\.go:func (Fuzz[A-Za-z0-9_]+)\($#. \1#' |
		sort -u
)
if [ "$#" -gt 0 ]; then
	filtered=()
	for t in "${targets[@]}"; do
		for word in "$@"; do
			if [[ ${t%% *} == *"$word"* ]]; then
				filtered+=("$t")
				break
			fi
		done
	done
	targets=("${filtered[@]}")
fi
if [ "${#targets[@]}" -eq 0 ]; then
	echo "fuzz.sh: no fuzz targets found" >&2
	exit 1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=()
start=$SECONDS
printf '%-32s %-22s %12s %8s\n' PACKAGE TARGET EXECS RESULT
for t in "${targets[@]}"; do
	dir=${t%% *}
	name=${t##* }
	result=FAIL
	for attempt in 1 2 3; do
		if go test "./$dir" -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$MINIMIZE" >"$log" 2>&1; then
			result=ok
			break
		fi
		# Go's fuzz coordinator (before go1.27, golang/go#75804) can fail a target at the
		# -fuzztime deadline with a bare "context deadline exceeded": it compares the timed-out
		# parent context's error with its child's before the cancellation has propagated.
		# That failure writes no input. A real finding always writes one, so only a run with
		# that message and no new corpus file is run again.
		if ! grep -q 'context deadline exceeded' "$log" || grep -q 'Failing input written to' "$log" ||
			[ -n "$(git status --porcelain --untracked-files=all -- "$dir/testdata/fuzz/$name" 2>/dev/null)" ]; then
			break
		fi
		echo "fuzz.sh: $dir $name: coordinator deadline race (no input written), attempt $attempt; running again" >&2
	done
	if [ "$result" = FAIL ]; then
		failed+=("$dir $name")
	fi
	execs=$(grep -oE 'execs: [0-9]+' "$log" | tail -n 1 | cut -d' ' -f2 || true)
	printf '%-32s %-22s %12s %8s\n' "$dir" "$name" "${execs:--}" "$result"
	if [ "$result" = FAIL ]; then
		sed 's/^/    /' "$log" | tail -n 40
	fi
done
echo "fuzz.sh: ${#targets[@]} targets, $FUZZTIME each, $((SECONDS - start)) s"

if [ "${#failed[@]}" -gt 0 ]; then
	echo "fuzz.sh: failing targets: ${failed[*]}"
	echo "fuzz.sh: new failing inputs (commit them as regression tests and fix the cause):"
	git status --porcelain --untracked-files=all -- '*/testdata/fuzz/*' | sed 's/^/    /'
	exit 1
fi
