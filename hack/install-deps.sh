#!/usr/bin/env bash
# Makes sure this machine has what the build, the images and the local
# cluster run: the Debian packages below and Go. As root it installs the
# missing packages (apt-get); otherwise it names what is missing and the one
# command that installs it, and fails within seconds, so nothing later waits
# on a program that is not there. Go is checked, not installed: Debian's is
# older than the pinned modules need.
#
# A stamp keyed by the package list records that the list was installed, so
# a second run only probes each package's program (milliseconds); a removed
# package fails its probe and is installed again.
#
#   hack/install-deps.sh          (used by `make demo`, `make test`, cluster-up and .ci/run)
# shellcheck source=lib/common.sh
source "$(dirname "$0")/lib/common.sh"

# Each package the hack/ scripts and the Makefile call into.
PACKAGES=(
  containerd runc containernetworking-plugins iptables iproute2 conntrack ipset
  debootstrap openssl curl ca-certificates git make python3-venv python3-pip shellcheck
  postgresql btrfs-progs
)

# probe PACKAGE: succeeds when what the scripts use from PACKAGE is there.
probe() {
  case "$1" in
    # The plugins the cluster's CNI config names, and loopback, which containerd runs in every pod.
    containernetworking-plugins)
      local plugin
      for plugin in bridge host-local portmap loopback; do [[ -x "$CNI_BIN_DIR/$plugin" ]] || return 1; done ;;
    ca-certificates) [[ -f /etc/ssl/certs/ca-certificates.crt ]] ;;
    iproute2) command -v ip >/dev/null ;;
    containerd) command -v containerd >/dev/null && command -v ctr >/dev/null ;;
    iptables) command -v iptables >/dev/null && command -v iptables-save >/dev/null ;;
    # `make venv` runs `python3 -m venv`, which needs ensurepip (python3-venv on Debian).
    python3-venv) python3 -c 'import ensurepip, venv' 2>/dev/null ;;
    # hack/build-images.sh installs wheels into the images with the host's pip.
    python3-pip) python3 -c 'import pip' 2>/dev/null ;;
    # The tests' throwaway servers (tests/postgres.py); Debian keeps the programs off PATH.
    postgresql) compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null ;;
    # The CSI driver's data directory is a btrfs made in a loop file (lib/cluster.sh).
    btrfs-progs) command -v mkfs.btrfs >/dev/null ;;
    *) command -v "$1" >/dev/null ;;
  esac
}

# what_is PACKAGE: the program or file PACKAGE's probe looks for, for messages.
what_is() {
  case "$1" in
    containernetworking-plugins) echo "CNI plugins in $CNI_BIN_DIR" ;;
    ca-certificates) echo "/etc/ssl/certs/ca-certificates.crt" ;;
    iproute2) echo "ip" ;;
    containerd) echo "containerd, ctr" ;;
    iptables) echo "iptables, iptables-save" ;;
    python3-venv) echo "python3 -m venv" ;;
    python3-pip) echo "python3 -m pip" ;;
    postgresql) echo "/usr/lib/postgresql/*/bin/initdb" ;;
    btrfs-progs) echo "mkfs.btrfs" ;;
    *) echo "$1" ;;
  esac
}

missing_packages() {
  local p
  for p in "${PACKAGES[@]}"; do probe "$p" || echo "$p"; done
}

# The newest `go` directive of the pinned modules is the oldest Go that builds
# them all (GOTOOLCHAIN=local: no toolchain is downloaded).
check_go() {
  local need have
  need="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$HACK_DIR"/go/*/go.mod | sort -V | tail -1)"
  if ! command -v go >/dev/null; then
    local hint=""
    [[ -x /usr/local/go/bin/go ]] && hint=" (/usr/local/go/bin/go exists: put /usr/local/go/bin on PATH)"
    die "Go >= $need is not on PATH$hint; install it with:
  curl -fsSL https://go.dev/dl/go$need.linux-$(dpkg --print-architecture).tar.gz | tar -C /usr/local -xz && export PATH=/usr/local/go/bin:\$PATH"
  fi
  have="$(go env GOVERSION)"; have="${have#go}"
  [[ "$(printf '%s\n' "$need" "$have" | sort -V | head -1)" == "$need" ]] \
    || die "Go $have is older than $need (the newest 'go' line in hack/go/*/go.mod); install Go >= $need from https://go.dev/dl"
}

stamp="$HELMR_CACHE/deps/apt-$(key_of <(printf '%s\n' "${PACKAGES[@]}"))"
mapfile -t missing < <(missing_packages)

if [[ ${#missing[@]} -gt 0 || ! -f "$stamp" ]]; then
  if [[ $EUID -ne 0 ]]; then
    if [[ ${#missing[@]} -gt 0 ]]; then
      for p in "${missing[@]}"; do log "missing: $(what_is "$p") (Debian package $p)"; done
      die "install them with: sudo $HACK_DIR/install-deps.sh"
    fi
  else
    command -v apt-get >/dev/null \
      || die "no apt-get: install the equivalents of these Debian packages by hand: ${PACKAGES[*]}"
    log "installing Debian packages: ${PACKAGES[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # Lock timeout: another apt run (unattended upgrades) may hold the lock briefly.
    apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=120 "${PACKAGES[@]}" >/dev/null
    mapfile -t missing < <(missing_packages)
    [[ ${#missing[@]} -eq 0 ]] || die "still missing after apt-get install: ${missing[*]}"
    mkdir -p "$(dirname "$stamp")"
    touch "$stamp"
    log "Debian packages installed"
  fi
fi
check_go
