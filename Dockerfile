# depwatch: one static binary on an empty base, running as a non-root user: the same image as
# `make image` packs without Docker (hack/image.sh). hack/image.conf holds the settings both
# use; test/release's TestDockerfileBuildsWhatMakeImagePacks keeps this file's base, user,
# entrypoint and labels equal to the archive make image writes.
#
#   docker buildx build --platform linux/amd64,linux/arm64 --build-arg REVISION=$(git rev-parse HEAD) .
#
# VERSION defaults to the VERSION file's (a test keeps them equal); REVISION, the commit, has
# no default: the build context has no .git to read it from, and a wrong commit in the image is
# worse than a build that asks for it.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=v0.1.0
ARG REVISION=
RUN [ -n "$REVISION" ] || { echo "give the commit: docker build --build-arg REVISION=\$(git rev-parse HEAD) ." >&2; exit 1; }
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -X main.version=$VERSION -X github.com/depwatch/depwatch/internal/buildinfo.revision=$REVISION" \
      -o /out/depwatch ./cmd/depwatch
# gardenlet starts dependency-watchdog as /usr/local/bin/dependency-watchdog: the same binary
# is there too (a link), so its image vector overwrite is the whole change on a seed. /tmp is
# the one writable directory an empty base lacks.
RUN mkdir -p /out/root/usr/local/bin /out/root/tmp && chmod 1777 /out/root/tmp && \
    ln -s /depwatch /out/root/usr/local/bin/dependency-watchdog

FROM scratch
ARG VERSION=v0.1.0
ARG REVISION=
COPY --from=build /out/depwatch /depwatch
COPY --from=build /out/root/ /
ENV PATH=/
WORKDIR /
USER 65532:65532
LABEL org.opencontainers.image.title="depwatch" \
      org.opencontainers.image.source="https://github.com/depwatch/depwatch" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$REVISION" \
      org.opencontainers.image.licenses="Apache-2.0"
# No CMD: started without arguments, as pod-reaper's Deployments start their image,
# depwatch runs reap, configured by the environment.
ENTRYPOINT ["/depwatch"]
