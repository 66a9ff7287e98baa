# The release archive of `hack/image.sh release` (make image): the image users run, for every
# platform of hack/image.conf, as one OCI image layout archive with an image index. Sourced by
# hack/image.sh (lib.sh's helpers, VERSION, IMAGE_REPO and TOOLS_BIN set); don't run it.
# shellcheck shell=bash

release_image() {
  # shellcheck source=hack/image.conf
  source "$ROOT/hack/image.conf"
  [[ $IMAGE_BASE == scratch ]] ||
    die "hack/image.conf: IMAGE_BASE=$IMAGE_BASE, but imgpack packs onto an empty base (scratch) only"
  local ref="$IMAGE_REPO:$VERSION" out="${IMAGE_OUT:-$IMAGES_DIR/depwatch-$VERSION.tar}"
  local revision="${REVISION:-$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || true)}"
  [[ $revision =~ ^[0-9a-f]{40}$ ]] ||
    die "no commit to name in the image (REVISION='$revision'): build in a git checkout or give REVISION=<full commit hash>"
  if [[ -z ${REVISION:-} && -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
    log "WARNING: the work tree has changes not in commit ${revision:0:12}: the image's revision label and \`depwatch version\` name that commit"
  fi
  local bindir ldflags plat arch host got args=()
  bindir=$(mktemp -d "${TMPDIR:-/tmp}/depwatch-release.XXXXXX")
  # shellcheck disable=SC2064 # expand now: bindir is local
  trap "rm -rf '$bindir'" EXIT
  ldflags="-s -w -X main.version=$VERSION -X github.com/depwatch/depwatch/internal/buildinfo.revision=$revision"
  for plat in $IMAGE_PLATFORMS; do
    arch=${plat#linux/}
    log "building depwatch for $plat (CGO_ENABLED=0 GOARCH=$arch go build ./cmd/depwatch)"
    CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "$ldflags" -o "$bindir/depwatch-$arch" ./cmd/depwatch ||
      die "go build ./cmd/depwatch for $plat failed: cannot build the release image"
    args+=(-platform "$plat=$bindir/depwatch-$arch")
  done
  host=$(go env GOARCH)
  if [[ -x $bindir/depwatch-$host ]]; then
    got="$("$bindir/depwatch-$host" version)"
    [[ $got == "depwatch $VERSION (commit ${revision:0:12},"* ]] ||
      die "the linux/$host binary says '$got', not version $VERSION, commit ${revision:0:12}"
  fi
  mkdir -p "$(dirname "$out")"
  "$TOOLS_BIN/imgpack" "${args[@]}" -name "${IMAGE_ENTRYPOINT#/}" -tag "$ref" -o "$out" \
    -user "$IMAGE_USER" -link "$IMAGE_LINK" \
    -label "org.opencontainers.image.title=$IMAGE_TITLE" \
    -label "org.opencontainers.image.source=$IMAGE_SOURCE" \
    -label "org.opencontainers.image.version=$VERSION" \
    -label "org.opencontainers.image.revision=$revision" \
    -label "org.opencontainers.image.licenses=$IMAGE_LICENSES"
  local shown=${out#"$ROOT"/}
  cat <<EOF
[image] wrote $shown ($(du -h "$out" | cut -f1)): image $ref, an OCI image index for ${IMAGE_PLATFORMS// /, }, commit ${revision:0:12}
[image] get it onto your cluster's nodes, one of:
    kind load image-archive $shown                         # kind
    ctr -n k8s.io images import $shown                     # containerd, on every node (k3s: k3s ctr ...)
    skopeo copy --all oci-archive:$shown docker://<registry>/depwatch:$VERSION   # your registry
    mkdir depwatch-oci && tar -xf $shown -C depwatch-oci && crane push depwatch-oci <registry>/depwatch:$VERSION
[image] with your registry, name it there when you install (docs/install.md):
    cd manifests/base && kustomize edit set image ghcr.io/depwatch/depwatch=<registry>/depwatch:$VERSION
    helm install depwatch manifests/charts/depwatch -n depwatch --create-namespace --set image.repository=<registry>/depwatch
EOF
}
