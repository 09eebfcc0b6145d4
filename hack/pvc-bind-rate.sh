#!/usr/bin/env bash
# How fast the local cluster's storage binds claims: creates N PVCs (default
# 200) of the default StorageClass at once in a new namespace, and prints the
# seconds until the provisioner has made a volume for each (the CSI side) and
# until all are Bound (the PV binder's side), and the claims bound per
# second. The namespace
# is deleted afterwards (its volumes with it: reclaimPolicy Delete).
#   hack/pvc-bind-rate.sh [N]
# shellcheck source=lib/cluster.sh
source "$(dirname "$0")/lib/cluster.sh"

count="${1:-200}"
namespace="pvc-rate-$(date +%s)-$$"
kubectl_admin create namespace "$namespace" >/dev/null
trap 'kubectl_admin delete namespace "$namespace" --wait=false >/dev/null' EXIT

claims() {
  local i
  for ((i = 0; i < count; i++)); do
    cat <<EOF
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: claim-$i, namespace: $namespace}
spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Mi}}}
EOF
  done
}
bound() {
  kubectl_admin get pvc -n "$namespace" -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' |
    grep -c '^Bound$' || true
}

provisioned() {
  kubectl_admin get pv -o jsonpath='{range .items[*]}{.spec.claimRef.namespace}{"\n"}{end}' |
    grep -cx "$namespace" || true
}

began=$(date +%s.%N)
claims | kubectl_admin create -f - >/dev/null
created=$(date +%s.%N)
while (($(provisioned) < count)); do sleep 0.5; done
volumes=$(date +%s.%N)
while (($(bound) < count)); do sleep 0.5; done
ended=$(date +%s.%N)
awk -v n="$count" -v b="$began" -v c="$created" -v v="$volumes" -v e="$ended" 'BEGIN {
  printf "%d PVCs created in %.1f s; all provisioned after %.1f s, all Bound after %.1f s: %.1f PVCs/s\n",
    n, c - b, v - b, e - b, n / (e - b)
}'
