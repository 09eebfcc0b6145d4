#!/usr/bin/env bash
# Says what of the local cluster runs: each daemon's PID, the node, the pods,
# the storage classes and the CSI drivers registered on the node.
# shellcheck source=lib/cluster.sh
source "$(dirname "$0")/lib/cluster.sh"

running=0
for name in "${DAEMONS[@]}"; do
  if pid=$(pid_of "$name"); then
    printf '%-24s running (pid %s)\n' "$name" "$pid"; running=$((running + 1))
  else
    printf '%-24s stopped\n' "$name"
  fi
done
if ((running > 0)) && kubectl_admin get --raw /readyz >/dev/null 2>&1; then
  echo "kubeconfig: $KUBECONFIG_ADMIN"
  kubectl_admin get nodes -o wide
  kubectl_admin get pods -A -o wide
  echo "storage (hack/storage.sh):"
  kubectl_admin get storageclass,volumesnapshotclass 2>&1 | sed 's/^/  /'
  kubectl_admin get csinode -o jsonpath='{range .items[*]}  CSI drivers on {.metadata.name}: {.spec.drivers[*].name}{"\n"}{end}'
fi
((running == ${#DAEMONS[@]}))
