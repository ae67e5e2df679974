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

# shellcheck source-path=SCRIPTDIR source=fakemodel.sh
. "$here/fakemodel.sh"
start_fakemodel "$fakemodel" "$here/cleanroom/script.json"

rc=0
TALKOPS_RUBRIC_VERIFY=$mode ANTHROPIC_API_KEY=sk-bench-fakemodel-key "$binary" -p "write the answer" -y \
	--sandbox "$provider" --model anthropic:claude-test --base-url "$fakemodel_url" \
	--rubric "$here/cleanroom/rubric.toml" --report-dir "$report" -q >/dev/null 2>&1 || rc=$?
exit "$rc"
