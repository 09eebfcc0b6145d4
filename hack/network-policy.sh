#!/usr/bin/env bash
# Enforces NetworkPolicy on the local cluster: the bridge CNI plugins enforce
# none, so kube-router (built by hack/build.sh, module hack/go/addons) runs on the
# node as a daemon with its network policy controller alone: no BGP routing,
# no service proxy (kube-proxy serves Services), only iptables and ipset rules
# for the pods on this node's bridge. Why kube-router and not Calico's felix:
# one binary with no datastore, no CNI of its own to replace ours, and it
# filters bridged pod traffic with the iptables the node already uses.
# Its identity is a client certificate (cluster-up.sh) with read access to
# what policies name. Idempotent.
# shellcheck source=lib/cluster.sh
source "$(dirname "$0")/lib/cluster.sh"

kubectl_admin apply --server-side --force-conflicts -f - <<YAML >&2
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "helmr:kube-router"}
rules:
- apiGroups: [""]
  resources: [namespaces, pods, services, nodes, endpoints]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "helmr:kube-router"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "helmr:kube-router"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "system:kube-router"}]
YAML

# --health-port: its healthz, on which the wait below asks whether the
# controller has synced; --metrics-port 0: no metrics endpoint on the host.
start_daemon kube-router kube-router --kubeconfig "$CONF/kube-router.kubeconfig" \
  --hostname-override "$NODE_NAME" --run-firewall=true --run-router=false --run-service-proxy=false \
  --service-cluster-ip-range "$SERVICE_CIDR" --health-port "$KUBE_ROUTER_HEALTH_PORT" --metrics-port 0
wait_for 60 "kube-router's policy controller" curl -fsS "http://127.0.0.1:$KUBE_ROUTER_HEALTH_PORT/healthz"
log "network policy enforced by kube-router"
