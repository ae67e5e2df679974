# shellcheck shell=sh
# Sourced by the bench scripts that run a scripted agent (not run on its own).
# start_fakemodel FAKEMODEL SCRIPT starts fakemodel serving SCRIPT, sets fakemodel_url to its
# base URL and stops it when the calling script exits.
start_fakemodel() {
	fakemodel_out=$(mktemp)
	"$1" -script "$2" >"$fakemodel_out" &
	fakemodel_pid=$!
	trap 'kill "$fakemodel_pid" 2>/dev/null; wait "$fakemodel_pid" 2>/dev/null; rm -f "$fakemodel_out"' EXIT
	# fakemodel prints its base URL once it listens; wait for that line, at most 10 s.
	i=0
	until [ -s "$fakemodel_out" ]; do
		i=$((i + 1))
		if [ "$i" -gt 1000 ] || ! kill -0 "$fakemodel_pid" 2>/dev/null; then
			echo "$0: fakemodel did not start" >&2
			exit 1
		fi
		sleep 0.01
	done
	# shellcheck disable=SC2034 # read by the sourcing script
	fakemodel_url=$(head -n 1 "$fakemodel_out")
}
