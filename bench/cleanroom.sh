#!/bin/sh
# usage: cleanroom.sh BINARY PROVIDER in-place|clean PROJECT
# One talkops run with a scripted agent in PROJECT: starts fakemodel (built from
# agent/model/modeltest/fakemodel; $FAKEMODEL, by default next to BINARY) with
# cleanroom/script.json (one write_file of answer.txt, then the answer), runs
#   TALKOPS_RUBRIC_VERIFY=MODE talkops -p … -y --sandbox PROVIDER --rubric cleanroom/rubric.toml -q
# and stops fakemodel. answer.txt is removed from PROJECT first. The report goes to
# $REPORT_DIR, by default ${TMPDIR:-/tmp}/talkops-cleanroom-PROVIDER-MODE. Output is
# discarded; the exit code is talkops's.
set -eu

if [ $# -ne 4 ]; then
	echo "usage: $0 BINARY PROVIDER in-place|clean PROJECT" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
bindir=$(cd "$(dirname "$1")" && pwd)
binary=$bindir/$(basename "$1")
fakemodel=${FAKEMODEL:-$bindir/fakemodel}
provider=$2
mode=$3
report=${REPORT_DIR:-${TMPDIR:-/tmp}/talkops-cleanroom-$provider-$mode}
case $mode in
in-place | clean) ;;
*)
	echo "$0: the mode is in-place or clean, not \"$mode\"" >&2
	exit 2
	;;
esac
cd "$4"
rm -f answer.txt

urlfile=$(mktemp)
"$fakemodel" -script "$here/cleanroom/script.json" >"$urlfile" &
fm=$!
trap 'kill "$fm" 2>/dev/null; wait "$fm" 2>/dev/null; rm -f "$urlfile"' EXIT
# fakemodel prints its base URL once it listens; wait for that line, at most 10 s.
i=0
until [ -s "$urlfile" ]; do
	i=$((i + 1))
	if [ "$i" -gt 1000 ] || ! kill -0 "$fm" 2>/dev/null; then
		echo "$0: fakemodel did not start" >&2
		exit 1
	fi
	sleep 0.01
done
url=$(head -n 1 "$urlfile")

rc=0
TALKOPS_RUBRIC_VERIFY=$mode ANTHROPIC_API_KEY=bench "$binary" -p "write the answer" -y \
	--sandbox "$provider" --model anthropic:claude-test --base-url "$url" \
	--rubric "$here/cleanroom/rubric.toml" --report-dir "$report" -q >/dev/null 2>&1 || rc=$?
exit "$rc"
