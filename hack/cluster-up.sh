#!/usr/bin/env bash
# Brings up a real single-node Kubernetes on this machine, from binaries
# built by hack/build.sh and images built by hack/build-images.sh: etcd,
# kube-apiserver (RBAC + Node authorization, PodSecurity), controller-manager,
# scheduler, containerd + runc through CRI, kubelet (cgroupfs), bridge CNI,
# kube-proxy (iptables), NetworkPolicy (hack/network-policy.sh: kube-router),
# CoreDNS and storage (hack/storage.sh: CSI hostpath
# driver, snapshot controller, default StorageClass and VolumeSnapshotClass).
# Idempotent: what runs is left alone.
# Waits until the node is Ready and the default service account exists, then
# prints the admin kubeconfig's path as its last line.
# shellcheck source=lib/cluster.sh
source "$(dirname "$0")/lib/cluster.sh"

[[ $EUID -eq 0 ]] || die "the cluster needs root (kubelet, containerd, iptables)"
NODE_IP="$(node_ip)"
[[ -n "$NODE_IP" ]] || die "no node IP: no default route"

# Before the long build: stop now if a program the cluster runs is missing.
"$HACK_DIR/install-deps.sh" >&2
"$HACK_DIR/build.sh" >&2
mkdir -p "$PKI" "$RUN" "$LOGS" "$CONF"
exec 8>"$HELMR_CLUSTER_DIR/.lock"
flock 8

# --- PKI: one CA; a cert per component identity, so RBAC and the Node
# authorizer see who is calling (least privilege, as in a real cluster).
cert() { # cert NAME CN [O] [SANS]
  local name="$1" cn="$2" org="${3:-}" sans="${4:-}" subj="/CN=$2"
  [[ -f "$PKI/$name.crt" ]] && return 0
  [[ -n "$org" ]] && subj="/O=$org/CN=$cn"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI/$name.key" -subj "$subj" \
    -out "$PKI/$name.csr" 2>/dev/null
  local ext="$PKI/$name.ext"
  echo "basicConstraints=CA:FALSE" >"$ext"
  echo "keyUsage=critical,digitalSignature,keyEncipherment" >>"$ext"
  echo "extendedKeyUsage=serverAuth,clientAuth" >>"$ext"
  [[ -n "$sans" ]] && echo "subjectAltName=$sans" >>"$ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
    -CAcreateserial -days 3650 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$ext"
}

kubeconfig() { # kubeconfig NAME: a kubeconfig for the cert NAME
  local file="$CONF/$1.kubeconfig"
  [[ "$1" == admin ]] && file="$KUBECONFIG_ADMIN"
  [[ -f "$file" ]] && return 0
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: helmr
  cluster:
    certificate-authority: $PKI/ca.crt
    server: https://127.0.0.1:$APISERVER_PORT
users:
- name: $1
  user:
    client-certificate: $PKI/$1.crt
    client-key: $PKI/$1.key
contexts:
- name: helmr
  context: {cluster: helmr, user: $1}
current-context: helmr
EOF
}

if [[ ! -f "$PKI/ca.crt" ]]; then
  openssl req -x509 -new -newkey rsa:2048 -nodes -days 3650 -subj "/CN=helmr-local-ca" \
    -keyout "$PKI/ca.key" -out "$PKI/ca.crt" 2>/dev/null
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
fi
cert apiserver kube-apiserver "" \
  "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:$KUBERNETES_SERVICE_IP,IP:$NODE_IP"
cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
cert admin helmr-admin system:masters
cert controller-manager system:kube-controller-manager
cert scheduler system:kube-scheduler
cert kube-proxy system:kube-proxy
cert kube-router system:kube-router
cert kubelet "system:node:$NODE_NAME" system:nodes "DNS:$NODE_NAME,IP:$NODE_IP,IP:127.0.0.1"
for k in admin controller-manager scheduler kube-proxy kube-router kubelet; do kubeconfig "$k"; done

# --- etcd and the control plane
# --unsafe-no-fsync: disposable test state; an fsync per write makes every API call wait on the disk.
# --quota-backend-bytes 4 GiB (default 2): nothing defragments, so the file grows across test runs.
start_daemon etcd etcd --name helmr --data-dir "$HELMR_CLUSTER_DIR/etcd" \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster helmr=http://127.0.0.1:2380 --unsafe-no-fsync=true --quota-backend-bytes 4294967296 \
  --listen-metrics-urls http://127.0.0.1:2381
wait_for 60 etcd curl -fsS http://127.0.0.1:2381/health

