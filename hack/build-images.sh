#!/usr/bin/env bash
# Builds the images the cluster runs, with no registry and no Docker engine:
#   pause   the pod sandbox (hack/go/pause)
#   python  Debian bookworm minbase + python3 (debootstrap from Debian's mirror)
#   runner  python + helmr (runner side, no kopf) + examples/ and the test actors, user 65532
#   operator python + helmr[operator] (the control plane), user 65532
#   egress-proxy python + helmr[egress] (the egress proxy: proxy.py), user 65532
#   coredns cluster DNS (hack/go/kube/coredns)
#   csi     the storage stack (hack/go/addons): hostpath CSI driver, its sidecars,
#           the snapshot controller; each pod names its command
# Each is an OCI tarball in the cache, rebuilt only when its inputs change.
#
#   hack/build-images.sh              build all
#   hack/build-images.sh --import     build all, import the changed ones into the cluster
#   hack/build-images.sh --name NAME  print NAME's image reference
# shellcheck source=lib/cluster.sh
source "$(dirname "$0")/lib/cluster.sh"

IMAGES="$HELMR_CACHE/images"
DEBIAN_MIRROR="${HELMR_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
declare -A REF=(
  [pause]="helmr.local/pause:3.10"
  [python]="helmr.local/python:3.11"
  [runner]="helmr.local/runner:dev"
  [operator]="helmr.local/operator:dev"
  [egress-proxy]="helmr.local/egress-proxy:dev"
  [coredns]="helmr.local/coredns:$COREDNS_VERSION"
  [csi]="helmr.local/csi:$EXTERNAL_SNAPSHOTTER_VERSION-$EXTERNAL_PROVISIONER_VERSION"
)
if [[ "${1:-}" == --name ]]; then echo "${REF[$2]}"; exit 0; fi

# The images run this machine's architecture: Go's name for it (the OCI
# platform name) and the machine's, which manylinux wheel tags use.
ARCH="$(go env GOARCH)"
WHEEL_PLATFORM="manylinux2014_$(uname -m)"

# One build at a time: parallel test runs share the cache.
mkdir -p "$IMAGES"
exec 9>"$IMAGES/.lock"
flock 9

# oci ARGS...: the project's OCI writer (helmr.images.oci, standard library
# only), run from the source tree by the system Python.
oci() { PYTHONPATH="$REPO_DIR/src" python3 -m helmr.images.oci "$@"; }

# layer KEY DIR: the layer tar of DIR, made once per KEY; prints its path.
layer() {
  local out="$IMAGES/layers/$1.tar"
  [[ -f "$out" ]] || {
    mkdir -p "$IMAGES/layers"
    oci layer "$2" "$out.tmp" >/dev/null
    mv "$out.tmp" "$out"
  }
  echo "$out"
}

# image NAME KEY ARGS...: writes $IMAGES/NAME/KEY.tar unless it exists.
image() {
  local name="$1" key="$2"; shift 2
  local out="$IMAGES/$name/$key.tar"
  [[ -f "$out" ]] || {
    log "building image ${REF[$name]}"
    mkdir -p "$IMAGES/$name"
    oci image "$out.tmp" "${REF[$name]}" --architecture "$ARCH" "$@" \
      >"$IMAGES/$name/$key.digest"
    mv "$out.tmp" "$out"
  }
  ln -sfn "$out" "$IMAGES/$name/current.tar"
  ln -sfn "$IMAGES/$name/$key.digest" "$IMAGES/$name/current.digest"
  prune "$name" "$key"
}

