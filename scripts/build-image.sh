#!/usr/bin/env bash
# Build the inferscope container image (Containerfile) with whichever of docker, podman or
# buildah works here, and optionally push it.
#
#   scripts/build-image.sh                       build localhost/inferscope:VERSION
#   scripts/build-image.sh --name REG/inferscope build and tag REG/inferscope:VERSION
#   scripts/build-image.sh --push REG/inferscope build, tag REG/inferscope:VERSION, push it
#   scripts/build-image.sh --from-binary PATH    no registry: the same image content (binary,
#       user, entrypoint, labels) on a base assembled here from the shared libraries `ldd PATH`
#       lists, with buildah; for machines that cannot pull base images
#   scripts/build-image.sh --print-name          print the image reference and exit
#
# VERSION is the workspace version in Cargo.toml. deploy/kubernetes/kustomization.yaml names
# localhost/inferscope:VERSION, the default here; after --push, point it at your registry with
# `kustomize edit set image inferscope=REG/inferscope:VERSION` (docs/fleet.md).
# Environment: BUILDER=docker|podman|buildah picks the tool.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
REVISION=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
NAME=localhost/inferscope
PUSH=0
FROM_BINARY=""
while [ $# -gt 0 ]; do
    case "$1" in
        --name) NAME=${2:?--name needs an image name}; shift 2 ;;
        --push) NAME=${2:?--push needs an image name}; PUSH=1; shift 2 ;;
        --from-binary) FROM_BINARY=${2:?--from-binary needs a path}; shift 2 ;;
        --print-name) echo "$NAME:$VERSION"; exit 0 ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "build-image.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
IMAGE="$NAME:$VERSION"

works() {
    case "$1" in
        docker) command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 ;;
        *) command -v "$1" >/dev/null 2>&1 ;;
    esac
}

if [ -n "$FROM_BINARY" ]; then
    BUILDER=${BUILDER:-buildah}
    [ "$BUILDER" = buildah ] || { echo "build-image.sh: --from-binary needs buildah" >&2; exit 2; }
else
    if [ -z "${BUILDER:-}" ]; then
        for b in docker podman buildah; do
            if works "$b"; then BUILDER=$b; break; fi
        done
    fi
fi
if [ -z "${BUILDER:-}" ] || ! works "$BUILDER"; then
    echo "build-image.sh: none of docker (with a running daemon), podman or buildah works here;" \
        "install one (Debian: apt-get install buildah)" >&2
    exit 2
fi

# The values the Containerfile sets, read from it so both ways of building agree.
label_args() {
    sed -n 's/^ *\(LABEL \)\{0,1\}\(org\.opencontainers\.image\.[a-z]*\)="\([^"]*\)".*/\2=\3/p' \
        Containerfile | sed -e "s/\${VERSION}/$VERSION/" -e "s/\${REVISION}/$REVISION/"
}

if [ -z "$FROM_BINARY" ]; then
    echo "build-image.sh: building $IMAGE with $BUILDER" >&2
    case "$BUILDER" in
        buildah) build=(buildah build) ;;
        *) build=("$BUILDER" build) ;;
    esac
    "${build[@]}" -f Containerfile --build-arg "VERSION=$VERSION" \
        --build-arg "REVISION=$REVISION" -t "$IMAGE" .
else
    [ -x "$FROM_BINARY" ] || { echo "build-image.sh: $FROM_BINARY: not an executable" >&2; exit 2; }
    echo "build-image.sh: assembling $IMAGE from $FROM_BINARY and the libraries ldd lists" >&2
    rootfs=$(mktemp -d)
    trap 'rm -rf "$rootfs"' EXIT
    install -D -m 0755 "$FROM_BINARY" "$rootfs/usr/local/bin/inferscope"
    # Every library the dynamic linker resolves, and the linker itself, at the same paths.
    for lib in $(ldd "$FROM_BINARY" | grep -o '/[^ ]*'); do
        mkdir -p "$rootfs$(dirname "$lib")"
        cp -L "$lib" "$rootfs$lib"
    done
    mkdir -p "$rootfs/etc" "$rootfs/tmp"
    chmod 1777 "$rootfs/tmp"
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' >"$rootfs/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
    ctr=$(buildah from scratch)
    trap 'rm -rf "$rootfs"; buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
    buildah copy "$ctr" "$rootfs" / >/dev/null
    labels=()
    while IFS= read -r l; do labels+=(--label "$l"); done < <(label_args)
    user=$(sed -n 's/^USER \(.*\)$/\1/p' Containerfile)
    entrypoint=$(sed -n 's/^ENTRYPOINT \(.*\)$/\1/p' Containerfile)
    cmd=$(sed -n 's/^CMD \(.*\)$/\1/p' Containerfile)
    port=$(sed -n 's/^EXPOSE \(.*\)$/\1/p' Containerfile)
    buildah config --user "$user" --entrypoint "$entrypoint" --cmd "$cmd" --port "$port" \
        "${labels[@]}" "$ctr"
    buildah commit --quiet "$ctr" "$IMAGE" >/dev/null
fi
echo "$IMAGE"
if [ "$PUSH" = 1 ]; then
    echo "build-image.sh: pushing $IMAGE" >&2
    "$BUILDER" push "$IMAGE"
fi
