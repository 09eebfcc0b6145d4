#!/usr/bin/env bash
# Tears the local cluster down: stops the pods' containers, then each daemon
# by the PID cluster-up recorded, then removes what they left behind: mounts
# under the cluster directory, pod network namespaces, the CNI bridge and the
# iptables chains of kube-proxy and CNI. State (etcd, PKI, images) is kept so
# the next `up` is fast; `--purge` removes it too.
source "$(dirname "$0")/lib/cluster.sh"

# The kubelet first, so nothing restarts pods while they are stopped.
stop_daemons kube-proxy kubelet
if pid_of containerd >/dev/null; then
  for sandbox in $(ctr_k8s tasks ls -q 2>/dev/null); do
    ctr_k8s tasks kill -s SIGKILL "$sandbox" >/dev/null 2>&1 || true
  done
  sleep 0.5
  for sandbox in $(ctr_k8s tasks ls -q 2>/dev/null); do
    ctr_k8s tasks delete -f "$sandbox" >/dev/null 2>&1 || true
  done
fi
stop_daemons containerd
# containerd's shims outlive it; ours are the ones that name our socket.
for pid in $(pgrep -f "containerd-shim.*-address $CONTAINERD_SOCK" || true); do
  kill -9 "$pid" 2>/dev/null || true
done
stop_daemons kube-scheduler kube-controller-manager kube-apiserver
stop_daemons etcd

# Mounts (container rootfs, shm, kubelet volumes), deepest first.
awk -v dir="$HELMR_CLUSTER_DIR" '$5 ~ "^"dir {print $5}' /proc/self/mountinfo | sort -r \
  | while read -r mnt; do umount -l "$mnt" 2>/dev/null || true; done
# Pod network namespaces that our CNI network made (containerd names them cni-*).
for ns in $(ip netns list 2>/dev/null | awk '/^cni-/ {print $1}'); do ip netns delete "$ns" 2>/dev/null || true; done
ip link delete "$BRIDGE" 2>/dev/null || true
rm -rf "$HELMR_CLUSTER_DIR/cni/ipam"
# kube-proxy's and the CNI plugins' iptables chains, and only those.
for table in filter nat mangle; do
  { iptables-save -t "$table" 2>/dev/null | grep -E '^-A .*(KUBE-|CNI-)' || true; } | sed 's/^-A/-D/' \
    | while read -r rule; do eval "iptables -t $table $rule" 2>/dev/null || true; done
  for chain in $(iptables-save -t "$table" 2>/dev/null | sed -n 's/^:\(\(KUBE\|CNI\)-[^ ]*\).*/\1/p'); do
    iptables -t "$table" -F "$chain" 2>/dev/null || true
  done
  for chain in $(iptables-save -t "$table" 2>/dev/null | sed -n 's/^:\(\(KUBE\|CNI\)-[^ ]*\).*/\1/p'); do
    iptables -t "$table" -X "$chain" 2>/dev/null || true
  done
done
# The kubelet's pod cgroups.
for ctl in /sys/fs/cgroup/*/kubepods; do
  [[ -d "$ctl" ]] && find "$ctl" -depth -type d -exec rmdir {} \; 2>/dev/null || true
done

if [[ "${1:-}" == --purge ]]; then
  rm -rf "$HELMR_CLUSTER_DIR"
  log "cluster removed"
else
  log "cluster down (state kept in $HELMR_CLUSTER_DIR; --purge removes it)"
fi
