# The local single-node cluster's layout and process handling, shared by
# cluster-up, cluster-down and cluster-status.
# shellcheck shell=bash
# Its variables are read by the scripts that source it, not here.
# shellcheck disable=SC2034
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

NODE_NAME="${HELMR_NODE_NAME:-helmr-node}"
SERVICE_CIDR="10.96.0.0/16"
KUBERNETES_SERVICE_IP="10.96.0.1"
DNS_SERVICE_IP="10.96.0.10"
POD_CIDR="10.244.0.0/24"
BRIDGE="helmr0"
APISERVER_PORT=6443
KUBE_ROUTER_HEALTH_PORT=20244

PKI="$HELMR_CLUSTER_DIR/pki"
RUN="$HELMR_CLUSTER_DIR/run"
LOGS="$HELMR_CLUSTER_DIR/logs"
CONF="$HELMR_CLUSTER_DIR/conf"
KUBECONFIG_ADMIN="$HELMR_CLUSTER_DIR/kubeconfig"
CONTAINERD_SOCK="$HELMR_CLUSTER_DIR/containerd/containerd.sock"
# What cluster-up starts (in this order) and cluster-status reports.
DAEMONS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy kube-router)

export PATH="$HELMR_BIN/current:$PATH"

node_ip() { ip -4 -o route get 1.1.1.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p'; }

# pid_of NAME: the PID of a daemon this cluster started, if it still runs.
pid_of() {
  local f="$RUN/$1.pid" pid
  [[ -f "$f" ]] || return 1
  pid=$(<"$f")
  [[ -d "/proc/$pid" ]] && grep -qa -- "$1" "/proc/$pid/cmdline" && echo "$pid"
}

# start_daemon NAME CMD...: starts CMD in its own session unless it runs already.
start_daemon() {
  local name="$1"; shift
  if pid_of "$name" >/dev/null; then return 0; fi
  command -v "$1" >/dev/null || die "$1 is not installed: run $HACK_DIR/install-deps.sh as root"
  mkdir -p "$RUN" "$LOGS"
  # 3>&- ... 9>&-: the daemon must not inherit a lock its caller holds (cluster-up's
  # on 8; `flock /tmp/helmr-cluster.lock CMD` gives CMD the lock on 3), or everyone
  # waiting for that lock waits as long as the daemon lives.
  setsid "$@" >>"$LOGS/$name.log" 2>&1 < /dev/null 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
  echo $! >"$RUN/$name.pid"
  log "started $name (pid $!)"
}

# stop_daemons NAME...: SIGTERM to each together, SIGKILL to any still there
# after 10 s; only the PIDs cluster-up recorded.
stop_daemons() {
  local name pid pids=()
  for name in "$@"; do
    if pid=$(pid_of "$name"); then
      kill "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  for _ in $(seq 100); do
    for pid in "${pids[@]}"; do [[ -d "/proc/$pid" ]] && break; pid=""; done
    [[ -z "${pid:-}" ]] && break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do [[ -d "/proc/$pid" ]] && kill -9 "$pid" 2>/dev/null; done
  for name in "$@"; do rm -f "$RUN/$name.pid"; done
  log "stopped $*"
}

# wait_for SECONDS WHAT CMD...: polls CMD until it succeeds; a command that
# is not installed (status 127) fails at once instead of after SECONDS.
wait_for() {
  local limit="$1" what="$2"; shift 2
  local deadline=$((SECONDS + limit)) status
  until status=0; "$@" >/dev/null 2>&1 || status=$?; ((status == 0)); do
    ((status != 127)) || die "waiting for $what: '$*' is not installed: run $HACK_DIR/install-deps.sh as root"
    ((SECONDS < deadline)) || die "timed out after ${limit}s waiting for $what (logs: $LOGS)"
    sleep 0.5
  done
}

# write_config PATH: stdin into PATH, only when the content differs (kube-proxy
# exits when its config file changes, even to the same bytes).
write_config() {
  local tmp; tmp="$(mktemp)"
  cat >"$tmp"
  if cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv "$tmp" "$1"; fi
}

kubectl_admin() { kubectl --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }
ctr_k8s() { ctr --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"; }

# The CSI driver's data directory (hack/storage.sh): a btrfs filesystem in a
# sparse loop file, so the driver keeps volumes as subvolumes and cuts a
# snapshot in constant time, as real storage does, where copies of a
# directory took seconds per GB. Mounted before the kubelet starts (a driver
# pod it restarts must find the filesystem, not the directory under it);
# cluster-down unmounts it with the rest, --purge removes the file.
CSI_DATA_DIR="$HELMR_CLUSTER_DIR/csi-btrfs"
CSI_DATA_IMAGE="$HELMR_CLUSTER_DIR/csi-btrfs.img"
CSI_DATA_SIZE=64G
mount_csi_data() {
  mountpoint -q "$CSI_DATA_DIR" && return 0
  mkdir -p "$CSI_DATA_DIR"
  if [[ ! -f "$CSI_DATA_IMAGE" ]]; then
    truncate -s "$CSI_DATA_SIZE" "$CSI_DATA_IMAGE.tmp"
    mkfs.btrfs -q "$CSI_DATA_IMAGE.tmp" >&2
    mv "$CSI_DATA_IMAGE.tmp" "$CSI_DATA_IMAGE"
  fi
  mount -o loop "$CSI_DATA_IMAGE" "$CSI_DATA_DIR"
}
