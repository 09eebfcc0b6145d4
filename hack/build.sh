#!/usr/bin/env bash
# Builds every pinned Go component from the Go module proxy into the cache, one
# `go build` per module of hack/go:
#   kube    Kubernetes (apiserver, controller-manager, scheduler, kubelet,
#           kube-proxy, kubectl), helm and CoreDNS, on the cluster's own
#           release of Kubernetes' client libraries
#   addons  the storage stack (snapshot controller, CSI sidecars, hostpath CSI
#           driver) and kube-router (NetworkPolicy), on a newer release of them
#   etcd, pause (the pod sandbox's init process)
# and unpacks promtool (the tests check the chart's alerting rules with it).
# Components that share dependencies share a module, so a cold build compiles
# each package once: most of a cold CI's time is this build. Each module is keyed
# by the hash of its go.mod/go.sum/sources, so only a changed pin rebuilds.
# Binaries are linked into $HELMR_CACHE/bin/current.
#
#   hack/build.sh [module...]     (default: all but kwok; modules are hack/go/*)
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"

# check_pin MODULE PATH VERSION: go.mod must require what versions.env pins.
check_pin() {
  grep -q "$2 v$3\b" "$HACK_DIR/go/$1/go.mod" \
    || die "hack/go/$1/go.mod does not require $2 v$3 (versions.env); update it and run 'go mod tidy' there"
}

# module_out MODULE: the output directory of a module's build, named by the
# content key of its go.mod, go.sum and sources.
module_out() {
  local dir="$HACK_DIR/go/$1" sources
  mapfile -t sources < <(find "$dir" -name '*.go' | sort)
  echo "$HELMR_BIN/$1-$(key_of "$dir"/go.* "${sources[@]}")"
}

# prefetch MODULE...: downloads the modules that unbuilt wrappers need, all at
# once in the background. A cold build is mostly waiting on the module proxy
# (Kubernetes alone is over 1 GB of modules), so the downloads overlap the compiles
# that follow one at a time; the go command locks its module cache, so a build
# that needs a module being fetched waits for it. Errors are left to the build.
prefetch() {
  local m
  for m in "$@"; do
    [[ -f "$HACK_DIR/go/$m/go.mod" && ! -f "$(module_out "$m")/.done" ]] || continue
    (cd "$HACK_DIR/go/$m" && go mod download >/dev/null 2>&1) &
  done
}

