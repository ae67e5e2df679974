#!/bin/sh
# usage: fetch-go-projects.sh DIR
# Copies three Go modules at pinned versions, as the Go module proxy serves them, into
# DIR/burntsushi-toml, DIR/alecthomas-kong and DIR/go-toml-v2, and downloads their
# dependencies into the host's module cache so that their checks can run offline
# (GOPROXY=off). Existing copies are replaced. Keep DIR out of /tmp: the bwrap sandbox
# mounts its own /tmp, so a working_dir there is refused.
set -eu

if [ $# -ne 1 ]; then
	echo "usage: $0 DIR" >&2
	exit 2
fi
mkdir -p "$1"
dest=$(cd "$1" && pwd)

fetch() { # fetch NAME MODULE@VERSION
	dir=$(go mod download -json "$2" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	if [ -z "$dir" ] || [ ! -d "$dir" ]; then
		echo "$0: go mod download $2 gave no directory" >&2
		exit 1
	fi
	rm -rf "${dest:?}/$1"
	cp -R "$dir" "$dest/$1"
	# The module cache is read-only; the copy is a project that runs write into.
	chmod -R u+w "$dest/$1"
	(cd "$dest/$1" && go mod download)
	echo "$dest/$1 ($2)"
}

fetch burntsushi-toml github.com/BurntSushi/toml@v1.6.0
fetch alecthomas-kong github.com/alecthomas/kong@v1.17.0
fetch go-toml-v2 github.com/pelletier/go-toml/v2@v2.4.3
