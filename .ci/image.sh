#!/usr/bin/env bash
# Build the talkops container image where no container registry is reachable, and check
# that it runs. Needs a Docker engine (eval "$(bash .ci/docker.sh start)" first) and, the
# first time, root and a Debian mirror for debootstrap.
#
#   eval "$(bash .ci/image.sh)"   # prints: export TALKOPS_IMAGE=talkops:ci
#                                 #         export TALKOPS_IMAGE_NONROOT=talkops:ci-nonroot
#
# How, since `docker build` cannot pull debian:bookworm-slim or golang here:
#  1. Base: debootstrap a Debian bookworm minbase rootfs with bash, git, ca-certificates
#     and tini from the apt mirror, and `docker import` it as $BASE. The rootfs tarball is
#     cached in $TALKOPS_IMAGE_CACHE (default ~/.cache/talkops), so later runs (and a
#     restarted daemon) only import it (about 3 s).
#  2. Binary: go build on the host, as the Makefile does (CGO_ENABLED=0, -trimpath, the
#     version ldflags), into a small build context laid out like goreleaser's
#     ($TARGETPLATFORM/talkops).
#  3. Image: the Dockerfile's `prebuilt` target with the legacy builder (buildx is not
#     packaged in bookworm) FROM $BASE, INSTALL_PACKAGES=false, no network; once as root
#     (talkops:ci) and once with RUN_AS=talkops (talkops:ci-nonroot).
#  4. Check: `talkops version` in the image must print this build's version.
# Everything printed on stdout is shell to eval; progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${TALKOPS_IMAGE:-talkops:ci}
IMAGE_NONROOT=${TALKOPS_IMAGE_NONROOT:-talkops:ci-nonroot}
BASE=${TALKOPS_IMAGE_BASE:-talkops-base:bookworm}
CACHE=${TALKOPS_IMAGE_CACHE:-${HOME:-/root}/.cache/talkops}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
PACKAGES=bash,ca-certificates,git,tini,passwd

log() { echo "image.sh: $*" >&2; }
die() {
	log "$*"
	exit 1
}

command -v docker >/dev/null 2>&1 || die "no docker CLI on PATH"
docker version >/dev/null 2>&1 || die "no Docker engine at ${DOCKER_HOST:-the default socket}; run: eval \"\$(bash .ci/docker.sh start)\""

base_image() {
	if docker image inspect "$BASE" >/dev/null 2>&1; then
		return
	fi
	local tarball
	tarball="$CACHE/debootstrap-$SUITE-$(go env GOARCH).tar"
	if [ ! -s "$tarball" ]; then
		[ "$(id -u)" = 0 ] || die "building the base rootfs needs root (debootstrap); run as root once, or import $BASE yourself"
		if ! command -v debootstrap >/dev/null 2>&1; then
			log "installing debootstrap"
			DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null ||
				{ apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; }
		fi
		local root
		root=$(mktemp -d "${TMPDIR:-/tmp}/talkops-rootfs.XXXXXX")
		log "debootstrap $SUITE ($PACKAGES) from $MIRROR; takes a minute or two"
		if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$MIRROR" >"$root.log" 2>&1; then
			tail -n 20 "$root.log" >&2
			rm -rf "$root" "$root.log"
			die "debootstrap failed"
		fi
		rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root.log"
		mkdir -p "$CACHE"
		tar -C "$root" --numeric-owner -cf "$tarball.tmp" .
		mv "$tarball.tmp" "$tarball"
		rm -rf "$root"
	fi
	log "importing $BASE from $tarball"
	docker import -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		-c 'CMD ["/bin/bash"]' "$tarball" "$BASE" >/dev/null
}

base_image

version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
platform=linux/$(go env GOARCH)
ctx=$(mktemp -d "${TMPDIR:-/tmp}/talkops-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/$platform"
log "go build ($version, $platform)"
CGO_ENABLED=0 GOOS=linux go build -trimpath \
	-ldflags "-s -w -X github.com/talkops/talkops/internal/version.version=$version -X github.com/talkops/talkops/internal/version.commit=$commit" \
	-o "$ctx/$platform/talkops" ./cmd/talkops

build() { # build TAG RUN_AS
	log "docker build --target prebuilt -t $1 (RUN_AS=$2, legacy builder, FROM $BASE)"
	DOCKER_BUILDKIT=0 docker build --quiet --network none --target prebuilt \
		--build-arg BASE_IMAGE="$BASE" --build-arg INSTALL_PACKAGES=false \
		--build-arg TARGETPLATFORM="$platform" --build-arg RUN_AS="$2" \
		--build-arg VERSION="$version" --build-arg COMMIT="$commit" \
		-f Dockerfile -t "$1" "$ctx" >/dev/null
}
build "$IMAGE" root
build "$IMAGE_NONROOT" talkops

out=$(docker run --rm --network none "$IMAGE" version)
case "$out" in
"talkops $version"*) log "$IMAGE: $(echo "$out" | tr '\n' ' ')" ;;
*) die "$IMAGE version printed \"$out\", want talkops $version" ;;
esac

echo "export TALKOPS_IMAGE=$IMAGE"
echo "export TALKOPS_IMAGE_NONROOT=$IMAGE_NONROOT"