# prune NAME KEY: drops NAME's older builds (its images change with every
# source edit; kept, they grow the cache by gigabytes a day).
prune() {
  local name="$1" key="$2" f
  for f in "$IMAGES/$name"/*.tar "$IMAGES/$name"/*.digest "$IMAGES/$name"/rootfs-* \
           "$IMAGES/layers/$name"-*.tar; do
    [[ -e "$f" && "$f" != *"$key"* && "$(basename "$f")" != current.* ]] && rm -rf "$f"
  done
  return 0
}

# static_image NAME BINARY USER ARGS...: an image of one static Go binary.
static_image() {
  local name="$1" bin; bin="$(readlink -f "$HELMR_BIN/current/$2")"; shift 2
  local key; key="$(key_of "$bin")"
  local root="$IMAGES/$name/rootfs-$key"
  [[ -d "$root" ]] || { mkdir -p "$root"; cp "$bin" "$root/"; }
  image "$name" "$key" --layer "$(layer "$name-$key" "$root")" --entrypoint "[\"/$(basename "$bin")\"]" "$@"
}

# bundle_image NAME BINARY...: one image of several static Go binaries, no
# entrypoint (the pods name the command); one layer, pulled once for all.
bundle_image() {
  local name="$1" bins=() b; shift
  for b in "$@"; do bins+=("$(readlink -f "$HELMR_BIN/current/$b")"); done
  local key; key="$(key_of "${bins[@]}")"
  local root="$IMAGES/$name/rootfs-$key"
  [[ -d "$root" ]] || { mkdir -p "$root.tmp"; cp "${bins[@]}" "$root.tmp/"; mv "$root.tmp" "$root"; }
  image "$name" "$key" --layer "$(layer "$name-$key" "$root")"
}

PYTHON_PACKAGES="python3,ca-certificates"
PYTHON_LAYER=""
PYTHON_ROOT=""
build_python() {
  local key; key="$(echo "bookworm minbase $PYTHON_PACKAGES $DEBIAN_MIRROR" | sha256sum | cut -c1-16)"
  local root="$HELMR_CACHE/rootfs/python-$key"
  if [[ ! -f "$root.done" ]]; then
    log "debootstrap bookworm + $PYTHON_PACKAGES (about a minute)"
    rm -rf "$root" "$root.unchecked-pyc"
    debootstrap --variant=minbase --include="$PYTHON_PACKAGES" bookworm "$root" "$DEBIAN_MIRROR" >&2
    # Trim what a runtime image never reads.
    rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/usr/share/{doc,man,info,locale}/* \
      "$root"/var/log/*
    touch "$root.done"
  fi
  # Every file of a layer has mtime 0 (helmr.images.oci), so Debian's bytecode,
  # checked against its sources' mtimes, would be stale at every start: each Python
  # process would compile again all the standard library it imports (a runner
  # process had used 0.41 s of CPU by the end of its imports in its pod, 0.10 s
  # with this bytecode). Bytecode never checked is right for files that never
  # change; the image's own interpreter writes it.
  if [[ ! -f "$root.unchecked-pyc" ]]; then
    chroot "$root" python3 -m compileall -q -f --invalidation-mode unchecked-hash \
      /usr/lib/python3.11 /usr/lib/python3/dist-packages >&2
    touch "$root.unchecked-pyc"
  fi
  key="$key-unchecked-pyc"
  PYTHON_ROOT="$root"
  PYTHON_LAYER="$(layer "python-$key" "$root")"
  image python "$key" --layer "$PYTHON_LAYER"
}

# helmr_image NAME REQUIREMENT ENTRYPOINT_JSON: helmr (with REQUIREMENT's
# extras) and its dependencies as one layer over python.
helmr_image() {
  local name="$1" requirement="$2" entrypoint="$3"
  # The recipe (this script) is part of the key: changing how an image is made rebuilds it.
  local sources=() key f
  # The working tree's files: a tracked file deleted but not yet committed is
  # not in the image (and has nothing to hash).
  while IFS= read -r f; do
    [[ -e "$REPO_DIR/$f" ]] && sources+=("$f")
  done < <(cd "$REPO_DIR" && git ls-files -co --exclude-standard src examples tests/actors | sort)
  key="$(key_of "$IMAGES/python/current.digest" "$REPO_DIR/pyproject.toml" \
    "$HACK_DIR/build-images.sh" <(echo "$requirement $entrypoint") "${sources[@]/#/$REPO_DIR/}")"
  local root="$IMAGES/$name/rootfs-$key"
  if [[ ! -d "$root" ]]; then
    rm -rf "$root.tmp"; mkdir -p "$root.tmp/opt/helmr/lib" "$root.tmp/app"
    # Wheels only, for the image's Python (Debian's 3.11), whatever the host runs.
    python3 -m pip wheel --quiet --no-deps --disable-pip-version-check -w "$root.tmp/wheel" "$REPO_DIR" >&2
    local wheel; wheel="$(ls "$root.tmp"/wheel/*.whl)"
    python3 -m pip install --quiet --no-compile --disable-pip-version-check \
      --target "$root.tmp/opt/helmr/lib" --only-binary=:all: --python-version 3.11 \
      --platform "$WHEEL_PLATFORM" --implementation cp "${requirement/helmr/$wheel}" >&2 \
      || die "pip could not install $requirement into the $name layer"
    rm -rf "$root.tmp/wheel"
    # Compiled once here: the root filesystem is read-only at run time, so an
    # uncompiled image recompiles every import at every start (~0.6 s a cold
    # start). unchecked-hash keeps the layer reproducible (no mtimes).
    python3 -m compileall -q -j 0 --invalidation-mode unchecked-hash "$root.tmp/opt/helmr/lib" >&2
    # A name for uid 65532: some libraries (getpass, kopf's identity) ask for it.
    mkdir -p "$root.tmp/etc"
    cp "$PYTHON_ROOT/etc/passwd" "$PYTHON_ROOT/etc/group" "$root.tmp/etc/"
    echo "helmr:x:65532:65532:helmr:/tmp:/usr/sbin/nologin" >>"$root.tmp/etc/passwd"
    echo "helmr:x:65532:" >>"$root.tmp/etc/group"
    if [[ "$name" == runner && -d "$REPO_DIR/examples" ]]; then
      # The examples, and the actors Helmr's cluster tests run (tests/actors).
      cp -r "$REPO_DIR/examples/." "$REPO_DIR/tests/actors/." "$root.tmp/app/"
      python3 -m compileall -q --invalidation-mode unchecked-hash "$root.tmp/app" >&2
    fi
    mv "$root.tmp" "$root"
  fi
  image "$name" "$key" --layer "$PYTHON_LAYER" --layer "$(layer "$name-$key" "$root")" \
    --entrypoint "$entrypoint" --user 65532 --workdir /app \
    --env PYTHONPATH=/opt/helmr/lib:/app --env PYTHONUNBUFFERED=1
}

# import_image NAME: imports into the node's containerd unless it has this digest.
import_image() {
  local digest; digest="$(<"$IMAGES/$1/current.digest")"
  if ctr_k8s images ls -q "name==${REF[$1]}" 2>/dev/null | grep -q . \
     && [[ "$(ctr_k8s images ls "name==${REF[$1]}" | awk 'NR==2 {print $3}')" == "$digest" ]]; then
    return 0
  fi
  log "importing ${REF[$1]} ($digest)"
  ctr_k8s images import --no-unpack=false "$IMAGES/$1/current.tar" >&2
}

static_image pause pause --user 65535
static_image coredns coredns --user 65532
bundle_image csi csi-hostpath csi-provisioner csi-snapshotter snapshot-controller
build_python
helmr_image runner helmr '["python3", "-m", "helmr.runner"]'
helmr_image operator "helmr[operator,tracing,postgres]" '["python3", "-m", "kopf", "run", "-m", "helmr.operator.kopf", "--standalone"]'
helmr_image egress-proxy "helmr[egress]" '["python3", "-m", "helmr.egress"]'
if [[ "${1:-}" == --import ]]; then
  for name in "${!REF[@]}"; do import_image "$name"; done
fi
