#!/usr/bin/env bash
# Builds the local cluster's images without Docker and, when the cluster's containerd
# runs, imports them into it (namespace k8s.io, where the kubelet looks):
#   localhost/pause:local    static pause program (hack/pause), containerd's sandbox_image
#   localhost/depwatch:dev   CGO_ENABLED=0 build of ./cmd/depwatch, entrypoint /depwatch, and
#                            /usr/local/bin/dependency-watchdog linking to it (gardenlet's command)
#   localhost/depwatch-testapp:dev   ./test/e2e/testapp (the e2e workload), entrypoint /testapp
#   $IMAGE_REPO:$VERSION     (release-local) the image users run, tagged as released
#                            (ghcr.io/depwatch/depwatch:<VERSION file>), this machine's
#                            architecture only: the chart's e2e test installs it with the
#                            chart's default image
# Tarballs (docker-save format) land in _output/images/ (the last one as
# depwatch-$VERSION-local.tar). A tarball whose binary did not change is not packed again.
#
# `hack/image.sh release` alone (make image) writes the release archive instead, imports
# nothing, and says how to load it elsewhere: _output/images/depwatch-$VERSION.tar (or
# $IMAGE_OUT), an OCI image layout whose index holds the image for every platform of
# hack/image.conf (linux/amd64, linux/arm64), with the OCI labels (source, version, revision,
# licenses). The commit is HEAD's unless REVISION=<commit> says otherwise; the Dockerfile
# builds the same image (hack/image.conf says how, for both).
#
# Usage: hack/image.sh [pause|depwatch|testapp|release-local]...   (default: all four)
#        hack/image.sh release
# DEPWATCH_BIN=/path/to/static/binary packs that binary instead of building ./cmd/depwatch.
set -euo pipefail
LOG_PREFIX=image
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(pause depwatch release-local)
  [[ -d ./test/e2e/testapp ]] && targets+=(testapp)
fi
mkdir -p "$IMAGES_DIR" "$TOOLS_BIN"
VERSION=${VERSION:-$(<"$ROOT/VERSION")}
IMAGE_REPO=${IMAGE_REPO:-ghcr.io/depwatch/depwatch}
[[ ${targets[*]} == release || " ${targets[*]} " != *" release "* ]] ||
  die "release writes the multi-platform release archive and goes alone (make image); the local cluster's copy is release-local"

log "building hack/imgpack"
go build -C "$ROOT/hack/imgpack" -o "$TOOLS_BIN/imgpack" .

# DWD_LINK is where gardenlet starts dependency-watchdog: every depwatch image has its binary
# there too (a symbolic link to /depwatch), so swapping the image is the whole change.
DWD_LINK=usr/local/bin/dependency-watchdog

# pack NAME REF BINARY [TAR [LINK]]: packs BINARY as /NAME into $IMAGES_DIR/TAR.tar (default
# NAME) tagged REF, with a symbolic link LINK to it if given, unless the tarball already holds
# exactly that.
pack() {
  local name=$1 ref=$2 binary=$3 tar="$IMAGES_DIR/${4:-$1}.tar" link=${5:-} sum
  sum="$(sha256sum "$binary" | cut -d' ' -f1) $ref $link"
  if [[ -s $tar && -s $tar.src && "$(<"$tar.src")" == "$sum" ]]; then
    log "$ref: binary unchanged, reusing $tar"
    return
  fi
  "$TOOLS_BIN/imgpack" -binary "$binary" -name "$name" -tag "$ref" -o "$tar" ${link:+-link "$link"}
  echo "$sum" >"$tar.src"
}

# build_static NAME PKG: CGO_ENABLED=0 build of PKG into $TOOLS_BIN/NAME (an image has no libc).
build_static() {
  log "building $1 (CGO_ENABLED=0 go build $2)"
  [[ -d $2 ]] || die "$2 does not exist: cannot build the $1 image"
  CGO_ENABLED=0 go build -trimpath -ldflags "${3:--s -w}" -o "$TOOLS_BIN/$1" "$2" ||
    die "go build $2 failed: cannot build the $1 image"
}

for t in "${targets[@]}"; do
  case $t in
  pause)
    build_static pause ./hack/pause
    pack pause "$PAUSE_IMAGE" "$TOOLS_BIN/pause"
    ;;
  depwatch)
    if [[ -n ${DEPWATCH_BIN:-} ]]; then
      # Pack a binary built elsewhere (it must be static: CGO_ENABLED=0).
      log "packing the given DEPWATCH_BIN=$DEPWATCH_BIN"
      [[ -x $DEPWATCH_BIN ]] || die "DEPWATCH_BIN=$DEPWATCH_BIN is not an executable file"
      pack depwatch "$DEPWATCH_IMAGE" "$DEPWATCH_BIN" depwatch "$DWD_LINK"
      continue
    fi
    build_static depwatch ./cmd/depwatch "-s -w -X main.version=$VERSION"
    pack depwatch "$DEPWATCH_IMAGE" "$TOOLS_BIN/depwatch" depwatch "$DWD_LINK"
    built_depwatch=1
    ;;
  release-local)
    ref="$IMAGE_REPO:$VERSION"
    # The same binary as localhost/depwatch:dev: built once when both are packed.
    if [[ -n ${built_depwatch:-} ]]; then
      cp "$TOOLS_BIN/depwatch" "$TOOLS_BIN/depwatch-release"
    else
      build_static depwatch-release ./cmd/depwatch "-s -w -X main.version=$VERSION"
    fi
    got="$("$TOOLS_BIN/depwatch-release" version)"
    [[ $got == "depwatch $VERSION "* ]] || die "the binary says '$got', not version $VERSION"
    pack depwatch "$ref" "$TOOLS_BIN/depwatch-release" "depwatch-$VERSION-local" "$DWD_LINK"
    ;;
  release)
    # shellcheck source=hack/release-image.sh
    source "$ROOT/hack/release-image.sh"
    release_image
    ;;
  testapp)
    build_static testapp ./test/e2e/testapp
    pack testapp "$TESTAPP_IMAGE" "$TOOLS_BIN/testapp"
    ;;
  *) die "unknown image '$t' (want pause, depwatch, testapp, release-local, or release alone)" ;;
  esac
done

[[ ${targets[*]} == release ]] && exit 0

if containerd_up; then
  for t in "${targets[@]}"; do
    tar="$IMAGES_DIR/$t.tar"
    [[ $t == release-local ]] && tar="$IMAGES_DIR/depwatch-$VERSION-local.tar"
    log "importing $tar into containerd ($CONTAINERD_SOCK, namespace k8s.io)"
    ctr_local images import "$tar" >/dev/null
  done
  ctr_local images ls -q | grep -E "^(localhost/|$IMAGE_REPO:)" | sed "s/^/[image] in containerd: /"
else
  log "the local cluster's containerd is not running: images packed, not imported"
fi
log "done"
