# Shared by every hack/ script: pins, cache locations, logging.
# shellcheck shell=bash
# Its variables are read by the scripts that source it, not here.
# shellcheck disable=SC2034
set -euo pipefail

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPO_DIR="$(cd "$HACK_DIR/.." && pwd)"
# shellcheck source=../versions.env
source "$HACK_DIR/versions.env"

# Everything built lives outside the work tree, keyed by pins, so a fresh
# checkout on a machine that has built before rebuilds nothing.
HELMR_CACHE="${HELMR_CACHE:-$HOME/.cache/helmr}"
export GOMODCACHE="${GOMODCACHE:-$HELMR_CACHE/go/mod}"
export GOCACHE="${GOCACHE:-$HELMR_CACHE/go/build}"
export GOTOOLCHAIN=local
export GOFLAGS="-buildvcs=false"

# Where the running cluster keeps its state, and where the kubeconfig lands.
HELMR_CLUSTER_DIR="${HELMR_CLUSTER_DIR:-/var/lib/helmr-cluster}"
HELMR_BIN="$HELMR_CACHE/bin"
# Where Debian's containernetworking-plugins installs the CNI plugins.
CNI_BIN_DIR=/usr/lib/cni

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# key_of FILE...: a short content hash of the given files, the cache key of a build.
key_of() { cat "$@" | sha256sum | cut -c1-16; }
