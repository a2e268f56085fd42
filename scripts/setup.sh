#!/usr/bin/env bash
# Installs what building and testing sandlet needs on Debian bookworm (or a Debian-like system).
# Idempotent: when everything is present it only asks dpkg and touches no network.
set -euo pipefail

die() { echo "setup.sh: $*" >&2; exit 1; }

if [[ $(id -u) -ne 0 ]]; then
  die "must run as root (installs Debian packages and the runtime needs root); try: sudo $0"
fi
if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  die "this does not look like a Debian-like system (no dpkg-query/apt-get); install the packages listed in $0 by hand"
fi
if [[ -r /etc/os-release ]]; then
  # shellcheck disable=SC1091
  . /etc/os-release
  case " ${ID:-} ${ID_LIKE:-} " in
    *" debian "*|*" ubuntu "*) ;;
    *) die "unsupported distribution '${ID:-unknown}' (need Debian bookworm or a Debian-like system)" ;;
  esac
fi

# Boost.JSON needs Boost >= 1.75: bookworm's default libboost-dev is 1.74, hence the 1.81 packages.
packages=(
  build-essential pkg-config
  libboost1.81-dev libboost-json1.81-dev
  libseccomp-dev liburing-dev libfmt-dev catch2
  libssl-dev zlib1g-dev libzstd-dev zstd
  busybox-static bubblewrap uidmap erofs-utils
  hyperfine python3 python3-dev python3-venv
  # The blob store tests' HTTP(S) server (PUT through its WebDAV module; TLS with a self-signed certificate).
  nginx-light openssl
  # The VM tests boot Debian kernels in throw-away VMs (software emulation): pure cgroup v2, 6.1, 6.12.
  qemu-system-x86 e2fsprogs xz-utils
  # The agent channel's fuzz targets (test/fuzz): clang and its libFuzzer runtime (libclang_rt.fuzzer),
  # which is a package of its own.
  clang-14 libclang-rt-14-dev
  # The network tests make their fake internet's namespaces and links with ip and enter them with nsenter
  # (util-linux, which Debian always has).
  iproute2
  # sandlet-bench cold-start (issue 17) serves its store on loopback with nginx (DAV for pushes over HTTP).
  nginx-light
  # A rebuild on the same machine (CI runs every session on a clean checkout) reuses earlier compiles.
  ccache
  # Image pulls and package-installing builds (issue 35, test/support/registry_world.py and
  # mirror_world.py): a real OCI registry (distribution 2.8) filled with skopeo, htpasswd -B for its basic
  # auth, apt-ftparchive for the test APT mirror (.debs from dpkg-deb, dpkg-dev) served by nginx-light,
  # curl as a client inside the test namespaces; the test CA and token signing use Python's cryptography and
  # zstd layers zstandard (Debian's, seen by .venv through --system-site-packages when it is built on them).
  docker-registry skopeo apache2-utils apt-utils dpkg-dev curl python3-cryptography python3-zstandard
)
# Any cmake / cargo on PATH will do (a newer one from pip or rustup, for instance); install Debian's only
# if none exists. cargo builds the Rust example over the C ABI (examples/rust).
if ! command -v cmake >/dev/null 2>&1; then
  packages+=(cmake)
fi
if ! command -v cargo >/dev/null 2>&1; then
  packages+=(cargo)
fi

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [[ $status == installed ]] || missing+=("$pkg")
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup.sh: all ${#packages[@]} packages present"
else
  echo "setup.sh: installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Python: a virtual environment for the binding's build, tests, examples and plots (PEP 668 forbids pip
# into Debian's own python3). --system-site-packages lets it reuse what the interpreter already has.
here=$(cd "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
venv=${SANDLET_VENV:-$here/.venv}
requirements=$here/bindings/python/requirements-dev.txt
python=${SANDLET_PYTHON:-python3}
if [[ ! -x $venv/bin/python ]]; then
  echo "setup.sh: creating the Python environment $venv"
  "$python" -m venv --system-site-packages "$venv" || die "cannot create a venv with $python (install python3-venv)"
fi
stamp=$venv/.sandlet-requirements
if [[ ! -f $stamp ]] || ! cmp -s "$stamp" "$requirements"; then
  echo "setup.sh: installing Python packages into $venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements" \
    || die "pip install -r $requirements failed"
  cp "$requirements" "$stamp"
fi
# Harbor (Terminal-Bench's harness) needs Python >= 3.12, newer than Debian 12's: its own environment with
# the first such interpreter the machine has (pyenv's here; SANDLET_HARBOR_PYTHON to choose). The build
# then makes the sandlet extension for it too. Without one, the Harbor tests SKIP and say why.
harbor_venv=${SANDLET_HARBOR_VENV:-$here/.venv-harbor}
harbor_requirements=$here/bindings/python/requirements-harbor.txt
harbor_python=${SANDLET_HARBOR_PYTHON:-}
if [[ -z $harbor_python ]]; then
  for candidate in python3.13 python3.12 /root/.pyenv/versions/3.12*/bin/python3 /root/.pyenv/versions/3.13*/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      harbor_python=$(command -v "$candidate"); break
    fi
  done
fi
if [[ -n $harbor_python ]]; then
  if [[ ! -x $harbor_venv/bin/python ]]; then
    echo "setup.sh: creating Harbor's Python environment $harbor_venv with $harbor_python"
    "$harbor_python" -m venv "$harbor_venv" || die "cannot create a venv with $harbor_python"
  fi
  stamp=$harbor_venv/.sandlet-requirements
  if [[ ! -f $stamp ]] || ! cmp -s "$stamp" "$harbor_requirements"; then
    echo "setup.sh: installing Harbor into $harbor_venv"
    "$harbor_venv/bin/python" -m pip install -q --disable-pip-version-check -r "$harbor_requirements" \
      || die "pip install -r $harbor_requirements failed"
    cp "$harbor_requirements" "$stamp"
  fi
else
  echo "setup.sh: no Python >= 3.12 on this machine: Harbor is not installed and its tests will be skipped" >&2
fi

# The VM tests' kernels (Debian's 6.1 and 6.12, and the newest): unpacked into a cache, never installed.
# Without one, the tests that boot it SKIP (saying why) rather than every test failing with the set-up.
"$here/scripts/fetch-vm-kernel.sh" ||
  echo "setup.sh: warning: not every kernel for the VM tests could be fetched; those tests will be skipped" >&2

# The microvm backend's guest kernel kit (docs/backends/microvm.md): Debian bookworm's stock 6.1 kernel
# (the fastest of the three to boot under TCG), unpacked above, made into vmlinux + the modules its init
# loads; the backend uses .../microvm-kernel/default. Without it the backend reports itself unavailable.
kit_root=${SANDLET_MICROVM_KERNEL_ROOT:-/var/cache/sandlet/microvm-kernel}
vm_kernels=${SANDLET_VM_KERNEL_DIR:-/var/cache/sandlet/vm-kernel}
if [[ -e $vm_kernels/bookworm/.complete ]]; then
  "$here/scripts/microvm/make-kernel-kit.sh" "$vm_kernels/bookworm" "$kit_root/bookworm" &&
    ln -sfn bookworm "$kit_root/default" ||
    echo "setup.sh: warning: the microVM kernel kit could not be made; the microvm backend will be unavailable" >&2
else
  echo "setup.sh: warning: no bookworm kernel in $vm_kernels: the microvm backend will be unavailable" >&2
fi

echo "setup.sh: done"
