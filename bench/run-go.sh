#!/bin/sh
# usage: run-go.sh BINARY PROJECT PROVIDER CACHES config|default
# One checks-only talkops run in PROJECT (a directory from fetch-go-projects.sh) with the
# rubric go-checks.toml (or $RUBRIC): `talkops --sandbox PROVIDER --rubric RUBRIC -q`.
#   CACHES   "none", or the value of TALKOPS_SANDBOX_CACHES (e.g. "go")
#   config   writes PROJECT/.talkops/config.toml with working_dir = PROJECT for bwrap and
#            docker (local runs in the project itself and ignores it)
#   default  removes that file, so the provider's default working directory applies
# The report (result.json with stage durations) goes to $REPORT_DIR, by default
# ${TMPDIR:-/tmp}/talkops-bench-NAME-PROVIDER-CACHES. Output is discarded; the exit code
# is talkops's, so give hyperfine -i when a run is expected to fail.
set -eu

if [ $# -ne 5 ]; then
	echo "usage: $0 BINARY PROJECT PROVIDER CACHES config|default" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
binary=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
project=$(cd "$2" && pwd)
provider=$3
caches=$4
rubric=${RUBRIC:-$here/go-checks.toml}
case $rubric in /*) ;; *) rubric=$PWD/$rubric ;; esac
report=${REPORT_DIR:-${TMPDIR:-/tmp}/talkops-bench-$(basename "$project")-$provider-$caches}

case $5 in
config)
	mkdir -p "$project/.talkops"
	printf '[sandboxes.providers.%s]\nworking_dir = "%s"\n' bwrap "$project" docker "$project" >"$project/.talkops/config.toml"
	;;
default)
	rm -f "$project/.talkops/config.toml"
	;;
*)
	echo "$0: the fifth argument is config or default, not \"$5\"" >&2
	exit 2
	;;
esac

cd "$project"
if [ "$caches" = none ]; then
	unset TALKOPS_SANDBOX_CACHES
else
	export TALKOPS_SANDBOX_CACHES="$caches"
fi
exec "$binary" --sandbox "$provider" --rubric "$rubric" --report-dir "$report" -q >/dev/null 2>&1