# --api-audiences ...,helmr: also accept tokens minted for the audience "helmr" (Helmr API clients).
# --allow-privileged: a CSI node plugin's Bidirectional mounts need it; workload namespaces enforce restricted.
# --kubelet-preferred-address-types InternalIP first: the node's name (helmr-node) resolves nowhere.
start_daemon kube-apiserver kube-apiserver --etcd-servers http://127.0.0.1:2379 \
  --bind-address 0.0.0.0 --secure-port "$APISERVER_PORT" --advertise-address "$NODE_IP" \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction,PodSecurity \
  --client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
  --kubelet-client-key "$PKI/apiserver-kubelet-client.key" --kubelet-certificate-authority "$PKI/ca.crt" \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --api-audiences https://kubernetes.default.svc.cluster.local,helmr \
  --service-cluster-ip-range "$SERVICE_CIDR" --allow-privileged=true --anonymous-auth=false \
  --kubelet-preferred-address-types InternalIP,Hostname --profiling=false --event-ttl 1h
wait_for 120 kube-apiserver kubectl_admin get --raw /readyz

# --allocate-node-cidrs=false: the one node's pod range is fixed in the CNI config (host-local IPAM).
# --leader-elect=false (here and in the scheduler): a single instance, no lease renewals to pay for.
# --kube-api-qps/burst 200/400 (default 20/30, per controller): this is a test
# cluster, and its PV binder writes about five times per claim (the claim's
# provisioner annotation, the volume's and the claim's status, the claim's
# volumeName, Events), so 20 a second bound about 4 claims a second while
# benchmarks open thousands (hack/pvc-bind-rate.sh measures it).
start_daemon kube-controller-manager kube-controller-manager \
  --kubeconfig "$CONF/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$CONF/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$CONF/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --use-service-account-credentials \
  --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
  --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
  --service-cluster-ip-range "$SERVICE_CIDR" --allocate-node-cidrs=false --leader-elect=false \
  --kube-api-qps 200 --kube-api-burst 400
start_daemon kube-scheduler kube-scheduler --kubeconfig "$CONF/scheduler.kubeconfig" \
  --authentication-kubeconfig "$CONF/scheduler.kubeconfig" \
  --authorization-kubeconfig "$CONF/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false

# --- the node: sysctls, CNI, containerd, images, kubelet, kube-proxy
sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 net.bridge.bridge-nf-call-ip6tables=1
# Traffic stays on this machine, whatever the NetworkPolicies say: pods reach
# nothing beyond it and no link-local (cloud metadata) address. In the mangle
# table's FORWARD, which every forwarded packet crosses before the filter
# table where kube-proxy and the policy engine put (and reorder) their rules;
# once each (-C asks whether it is there).
host_interface="$(ip -4 -o route get 1.1.1.1 | sed -n 's/.* dev \([^ ]*\).*/\1/p')"
for rule in "-s $POD_CIDR -o $host_interface -j DROP" "-d 169.254.0.0/16 -j DROP"; do
  # shellcheck disable=SC2086 # a rule is words
  iptables -t mangle -C FORWARD $rule 2>/dev/null || iptables -t mangle -I FORWARD 1 $rule
done
mkdir -p "$HELMR_CLUSTER_DIR/cni/net.d" "$HELMR_CLUSTER_DIR/containerd"
write_config "$HELMR_CLUSTER_DIR/cni/net.d/10-helmr.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "helmr",
  "plugins": [
    {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]],
              "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$HELMR_CLUSTER_DIR/cni/ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
# The sandbox image is built here (no registry); hack/build-images.sh names it.
PAUSE_IMAGE="$("$HACK_DIR/build-images.sh" --name pause)"
# A second runtime handler, helmr-sandbox, for the RuntimeClass of the same name
# registered below: where a gVisor (runsc) or Kata handler sits on a real node.
# Its runtime is runc again, through a binary of its own, so containerd's record
# of a container (`ctr containers info`) shows which handler ran it.
SANDBOX_RUNTIME="$HELMR_CLUSTER_DIR/bin/helmr-sandbox-runc"
mkdir -p "$(dirname "$SANDBOX_RUNTIME")"
write_config "$SANDBOX_RUNTIME" <<EOF
#!/bin/sh
exec $(command -v runc) "\$@"
EOF
chmod 755 "$SANDBOX_RUNTIME"
containerd_config="$(cat "$CONF/containerd.toml" 2>/dev/null || true)"
write_config "$CONF/containerd.toml" <<EOF
version = 2
root = "$HELMR_CLUSTER_DIR/containerd/root"
state = "$HELMR_CLUSTER_DIR/containerd/state"
oom_score = 0
[grpc]
  address = "$CONTAINERD_SOCK"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # The sandbox asks for oom_score_adj -998; without CAP_SYS_RESOURCE that
  # fails unless containerd clamps it to its own score.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.helmr-sandbox]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.helmr-sandbox.options]
        SystemdCgroup = false
        BinaryName = "$SANDBOX_RUNTIME"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$HELMR_CLUSTER_DIR/cni/net.d"
