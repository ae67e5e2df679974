#!/usr/bin/env bash
# Runs talkops for the composite action (action.yml) with the action's inputs, which
# arrive as environment variables and are never interpolated into shell code:
#
#   TALKOPS_ACTION_BIN          the binary (from install.sh)
#   TALKOPS_ACTION_COMMAND      run or report
#   TALKOPS_ACTION_FLAG_X_Y=v   --x-y=v when v is not empty
#   TALKOPS_ACTION_SWITCH_X_Y=b --x-y when b is true; nothing when false or empty
#   TALKOPS_ACTION_ENV_NAME=v   exported as NAME=v when v is not empty, so an empty
#                               input never hides a NAME the job already sets
#   TALKOPS_ACTION_ARGS         extra arguments, one per line, passed as they are
#
# Values always travel as one argv element (--flag=value), so a value that starts with
# "-" or contains spaces or quotes cannot become another flag. The script ends in exec:
# the runner sends SIGINT/SIGTERM to the step's process only, and exec makes that
# process talkops itself, so a cancelled job still tears its sandbox down.
set -euo pipefail

die() {
	echo "::error title=talkops::$*"
	exit 2
}

bin=${TALKOPS_ACTION_BIN:-}
[ -n "$bin" ] || die "no talkops binary: the install step did not run or failed"
[ -x "$bin" ] || die "talkops binary $bin is not executable"
command=${TALKOPS_ACTION_COMMAND:-run}
case "$command" in
run | report) ;;
*) die "unknown command \"$command\" (want run or report)" ;;
esac

# flag NAME_SUFFIX: TALKOPS_ACTION_FLAG_SANDBOX_ID -> --sandbox-id
flag() {
	local s=${1,,}
	echo "--${s//_/-}"
}

args=("$command")
names=$(compgen -e | LC_ALL=C sort)
for name in $names; do
	value=${!name}
	case "$name" in
	TALKOPS_ACTION_FLAG_*)
		[ -z "$value" ] || args+=("$(flag "${name#TALKOPS_ACTION_FLAG_}")=$value")
		;;
	TALKOPS_ACTION_SWITCH_*)
		case "$value" in
		true) args+=("$(flag "${name#TALKOPS_ACTION_SWITCH_}")") ;;
		false | "") ;;
		*) die "the input that sets $(flag "${name#TALKOPS_ACTION_SWITCH_}") must be true or false, got \"$value\"" ;;
		esac
		;;
	TALKOPS_ACTION_ENV_*)
		if [ -n "$value" ]; then
			export "${name#TALKOPS_ACTION_ENV_}=$value"
		fi
		;;
	*) continue ;;
	esac
	unset "$name"
done

if [ -n "${TALKOPS_ACTION_ARGS:-}" ]; then
	while IFS= read -r line || [ -n "$line" ]; do
		# Trim the indentation YAML block scalars keep; skip blank lines.
		line="${line#"${line%%[![:space:]]*}"}"
		line="${line%"${line##*[![:space:]]}"}"
		[ -z "$line" ] || args+=("$line")
	done <<<"$TALKOPS_ACTION_ARGS"
fi
unset TALKOPS_ACTION_ARGS TALKOPS_ACTION_BIN TALKOPS_ACTION_COMMAND

# stdin is /dev/null: the prompt comes from the inputs, and talkops must never wait on
# a pipe the runner left open.
exec "$bin" "${args[@]}" </dev/null
