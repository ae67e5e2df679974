#!/bin/sh
# usage: mcp-rss.sh BINARY none|execute|mcp PROJECT
# Peak RSS in KB (/usr/bin/time -f %M) of one talkops run on the local sandbox in PROJECT
# with a scripted agent: fakemodel ($FAKEMODEL, by default next to BINARY) asks for
#   none     no tool call, only the answer
#   execute  `execute` of a command printing 3,000,000 bytes, then the answer
#   mcp      the `big` tool of the MCP test server (agent/mcp/mcptest/mcpserver; $MCPSERVER,
#            by default next to BINARY) returning 3,000,000 bytes, then the answer
# Prints the peak RSS on stdout; the exit code is talkops's. The report goes to $REPORT_DIR
# when set, else to a temporary directory removed afterwards.
# BINARY runs from a copy: a file the Go linker has just written can sit in the page cache
# as 2 MiB folios that the kernel maps whole, which added 5-12 MiB of the binary's pages to
# the peak of a fresh build and nothing to a copied or downloaded one (BENCHMARKS.md, "Start-up
# memory and time").
set -eu

if [ $# -ne 3 ]; then
	echo "usage: $0 BINARY none|execute|mcp PROJECT" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
bindir=$(cd "$(dirname "$1")" && pwd)
binary=$bindir/$(basename "$1")
fakemodel=${FAKEMODEL:-$bindir/fakemodel}
mcpserver=${MCPSERVER:-$bindir/mcpserver}
work=$(mktemp -d)
report=${REPORT_DIR:-$work/report}
cp "$binary" "$work/talkops"

mcp_args=
case $2 in
none) call= ;;
execute) call='{"name":"execute","input":{"command":"head -c 3000000 /dev/zero | tr \\\\0 x"}}' ;;
mcp)
	call='{"name":"mcp__bench__big","input":{"bytes":3000000}}'
	printf '{"mcpServers": {"bench": {"command": "%s"}}}\n' "$mcpserver" >"$work/mcp.json"
	mcp_args="--mcp-config $work/mcp.json"
	;;
*)
	echo "$0: the run is none, execute or mcp, not \"$2\"" >&2
	exit 2
	;;
esac
if [ -n "$call" ]; then
	printf '{"steps":[{"tool_calls":[%s]},{"text":"done"}]}\n' "$call" >"$work/script.json"
else
	printf '{"steps":[{"text":"done"}]}\n' >"$work/script.json"
fi
cd "$3"

# shellcheck source-path=SCRIPTDIR source=fakemodel.sh
. "$here/fakemodel.sh"
start_fakemodel "$fakemodel" "$work/script.json"

rc=0
# $mcp_args is empty or two words without spaces (the path comes from mktemp).
# shellcheck disable=SC2086
ANTHROPIC_API_KEY=sk-bench-fakemodel-key /usr/bin/time -o "$work/rss" -f %M "$work/talkops" -p "run the tool" -y \
	--sandbox local --model anthropic:claude-test --base-url "$fakemodel_url" $mcp_args \
	--report-dir "$report" -q >/dev/null 2>&1 || rc=$?
tail -n 1 "$work/rss"
rm -rf "$work"
exit "$rc"
