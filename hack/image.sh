#!/usr/bin/env bash
# Builds the local cluster's images without Docker and, when the cluster's containerd
# runs, imports them into it (namespace k8s.io, where the kubelet looks):
#   localhost/pause:local    static pause program (hack/pause), containerd's sandbox_image
#   localhost/depwatch:dev   CGO_ENABLED=0 build of ./cmd/depwatch, entrypoint /depwatch
#   localhost/depwatch-testapp:dev   ./test/e2e/testapp (the e2e workload), entrypoint /testapp
# Tarballs (docker-save format) land in _output/images/. A tarball whose binary did not
# change is not packed again.
#
# Usage: hack/image.sh [pause|depwatch|testapp]...   (default: all three)
# DEPWATCH_BIN=/path/to/static/binary packs that binary instead of building ./cmd/depwatch.
set -euo pipefail
LOG_PREFIX=image
# shellcheck source=hack/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(pause depwatch)
  [[ -d ./test/e2e/testapp ]] && targets+=(testapp)
fi
mkdir -p "$IMAGES_DIR" "$TOOLS_BIN"

log "building hack/imgpack"
go build -C "$ROOT/hack/imgpack" -o "$TOOLS_BIN/imgpack" .

# pack NAME REF BINARY: packs BINARY as /NAME into $IMAGES_DIR/NAME.tar tagged REF,
# unless the tarball already holds this exact binary.
pack() {
  local name=$1 ref=$2 binary=$3 tar="$IMAGES_DIR/$1.tar" sum
  sum="$(sha256sum "$binary" | cut -d' ' -f1) $ref"
  if [[ -s $tar && -s $tar.src && "$(<"$tar.src")" == "$sum" ]]; then
    log "$ref: binary unchanged, reusing $tar"
    return
  fi
  "$TOOLS_BIN/imgpack" -binary "$binary" -name "$name" -tag "$ref" -o "$tar"
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
      pack depwatch "$DEPWATCH_IMAGE" "$DEPWATCH_BIN"
      continue
    fi
    version=${VERSION:-$(git -C "$ROOT" describe --tags --always --dirty 2>/dev/null || echo dev)}
    build_static depwatch ./cmd/depwatch "-s -w -X main.version=$version"
    pack depwatch "$DEPWATCH_IMAGE" "$TOOLS_BIN/depwatch"
    ;;
  testapp)
    build_static testapp ./test/e2e/testapp
    pack testapp "$TESTAPP_IMAGE" "$TOOLS_BIN/testapp"
    ;;
  *) die "unknown image '$t' (want pause, depwatch or testapp)" ;;
  esac
done

if containerd_up; then
  for t in "${targets[@]}"; do
    log "importing $IMAGES_DIR/$t.tar into containerd ($CONTAINERD_SOCK, namespace k8s.io)"
    ctr_local images import "$IMAGES_DIR/$t.tar" >/dev/null
  done
  ctr_local images ls -q | grep -E '^localhost/' | sed "s/^/[image] in containerd: /"
else
  log "the local cluster's containerd is not running: images packed, not imported"
fi
log "done"
