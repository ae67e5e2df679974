#!/usr/bin/env bash
# Puts a talkops binary on the runner for the composite action (action.yml) and prints
# its path as the step output "bin".
#
# Which binary:
#   1. INPUT_VERSION, when set: a release tag (v1.2.3) or "latest".
#   2. Otherwise the version in .github/action/VERSION next to this script, when it is a
#      release tag (the release commit sets it; see .github/workflows/release.yml).
#   3. Otherwise ("dev": a branch, a commit between releases, or uses: ./) the action's
#      own source is built with `go build` (Go must be on PATH; GOTOOLCHAIN=auto fetches
#      the version go.mod asks for).
#
# A release is downloaded from $TALKOPS_RELEASE_URL (default:
# $GITHUB_SERVER_URL/talkops/talkops/releases) with checksums.txt, and the archive's
# SHA-256 must match before anything is extracted. Binaries are cached in
# $RUNNER_TOOL_CACHE/talkops/<version>/<os>-<arch>, which self-hosted runners keep
# between jobs.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd) # the action's checkout: action.yml, go.mod, cmd/talkops

die() {
	echo "::error title=talkops install::$*"
	exit 1
}

output() { # output NAME VALUE: a step output, or stdout outside Actions
	if [ -n "${GITHUB_OUTPUT:-}" ]; then
		printf '%s=%s\n' "$1" "$2" >>"$GITHUB_OUTPUT"
	else
		printf '%s=%s\n' "$1" "$2"
	fi
}

# platform sets os and arch for this runner (not in a subshell, so die ends the script).
platform() {
	case "${RUNNER_OS:-$(uname -s)}" in
	Linux) os=linux ;;
	macOS | Darwin) os=darwin ;;
	*) die "runner OS ${RUNNER_OS:-$(uname -s)} is not supported (Linux and macOS are)" ;;
	esac
	case "${RUNNER_ARCH:-$(uname -m)}" in
	X64 | x86_64 | amd64) arch=amd64 ;;
	ARM64 | aarch64 | arm64) arch=arm64 ;;
	*) die "runner architecture ${RUNNER_ARCH:-$(uname -m)} is not supported (X64 and ARM64 are)" ;;
	esac
}

sha256() {
	if command -v sha256sum >/dev/null 2>&1; then
		sha256sum "$1" | cut -d' ' -f1
	else
		shasum -a 256 "$1" | cut -d' ' -f1
	fi
}

# fetch URL FILE: download with retries; curl prints why it failed.
fetch() {
	curl --fail --silent --show-error --location --retry 3 --retry-delay 2 \
		--connect-timeout 10 --max-time 120 --output "$2" "$1"
}

version=${INPUT_VERSION:-}
if [ -z "$version" ] && [ -f "$here/VERSION" ]; then
	version=$(tr -d ' \t\r\n' <"$here/VERSION")
fi
case "$version" in
latest | v[0-9]*.[0-9]*.[0-9]*) ;;
"" | dev) version=dev ;;
*) die "version \"$version\" is not a release tag like v1.2.3, \"latest\" or \"dev\" (input: version; file: .github/action/VERSION)" ;;
esac

platform
plat=$os-$arch
cache=${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}}/talkops

if [ "$version" = dev ]; then
	command -v go >/dev/null 2>&1 ||
		die "no release to download for this action ref (VERSION is dev) and no Go toolchain to build it: add actions/setup-go before this step, or set the input version: to a release such as v1.2.3"
	if [ ! -f "$src/go.mod" ] || [ ! -d "$src/cmd/talkops" ]; then
		die "cannot build from source: $src has no go.mod and cmd/talkops"
	fi
	commit=unknown
	if git -C "$src" rev-parse HEAD >/dev/null 2>&1; then
		commit=$(git -C "$src" rev-parse HEAD)
	fi
	out=${RUNNER_TEMP:-${TMPDIR:-/tmp}}/talkops-build/$commit
	mkdir -p "$out"
	echo "Building talkops from source at $src (commit $commit)"
	(
		cd "$src"
		CGO_ENABLED=0 go build -trimpath \
			-ldflags "-s -w -X github.com/talkops/talkops/internal/version.version=dev -X github.com/talkops/talkops/internal/version.commit=$commit" \
			-o "$out/talkops" ./cmd/talkops
	) || die "go build ./cmd/talkops failed (see the log above)"
	bin=$out/talkops
else
	base=${TALKOPS_RELEASE_URL:-${GITHUB_SERVER_URL:-https://github.com}/talkops/talkops/releases}
	if [ "$version" = latest ]; then
		# The archive name carries the version, so resolve "latest" to a tag first.
		tag=$(curl --fail --silent --show-error --location --retry 3 --max-time 60 \
			--output /dev/null --write-out '%{url_effective}' "$base/latest") ||
			die "cannot resolve the latest release at $base/latest"
		version=${tag##*/}
		case "$version" in v[0-9]*.[0-9]*.[0-9]*) ;; *) die "latest release resolved to \"$version\", not a tag like v1.2.3" ;; esac
	fi
	dir=$cache/$version/$plat
	bin=$dir/talkops
	if [ -x "$bin" ]; then
		echo "Using cached talkops $version ($bin)"
	else
		archive="talkops_${version#v}_${os}_${arch}.tar.gz"
		tmp=$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/talkops-dl.XXXXXX")
		trap 'rm -rf "$tmp"' EXIT
		echo "Downloading talkops $version for $os/$arch"
		fetch "$base/download/$version/$archive" "$tmp/$archive" || die "download of $base/download/$version/$archive failed"
		fetch "$base/download/$version/checksums.txt" "$tmp/checksums.txt" || die "download of $base/download/$version/checksums.txt failed"
		want=$(awk -v f="$archive" '$2 == f || $2 == "*" f { print $1; exit }' "$tmp/checksums.txt")
		[ -n "$want" ] || die "checksums.txt of $version has no entry for $archive"
		got=$(sha256 "$tmp/$archive")
		[ "$got" = "$want" ] || die "checksum mismatch for $archive: got sha256 $got, checksums.txt says $want; refusing to install"
		mkdir -p "$tmp/x"
		tar -xzf "$tmp/$archive" -C "$tmp/x" talkops || die "$archive has no talkops binary"
		mkdir -p "$dir"
		# Install atomically, so a concurrent job on the same runner never runs half a file.
		mv "$tmp/x/talkops" "$dir/.talkops.$$"
		chmod 0755 "$dir/.talkops.$$"
		mv -f "$dir/.talkops.$$" "$bin"
		echo "Verified sha256 $got"
	fi
fi

"$bin" version || die "$bin does not run on this runner"
output bin "$bin"
if [ -n "${GITHUB_PATH:-}" ]; then
	dirname "$bin" >>"$GITHUB_PATH"
fi
