#!/bin/sh
# usage: go-image.sh [BASE_IMAGE [TAG]]
# Builds the docker image of the go-check benchmarks: BASE_IMAGE (default
# talkops-test-busybox:local, from .ci/docker.sh) with the host's Go copied in at the host's
# own GOROOT, tagged TAG (default talkops-bench-go:local). Same path, same Go: the checks
# can hit the host's build cache when it is shared (caches = ["go"]).
set -eu

if [ $# -gt 2 ]; then
	echo "usage: $0 [BASE_IMAGE [TAG]]" >&2
	exit 2
fi
base=${1:-talkops-test-busybox:local}
tag=${2:-talkops-bench-go:local}
goroot=$(go env GOROOT)
printf 'FROM %s\nCOPY . %s\nENV PATH=%s/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n' \
	"$base" "$goroot" "$goroot" | docker build -q -t "$tag" -f - "$goroot"
