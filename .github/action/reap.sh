#!/usr/bin/env bash
# The composite action's last step (if: always()): delete the sandboxes this job's
# talkops runs left behind. `talkops run` tears its sandbox down on every path it
# controls, SIGINT and SIGTERM included; this sweep is for the paths it does not (a
# SIGKILL after GitHub's 10 s cancel window, a runner crash mid-step).
#
# gc deletes a sandbox when its talkops process is gone from this host (the run step has
# finished, so every sandbox this job created qualifies) or when it is past its expiry.
# A sandbox whose talkops process still runs, such as another job's on a shared
# self-hosted runner, is kept. A failed sweep is a warning, not a failed job: the verdict
# is the run step's.
set -uo pipefail

bin=${TALKOPS_ACTION_BIN:-}
sandbox=${TALKOPS_ACTION_SANDBOX:-}
unset TALKOPS_ACTION_BIN TALKOPS_ACTION_SANDBOX
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
	echo "talkops was not installed; nothing to reap"
	exit 0
fi
args=(sandbox gc --older-than=0s)
case "$sandbox" in
local)
	echo "the local sandbox creates nothing; nothing to reap"
	exit 0
	;;
"") ;; # the configured default: sweep every provider that can list
*) args+=("--provider=$sandbox") ;;
esac
if ! "$bin" "${args[@]}"; then
	echo "::warning title=talkops reap::talkops ${args[*]} failed; list what is left with: talkops sandbox ls"
fi
exit 0
