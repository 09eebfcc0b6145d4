#!/usr/bin/env bash
# Deploys the local cluster's storage: the VolumeSnapshot CRDs (from the
# pinned external-snapshotter client module), the snapshot controller, the
# hostpath CSI driver with its provisioner and snapshotter sidecars, and the
# default StorageClass and VolumeSnapshotClass (manifests in hack/storage/).
# Idempotent; waits until the driver is registered on the node.
# shellcheck source=lib/cluster.sh
source "$(dirname "$0")/lib/cluster.sh"

DRIVER=hostpath.csi.helmr.dev
KUBELET_DIR="$HELMR_CLUSTER_DIR/kubelet"
# Volumes and snapshots: subvolumes of the btrfs in CSI_DATA_DIR (lib/cluster.sh).
mount_csi_data
image="$("$HACK_DIR/build-images.sh" --name csi)"
digest="$(<"$HELMR_CACHE/images/csi/current.digest")"

# fill FILE: a manifest with this cluster's paths and image.
fill() {
  sed -e "s|@KUBELET_DIR@|$KUBELET_DIR|g" -e "s|@DATA_DIR@|$CSI_DATA_DIR|g" \
    -e "s|@IMAGE_DIGEST@|$digest|g" -e "s|@IMAGE@|$image|g" "$HACK_DIR/storage/$1"
}
apply() { kubectl_admin apply --server-side --force-conflicts "$@" >&2; }

apply -f "$HELMR_BIN/current/volumesnapshot-crds.yaml"
apply -f "$HACK_DIR/storage/namespace.yaml" -f "$HACK_DIR/storage/rbac.yaml"
fill csi-hostpath.yaml | apply -f -
kubectl_admin wait --for condition=established --timeout 60s \
  crd/volumesnapshotclasses.snapshot.storage.k8s.io >/dev/null
apply -f "$HACK_DIR/storage/classes.yaml"

kubectl_admin -n helmr-storage rollout status --timeout 120s daemonset/csi-hostpath >&2
kubectl_admin -n helmr-storage rollout status --timeout 120s deployment/snapshot-controller >&2
driver_registered() {
  kubectl_admin get csinode "$NODE_NAME" -o jsonpath='{.spec.drivers[*].name}' | grep -qw "$DRIVER"
}
wait_for 60 "CSI driver $DRIVER on node $NODE_NAME" driver_registered
log "storage ready: StorageClass helmr-hostpath, VolumeSnapshotClass helmr-hostpath"
