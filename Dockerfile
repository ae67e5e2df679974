# talkops container image: the static talkops binary on Debian slim with bash, git, CA
# certificates and tini, for GitLab CI, Jenkins and any Docker-capable runner.
#
#   docker build -t talkops .                                     # compile from source (BuildKit)
#   docker build --build-arg RUN_AS=talkops -t talkops:nonroot .  # run as uid 10001
#   docker build --target prebuilt ...                            # copy a binary built outside
#
# Targets:
#   release  (the default) compiles with CGO_ENABLED=0 -trimpath and the version ldflags
#            of the Makefile in golang:$GO_VERSION, then copies the binary into runtime.
#   prebuilt copies $TARGETPLATFORM/talkops from the build context instead: goreleaser's
#            dockers_v2 lays its release binaries out that way, and .ci/image.sh builds one
#            on the host where no registry is reachable.
#
# The user is root by default: GitHub Actions' container jobs and GitLab's docker
# executor expect it (the workspace they mount belongs to the runner). RUN_AS=talkops
# (uid/gid 10001) is the non-root variant for Jenkins agents and Kubernetes runners.
#
# The stages that need no image besides BASE_IMAGE come first: the legacy builder
# (DOCKER_BUILDKIT=0) builds every stage before its target, so `--target prebuilt` works
# with it from a locally imported base; the default target needs BuildKit, which skips
# the prebuilt stage.

ARG BASE_IMAGE=debian:bookworm-slim
ARG GO_VERSION=1.26

FROM ${BASE_IMAGE} AS runtime
ARG BASE_IMAGE
# INSTALL_PACKAGES=false: the base already has bash, git, ca-certificates and tini (an
# imported debootstrap rootfs without network access); they are checked either way.
ARG INSTALL_PACKAGES=true
RUN set -eu; \
    if [ "$INSTALL_PACKAGES" = true ]; then \
        apt-get update; \
        apt-get install -y --no-install-recommends bash ca-certificates git tini; \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    for tool in bash git tini; do \
        command -v "$tool" >/dev/null || { echo "the base image has no $tool" >&2; exit 1; }; \
    done; \
    test -s /etc/ssl/certs/ca-certificates.crt || { echo "the base image has no CA certificates" >&2; exit 1; }; \
    groupadd --gid 10001 talkops; \
    useradd --uid 10001 --gid 10001 --create-home --home-dir /home/talkops --shell /bin/bash talkops; \
    mkdir -p /workspace; \
    chown talkops:talkops /workspace; \
    # CI mounts the checkout with the runner's owner, not this image's user; without
    # this git refuses it ("dubious ownership"). The container has one job and one user.
    git config --system --add safe.directory '*'
WORKDIR /workspace
# tini as PID 1 forwards SIGINT/SIGTERM to talkops (which tears its sandbox down) and
# reaps the orphans of setup scripts and checks.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/talkops"]
CMD ["--help"]
LABEL org.opencontainers.image.title="talkops" \
      org.opencontainers.image.description="Run an AI DevOps agent headless in an ephemeral sandbox, score it against a rubric, publish the verdict, always tear the sandbox down." \
      org.opencontainers.image.source="https://github.com/talkops/talkops" \
      org.opencontainers.image.url="https://github.com/talkops/talkops" \
      org.opencontainers.image.documentation="https://github.com/talkops/talkops#container-image" \
      org.opencontainers.image.vendor="talkops" \
      org.opencontainers.image.base.name="${BASE_IMAGE}"

FROM runtime AS prebuilt
ARG TARGETPLATFORM
ARG RUN_AS=root
ARG VERSION=dev
ARG COMMIT=unknown
COPY ${TARGETPLATFORM}/talkops /usr/local/bin/talkops
RUN ["/usr/local/bin/talkops", "version"]
LABEL org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
USER ${RUN_AS}

FROM golang:${GO_VERSION}-bookworm AS compile
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
        -ldflags "-s -w -X github.com/talkops/talkops/internal/version.version=${VERSION} -X github.com/talkops/talkops/internal/version.commit=${COMMIT}" \
        -o /out/talkops ./cmd/talkops

FROM runtime AS release
ARG RUN_AS=root
ARG VERSION=dev
ARG COMMIT=unknown
COPY --from=compile /out/talkops /usr/local/bin/talkops
RUN ["/usr/local/bin/talkops", "version"]
LABEL org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}"
USER ${RUN_AS}
