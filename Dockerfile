# depwatch: one static binary on a distroless base, running as a non-root user.
# The local test cluster does not use this file (it packs the binary with hack/image.sh);
# it is for building the image users pull.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The version is the VERSION file's unless --build-arg VERSION=... says otherwise.
ARG VERSION=
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION:-$(cat VERSION)}" -o /out/depwatch ./cmd/depwatch
# gardenlet starts dependency-watchdog as /usr/local/bin/dependency-watchdog: the same binary
# is there too (a link), so its image vector overwrite is the whole change on a seed.
RUN mkdir -p /out/root/usr/local/bin && ln -s /depwatch /out/root/usr/local/bin/dependency-watchdog

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/depwatch /depwatch
COPY --from=build /out/root/ /
USER 65532:65532
# No CMD: started without arguments, as pod-reaper's Deployments start their image,
# depwatch runs reap, configured by the environment.
ENTRYPOINT ["/depwatch"]
