#!/usr/bin/env bash
# The demo: brings the local cluster up and runs a smoke pod that prints the
# node it ran on and the kernel it shares with the host.
source "$(dirname "$0")/lib/cluster.sh"

KUBECONFIG="$("$HACK_DIR/cluster-up.sh")"
export KUBECONFIG
python_image="$("$HACK_DIR/build-images.sh" --name python)"
kubectl delete pod helmr-smoke --ignore-not-found --wait=true >/dev/null
kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: helmr-smoke}
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  containers:
  - name: smoke
    image: $python_image
    imagePullPolicy: Never
    command: [python3, -c, "import os, platform; print('node', os.environ['NODE'], 'kernel', platform.release())"]
    env: [{name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]
    securityContext: {runAsNonRoot: true, runAsUser: 65532, allowPrivilegeEscalation: false,
                      capabilities: {drop: [ALL]}, seccompProfile: {type: RuntimeDefault}}
YAML
kubectl wait --for=jsonpath='{.status.phase}'=Succeeded pod/helmr-smoke --timeout=120s >/dev/null
kubectl logs helmr-smoke
kubectl delete pod helmr-smoke --wait=false >/dev/null
