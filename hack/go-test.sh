#!/usr/bin/env bash
# Runs the tests of this repository's own Go code: the hostpath CSI driver's
# (hack/go/addons/csi-hostpath) copy-on-write cuts, on the btrfs filesystem the
# local cluster's driver serves (lib/cluster.sh mounts it; as root). A test that
# skips fails the run: here, a skip could only hide that filesystem missing.
# shellcheck source=lib/cluster.sh
source "$(dirname "$0")/lib/cluster.sh"

mount_csi_data
out="$(cd "$HACK_DIR/go/addons" && HELMR_BTRFS_DIR="$CSI_DATA_DIR" CGO_ENABLED=0 \
  go test -trimpath -count=1 -v ./csi-hostpath 2>&1)" || { echo "$out"; die "go test failed"; }
echo "$out"
if grep -q -- '--- SKIP' <<<"$out"; then die "a Go test skipped"; fi
