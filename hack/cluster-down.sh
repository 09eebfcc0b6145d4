#!/usr/bin/env bash
# Tears the local cluster down: stops the pods' containers, then each daemon
# by the PID cluster-up recorded, then removes what they left behind: mounts
# under the cluster directory, pod network namespaces, the CNI bridge and the
# iptables chains of kube-proxy and CNI. State (etcd, PKI, images) is kept so
# the next `up` is fast; `--purge` removes it too.
# shellcheck source=lib/cluster.sh
source "$(dirname "$0")/lib/cluster.sh"

# The kubelet first, so nothing restarts pods while they are stopped.
stop_daemons kube-router kube-proxy kubelet
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
# remove_chains TABLE PREFIX: deletes the rules that jump to TABLE's chains
# named PREFIX*, then flushes and deletes those chains, in one
# iptables-restore (it parses the rules' quoted comments: nothing is eval'd).
remove_chains() {
  local table="$1" prefix="$2" saved chains
  saved="$(iptables-save -t "$table" 2>/dev/null)" || return 0
  mapfile -t chains < <(sed -n "s/^:\(${prefix}[^ ]*\) .*/\1/p" <<<"$saved")
  [[ ${#chains[@]} -gt 0 ]] || return 0
  {
    echo "*$table"
    # Jumps from other chains; those inside ours go with the flush.
    grep -E -- "^-A .* -[jg] $prefix" <<<"$saved" | grep -v -- "^-A $prefix" | sed 's/^-A/-D/' || true
    printf -- '-F %s\n' "${chains[@]}"
    printf -- '-X %s\n' "${chains[@]}"
    echo COMMIT
  } | iptables-restore --noflush || log "could not remove the $prefix* chains of table $table"
}
# kube-proxy removes its own rules (iptables, and nftables or IPVS if a mode left any).
if command -v kube-proxy >/dev/null; then
  mkdir -p "$LOGS"
  kube-proxy --cleanup >>"$LOGS/kube-proxy-cleanup.log" 2>&1 \
    || log "kube-proxy --cleanup reported errors (see $LOGS/kube-proxy-cleanup.log)"
fi
# kube-router removes its chains and ipsets.
if command -v kube-router >/dev/null; then
  kube-router --cleanup-config >>"$LOGS/kube-router-cleanup.log" 2>&1 \
    || log "kube-router --cleanup-config reported errors (see $LOGS/kube-router-cleanup.log)"
fi
# What has no cleanup command: the kubelet's chains (KUBE-FIREWALL, canaries)
# and the CNI plugins' (pods were killed without a CNI DEL).
for table in filter nat mangle; do
  remove_chains "$table" KUBE-
  remove_chains "$table" CNI-
done
# The kubelet's pod cgroups.
for ctl in /sys/fs/cgroup/*/kubepods; do
  if [[ -d "$ctl" ]]; then find "$ctl" -depth -type d -exec rmdir {} \; 2>/dev/null || true; fi
done

if [[ "${1:-}" == --purge ]]; then
  rm -rf "$HELMR_CLUSTER_DIR"
  log "cluster removed"
else
  log "cluster down (state kept in $HELMR_CLUSTER_DIR; --purge removes it)"
fi
