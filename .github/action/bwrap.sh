#!/usr/bin/env bash
# Makes the bwrap sandbox usable on a Linux runner before talkops starts, for the
# composite action (action.yml) when the input sandbox is bwrap.
#
# It changes nothing when bubblewrap already works. Otherwise, with passwordless sudo
# (GitHub-hosted runners have it), it:
#   - installs the bubblewrap package when bwrap is missing (apt-get);
#   - on Ubuntu 23.10 and later, where AppArmor stops unprivileged processes from creating
#     user namespaces (kernel.apparmor_restrict_unprivileged_userns=1), loads an AppArmor
#     profile that allows user namespaces for the bwrap binary only, the narrow fix Ubuntu
#     recommends, instead of lifting the restriction for every program.
# Each change is announced with ::notice. Without sudo it fails with what to do.
set -euo pipefail

die() {
	echo "::error title=talkops bwrap::$*"
	exit 1
}

# works: the same namespaces the bwrap provider asks for.
works() {
	bwrap --unshare-all --unshare-user --die-with-parent --ro-bind / / --proc /proc --dev /dev \
		--cap-drop ALL -- true 2>"$err"
}

err=$(mktemp)
trap 'rm -f "$err"' EXIT

if command -v bwrap >/dev/null 2>&1 && works; then
	echo "bubblewrap works: $(bwrap --version)"
	exit 0
fi

if ! sudo -n true 2>/dev/null; then
	if command -v bwrap >/dev/null 2>&1; then
		die "bwrap cannot create its namespaces here ($(tr '\n' ' ' <"$err")) and there is no passwordless sudo to fix it; on Ubuntu 24.04 load an AppArmor profile that allows userns for /usr/bin/bwrap, or use sandbox: docker"
	fi
	die "bwrap is not installed and there is no passwordless sudo to install it; install the bubblewrap package on the runner, or use sandbox: docker"
fi

if ! command -v bwrap >/dev/null 2>&1; then
	echo "::notice title=talkops bwrap::installing bubblewrap"
	if ! sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null 2>&1; then
		sudo -n apt-get update -qq >/dev/null
		sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null ||
			die "apt-get install bubblewrap failed"
	fi
	works && exit 0
fi

restrict=/proc/sys/kernel/apparmor_restrict_unprivileged_userns
if [ -r "$restrict" ] && [ "$(cat "$restrict")" = 1 ] && command -v apparmor_parser >/dev/null 2>&1; then
	bin=$(readlink -f "$(command -v bwrap)")
	echo "::notice title=talkops bwrap::AppArmor restricts user namespaces; loading a profile that allows them for $bin only"
	sudo -n tee /etc/apparmor.d/talkops-bwrap >/dev/null <<PROFILE
# Written by the talkops action: lets bubblewrap create user namespaces under
# kernel.apparmor_restrict_unprivileged_userns=1 (Ubuntu 23.10+).
abi <abi/4.0>,
include <tunables/global>

profile talkops-bwrap $bin flags=(unconfined) {
  userns,
}
PROFILE
	sudo -n apparmor_parser -r /etc/apparmor.d/talkops-bwrap || die "apparmor_parser could not load /etc/apparmor.d/talkops-bwrap"
	works && exit 0
fi

die "bwrap still cannot create its namespaces: $(tr '\n' ' ' <"$err")"
