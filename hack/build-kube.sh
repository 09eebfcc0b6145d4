#!/usr/bin/env bash
# Builds the pinned Kubernetes components (apiserver, controller-manager,
# scheduler, kubelet, kube-proxy, kubectl) from the Go module proxy into the
# cache. A no-op when the binaries for these pins exist.
source "$(dirname "$0")/lib/common.sh"

mod="$HACK_DIR/go/kube"
grep -q "k8s.io/kubernetes v$KUBERNETES_VERSION\b" "$mod/go.mod" \
  || die "hack/go/kube/go.mod does not pin v$KUBERNETES_VERSION; run hack/gen-go-modules.sh"
out="$HELMR_BIN/kube-$(key_of "$mod/go.mod" "$mod/go.sum")"
tools=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

if [[ -x "$out/kubectl" && -x "$out/kubelet" ]]; then
  log "kubernetes v$KUBERNETES_VERSION: cached in $out"
else
  log "building kubernetes v$KUBERNETES_VERSION into $out (cold: tens of minutes)"
  major="${KUBERNETES_VERSION%%.*}"; minor="${KUBERNETES_VERSION#*.}"; minor="${minor%%.*}"
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$KUBERNETES_VERSION"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  tmp="$out.tmp"; rm -rf "$tmp"; mkdir -p "$tmp"
  pkgs=(); for t in "${tools[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$t"); done
  # -p=1 links one binary at a time: each link takes ~2 GB.
  (cd "$mod" && CGO_ENABLED=0 go build -p "${HELMR_BUILD_JOBS:-2}" -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}")
  mv "$tmp" "$out"
fi
mkdir -p "$HELMR_BIN/current"
for t in "${tools[@]}"; do ln -sfn "$out/$t" "$HELMR_BIN/current/$t"; done
