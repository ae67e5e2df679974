#!/usr/bin/env bash
# Start or stop a private Docker daemon (and make sure bubblewrap is installed) for the
# tests of the bwrap and docker sandbox providers.
#
#   eval "$(bash .ci/docker.sh start)"   # installs what is missing, starts dockerd, imports
#                                        # a busybox image, prints the exports below
#   bash .ci/docker.sh stop              # kills that dockerd by PID, unmounts, cleans up
#
# start prints:
#   export DOCKER_HOST=unix://$DIR/docker.sock
#   export TALKOPS_TEST_DOCKER_IMAGE=talkops-test-busybox:local
#
# The daemon runs on a private socket under $TALKOPS_DOCKER_DIR (default
# /tmp/talkops-docker) with --iptables=false --ip-forward=false --ip-masq=false
# --bridge=none: it creates no bridge, no firewall rule and no sysctl change, so the
# host's network is left exactly as it was, and containers can use only "none" or
# "host" networking. No registry is needed: the test image is imported from a busybox
# rootfs built here. Everything it prints on stdout is shell to eval; progress goes to
# stderr.
set -euo pipefail

DIR=${TALKOPS_DOCKER_DIR:-/tmp/talkops-docker}
IMAGE=${TALKOPS_TEST_DOCKER_IMAGE:-talkops-test-busybox:local}
SOCK="$DIR/docker.sock"
PIDFILE="$DIR/dockerd.pid"
LOG="$DIR/dockerd.log"

log() { echo "docker.sh: $*" >&2; }

need_root() {
	if [ "$(id -u)" != 0 ]; then
		log "must run as root (it installs packages and starts dockerd)"
		exit 1
	fi
}

install_missing() {
	local pkgs=()
	command -v bwrap >/dev/null 2>&1 || pkgs+=(bubblewrap)
	[ -x /bin/busybox ] || pkgs+=(busybox-static)
	command -v dockerd >/dev/null 2>&1 || pkgs+=(docker.io)
	command -v prlimit >/dev/null 2>&1 || pkgs+=(util-linux)
	if [ ${#pkgs[@]} -eq 0 ]; then
		return
	fi
	log "installing ${pkgs[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2
}

docker_ok() {
	DOCKER_HOST="unix://$SOCK" timeout 5 docker version >/dev/null 2>&1
}

daemon_pid() {
	local pid
	pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

start_daemon() {
	local pid
	if daemon_pid >/dev/null && docker_ok; then
		log "dockerd already running (pid $(daemon_pid)) on $SOCK"
		return
	fi
	# A daemon killed earlier (not stopped) can leave its pidfile and mounts behind.
	if pid=$(daemon_pid); then
		log "dockerd (pid $pid) runs but does not answer; stopping it"
	fi
	stop_daemon
	mkdir -p "$DIR/data" "$DIR/exec"
	log "starting dockerd on $SOCK (log: $LOG)"
	# setsid: the daemon must not die with the CI step's process group.
	setsid dockerd \
		--iptables=false --ip6tables=false --ip-forward=false --ip-masq=false --bridge=none \
		--data-root "$DIR/data" --exec-root "$DIR/exec" \
		-H "unix://$SOCK" --pidfile "$PIDFILE" \
		</dev/null >"$LOG" 2>&1 &
	local i
	for i in $(seq 1 150); do # 30 s at most
		if docker_ok; then
			log "dockerd ready after ~$((i / 5)) s"
			return
		fi
		if [ "$i" -gt 5 ] && ! daemon_pid >/dev/null; then
			break
		fi
		sleep 0.2
	done
	log "dockerd did not come up; last lines of $LOG:"
	tail -n 30 "$LOG" >&2 || true
	exit 1
}

import_image() {
	if DOCKER_HOST="unix://$SOCK" docker image inspect "$IMAGE" >/dev/null 2>&1; then
		return
	fi
	local root="$DIR/rootfs"
	rm -rf "$root"
	mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/workspace" "$root/root" "$root/home"
	chmod 1777 "$root/tmp"
	cp /bin/busybox "$root/bin/busybox"
	local applet
	for applet in $(/bin/busybox --list); do
		[ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
	done
	ln -s bin "$root/sbin"
	mkdir -p "$root/usr"
	ln -s ../bin "$root/usr/bin"
	ln -s ../bin "$root/usr/sbin"
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$root/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
	log "importing $IMAGE from a busybox rootfs"
	tar -C "$root" -c . | DOCKER_HOST="unix://$SOCK" docker import \
		-c 'CMD ["/bin/sh"]' -c 'ENV PATH=/usr/sbin:/usr/bin:/sbin:/bin' - "$IMAGE" >/dev/null
	rm -rf "$root"
}

stop_daemon() {
	local pid i
	if pid=$(daemon_pid); then
		log "stopping dockerd (pid $pid)"
		# Remove containers first so no shim outlives the daemon.
		if docker_ok; then
			local ids
			ids=$(DOCKER_HOST="unix://$SOCK" docker ps -aq 2>/dev/null || true)
			if [ -n "$ids" ]; then
				# shellcheck disable=SC2086
				DOCKER_HOST="unix://$SOCK" timeout 30 docker rm -f $ids >/dev/null 2>&1 || true
			fi
		fi
		kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 1 75); do # 15 s
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.2
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "dockerd ignored SIGTERM; killing it"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	# Leftover mounts under the scratch dir (the netns nsfs mount, overlay layers),
	# deepest first.
	if [ -d "$DIR" ]; then
		local m
		awk -v d="$DIR" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo |
			sort -r | while read -r m; do
			umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "cannot unmount $m"
		done
		rm -rf "$DIR" 2>/dev/null || log "could not remove $DIR completely"
	fi
	log "stopped"
}

case "${1:-}" in
start)
	need_root
	install_missing
	start_daemon
	import_image
	echo "export DOCKER_HOST=unix://$SOCK"
	echo "export TALKOPS_TEST_DOCKER_IMAGE=$IMAGE"
	;;
stop)
	need_root
	stop_daemon
	;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