# build_module MODULE LDFLAGS PKG...: one `go build` per module, so shared
# packages compile once; one directory per content key.
build_module() {
  local mod="$1" ldflags="$2"; shift 2
  local dir="$HACK_DIR/go/$mod" out
  out="$(module_out "$mod")"
  if [[ ! -f "$out/.done" ]]; then
    log "building $mod into $out"
    rm -rf "$out"; mkdir -p "$out"
    local started=$SECONDS
    (cd "$dir" && CGO_ENABLED=0 go build -p "${HELMR_BUILD_JOBS:-2}" -trimpath \
      -ldflags "-s -w $ldflags" -o "$out/" "$@")
    touch "$out/.done"
    log "built $mod in $((SECONDS - started))s"
  fi
  mkdir -p "$HELMR_BIN/current"
  local f
  for f in "$out"/*; do ln -sfn "$f" "$HELMR_BIN/current/$(basename "$f")"; done
}

# Kubernetes' components, helm and CoreDNS: one module (hack/go/kube), so the
# client libraries all three are built on compile once.
build_kube() {
  check_pin kube k8s.io/kubernetes "$KUBERNETES_VERSION"
  check_pin kube helm.sh/helm/v3 "$HELM_VERSION"
  check_pin kube github.com/coredns/coredns "$COREDNS_VERSION"
  local v="$KUBERNETES_VERSION" minor="${KUBERNETES_VERSION#*.}"; minor="${minor%%.*}"
  local ldflags="-X k8s.io/component-base/version.gitVersion=v$v"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=${v%%.*} -X k8s.io/component-base/version.gitMinor=$minor"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  ldflags+=" -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION"
  local pkgs=(helm.sh/helm/v3/cmd/helm ./coredns) t
  for t in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
    pkgs+=("k8s.io/kubernetes/cmd/$t")
  done
  build_module kube "$ldflags" "${pkgs[@]}"
}

build_etcd() {
  check_pin etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
  build_module etcd "" .
}

build_pause() { build_module pause "" .; }

# What the cluster adds to Kubernetes, one module (hack/go/addons): the storage
# stack (the snapshot controller, the CSI sidecars and this repository's
# hostpath driver; the VolumeSnapshot CRDs come from the same pin's client
# module) and kube-router, the NetworkPolicy engine (hack/network-policy.sh).
build_addons() {
  local snapshotter=github.com/kubernetes-csi/external-snapshotter
  check_pin addons "$snapshotter/v8" "$EXTERNAL_SNAPSHOTTER_VERSION"
  check_pin addons "$snapshotter/client/v8" "$EXTERNAL_SNAPSHOTTER_VERSION"
  check_pin addons github.com/kubernetes-csi/external-provisioner/v6 "$EXTERNAL_PROVISIONER_VERSION"
  check_pin addons github.com/cloudnativelabs/kube-router/v2 "$KUBE_ROUTER_VERSION"
  build_module addons "" ./csi-hostpath "$snapshotter/v8/cmd/snapshot-controller" \
    "$snapshotter/v8/cmd/csi-snapshotter" github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner \
    github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
  local crds="$HELMR_BIN/volumesnapshot-crds-$EXTERNAL_SNAPSHOTTER_VERSION.yaml" client
  if [[ ! -f "$crds" ]]; then
    client="$(cd "$HACK_DIR/go/addons" && go list -m -f '{{.Dir}}' "$snapshotter/client/v8")"
    cat "$client"/config/crd/snapshot.storage.k8s.io_*.yaml >"$crds.tmp"
    mv "$crds.tmp" "$crds"
  fi
  ln -sfn "$crds" "$HELMR_BIN/current/volumesnapshot-crds.yaml"
}

# promtool from Debian's prometheus package, not compiled: rule checks and rule
# unit tests are all the tests need of it, and compiling it from the Prometheus
# module cost a cold build ~1 GB of modules and ~5 CPU-minutes. Only the one
# binary is unpacked from the pinned .deb (installing the package would add a
# Prometheus server and its service).
build_promtool() {
  local out="$HELMR_BIN/promtool-$PROMTOOL_DEBIAN_VERSION" tmp
  if [[ ! -x "$out/promtool" ]]; then
    log "unpacking promtool from Debian's prometheus $PROMTOOL_DEBIAN_VERSION"
    tmp="$(mktemp -d)"
    # apt drops to the _apt user to download, which needs to write here.
    chmod 0777 "$tmp"
    (cd "$tmp" && apt-get download -q "prometheus=$PROMTOOL_DEBIAN_VERSION" >/dev/null 2>&1) \
      || die "apt-get download prometheus=$PROMTOOL_DEBIAN_VERSION failed (is the pin still in the archive? apt-cache policy prometheus)"
    dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/root"
    mkdir -p "$out"
    mv "$tmp/root/usr/bin/promtool" "$out/promtool"
    rm -rf "$tmp"
  fi
  mkdir -p "$HELMR_BIN/current"
  ln -sfn "$out/promtool" "$HELMR_BIN/current/promtool"
}

# kwok's controller: fake nodes and pods for the scale benchmark
# (benchmarks/bench_scale.py kwok). Not in the default list: only that
# benchmark needs it, so CI does not pay for its build. kwok does nothing
# without stages: its "fast" ones (a node is Ready, a pod Running at once, a
# deleted pod gone) come from the same pin's module, beside the binary.
build_kwok() {
  check_pin kwok sigs.k8s.io/kwok "$KWOK_VERSION"
  build_module kwok "" sigs.k8s.io/kwok/cmd/kwok
  local stages="$HELMR_BIN/kwok-stages-$KWOK_VERSION.yaml" module f
  if [[ ! -f "$stages" ]]; then
    module="$(cd "$HACK_DIR/go/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
    for f in node/fast/node-initialize node/heartbeat/node-heartbeat \
      pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
      printf -- '---\n'; cat "$module/kustomize/stage/$f.yaml"
    done >"$stages.tmp"
    mv "$stages.tmp" "$stages"
  fi
  ln -sfn "$stages" "$HELMR_BIN/current/kwok-stages.yaml"
}

# One build at a time: parallel runs share the cache.
mkdir -p "$HELMR_BIN"
exec 9>"$HELMR_BIN/.lock"
flock 9

modules=("$@")
[[ ${#modules[@]} -gt 0 ]] || modules=(pause etcd kube addons promtool)
prefetch "${modules[@]}"
for m in "${modules[@]}"; do "build_${m//-/_}"; done
wait
