#!/usr/bin/env bash
# The demo, on the local cluster: installs Helmr with its Helm chart (the
# control plane runs in the cluster, as in production), declares the echo
# actor and the workbench agent, and drives a session of each from outside
# with the Python client, authenticated by a Kubernetes service-account token
# scoped to one namespace: the echo's three FIFO turns, then the workbench's
# files written in turn 1 and read back in turn 3 after its runner pod was
# deleted (execution loss; the disk restored from its last save).
# shellcheck source=lib/cluster.sh
source "$(dirname "$0")/lib/cluster.sh"

KUBECONFIG="$("$HACK_DIR/cluster-up.sh")"
export KUBECONFIG
DEMO_NS=helmr-demo

RUNNER_IMAGE="$("$HACK_DIR/build-images.sh" --name runner)"
log "declaring the echo actor and the workbench agent in namespace $DEMO_NS"
kubectl apply --server-side -f "$REPO_DIR/crds" >/dev/null
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Namespace
metadata:
  name: helmr-system
  labels: {pod-security.kubernetes.io/enforce: restricted}
---
apiVersion: v1
kind: Namespace
metadata:
  name: $DEMO_NS
  labels: {pod-security.kubernetes.io/enforce: restricted}
---
apiVersion: helmr.dev/v1alpha1
kind: Actor
metadata: {name: echo, namespace: $DEMO_NS}
spec:
  image: $RUNNER_IMAGE
  imagePullPolicy: Never
  entrypoint: echo.echo:echo
  maxTurnDurationSeconds: 60
  idleTimeoutSeconds: 60
---
apiVersion: helmr.dev/v1alpha1
kind: Actor
metadata: {name: workbench, namespace: $DEMO_NS}
spec:
  image: $RUNNER_IMAGE
  imagePullPolicy: Never
  entrypoint: workbench.agent:workbench
  maxTurnDurationSeconds: 300
  idleTimeoutSeconds: 120
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: demo-client, namespace: $DEMO_NS}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: helmr-sessions, namespace: $DEMO_NS}
rules:
- apiGroups: [helmr.dev]
  resources: [sessions]
  verbs: [get, create, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: demo-client-sessions, namespace: $DEMO_NS}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: helmr-sessions}
subjects: [{kind: ServiceAccount, name: demo-client, namespace: $DEMO_NS}]
YAML

# The release watches only the demo namespace (namespaced RBAC), so it never
# competes with an operator that tests start for their own namespaces. Its
# timeline is on a PVC of the local cluster's default StorageClass
# (helmr-hostpath): it outlives the control plane's pod, as in production.
log "installing the chart (control plane image helmr.local/operator:dev)"
helm upgrade --install helmr "$REPO_DIR/charts/helmr" -n helmr-system \
  --set image.pullPolicy=Never \
  --set "watchNamespaces={$DEMO_NS}" --wait --timeout 3m >/dev/null
# A new image under the same tag needs a new pod.
kubectl -n helmr-system rollout restart deployment/helmr >/dev/null
kubectl -n helmr-system rollout status deployment/helmr --timeout=180s >&2

# Each demo starts from no sessions (deleting a Session cancels it).
kubectl -n "$DEMO_NS" delete turns.helmr.dev,sessions.helmr.dev --all --wait=false >/dev/null

HELMR_URL="http://$(kubectl -n helmr-system get service helmr -o jsonpath='{.spec.clusterIP}'):8080"
HELMR_TOKEN="$(kubectl -n "$DEMO_NS" create token demo-client --duration 1h)"
export HELMR_URL HELMR_TOKEN
log "driving a session through $HELMR_URL"
"$REPO_DIR/.venv/bin/python" "$REPO_DIR/examples/echo/demo.py" "$DEMO_NS"
echo
log "the workbench agent: its files outlive its runner pod"
"$REPO_DIR/.venv/bin/python" "$REPO_DIR/examples/workbench/demo.py" "$DEMO_NS"
echo
kubectl -n "$DEMO_NS" get sessions.helmr.dev,turns.helmr.dev,pods