EOF
# containerd reads its configuration at start: restart it on a change (the
# pods' containers run on, each under its own shim).
if [[ "$(cat "$CONF/containerd.toml")" != "$containerd_config" ]] && pid_of containerd >/dev/null; then
  log "containerd's configuration changed: restarting it"
  stop_daemons containerd
fi
start_daemon containerd containerd --config "$CONF/containerd.toml"
wait_for 60 containerd ctr_k8s version
"$HACK_DIR/build-images.sh" --import >&2

# failSwapOn: false: a developer's machine may have swap; the node's pods are small.
# evictionHard nodefs/imagefs 2%: a small VM disk would otherwise evict pods under test.
# imageGC 95/90 %: images are built here and can never be pulled again, so GC them late.
write_config "$CONF/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $PKI/kubelet.crt
tlsPrivateKeyFile: $PKI/kubelet.key
clusterDomain: cluster.local
clusterDNS: [$DNS_SERVICE_IP]
resolvConf: /etc/resolv.conf
failSwapOn: false
# No CAP_SYS_RESOURCE here: a negative score cannot be set.
oomScoreAdj: 0
serializeImagePulls: false
evictionHard: {memory.available: "200Mi", nodefs.available: "2%", imagefs.available: "2%"}
imageGCHighThresholdPercent: 95
imageGCLowThresholdPercent: 90
EOF
# The CSI node plugin mounts volumes into the kubelet's directory from its own
# mount namespace (Bidirectional propagation), which needs that directory to
# be a shared mount; / is private here. A recursive bind of the directory onto
# itself, made shared, leaves the rest of the host alone (cluster-down's
# unmount of everything under the cluster directory removes it).
KUBELET_DIR="$HELMR_CLUSTER_DIR/kubelet"
mkdir -p "$KUBELET_DIR"
if ! awk -v dir="$KUBELET_DIR" '$5 == dir && / shared:/ {found=1} END {exit !found}' /proc/self/mountinfo; then
  mount --rbind "$KUBELET_DIR" "$KUBELET_DIR"
  mount --make-rshared "$KUBELET_DIR"
fi
mount_csi_data
# A Ready condition older than this kubelet may be a stale one from before a
# restart (the node keeps it until its lease expires): wait for a fresh one.
KUBELET_SINCE="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
pid_of kubelet >/dev/null && KUBELET_SINCE="1970-01-01T00:00:00Z"
start_daemon kubelet kubelet --config "$CONF/kubelet.yaml" --kubeconfig "$CONF/kubelet.kubeconfig" \
  --root-dir "$KUBELET_DIR" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP"

# nodePortAddresses [primary]: NodePorts on the node's own address only, not the pod bridge.
write_config "$CONF/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $CONF/kube-proxy.kubeconfig}
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE_NAME
# Leave the host's conntrack table size alone (a VM may refuse the sysctl).
conntrack: {maxPerCore: 0}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
nodePortAddresses: [primary]
EOF
start_daemon kube-proxy kube-proxy --config "$CONF/kube-proxy.yaml"

wait_for 120 "node $NODE_NAME to register" kubectl_admin get node "$NODE_NAME"
node_ready_since() {
  local ready
  ready="$(kubectl_admin get node "$NODE_NAME" -o \
    jsonpath='{range .status.conditions[?(@.type=="Ready")]}{.status} {.lastHeartbeatTime}{end}')"
  # ISO-8601 UTC timestamps compare as strings.
  [[ "${ready%% *}" == True && ! "${ready#* }" < "$KUBELET_SINCE" ]]
}
wait_for 120 "node $NODE_NAME to be Ready" node_ready_since
log "node $NODE_NAME is Ready"
wait_for 60 "the default service account" kubectl_admin get serviceaccount default -n default
kubectl_admin apply --server-side -f - >/dev/null <<EOF
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: helmr-sandbox}
handler: helmr-sandbox
EOF
"$HACK_DIR/network-policy.sh" >&2
"$HACK_DIR/coredns.sh" >&2
"$HACK_DIR/storage.sh" >&2
log "cluster up: node $NODE_NAME ($NODE_IP), kubeconfig below"
echo "$KUBECONFIG_ADMIN"
