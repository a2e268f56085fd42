#!/usr/bin/env bash
# Builds (once) and caches the image of `sandlet-bench cold-start` (issue 17): the Debian bookworm base of
# scripts/debian-base.sh (python3, git) plus a large tree of Python packages installed as wheels into the
# image's /usr/local/lib/python3.11/dist-packages (on Debian's python3.11 sys.path), and the workload
# bench/cold_start_workload.py as /opt/bench/workload.py. The root must come out at >= 1 GB (du -sb).
#
# Usage: bench/cold_start_image.sh [OUT_DIR] [--print-path]
#   OUT_DIR       where the image goes (default ${SANDLET_CACHE:-/var/cache/sandlet}/bench-images/cold-start)
#                 OUT_DIR/rootfs is the image's root; OUT_DIR/complete (written last) marks it finished;
#                 OUT_DIR/dist-packages keeps the installed package tree (reused by a rebuild of the root).
#   --print-path  print only the rootfs path on stdout
#
# Idempotent: with the stamp present nothing is done (no network). The stamp records the package list and
# the workload's checksum: changing either here rebuilds. The build runs in OUT_DIR/rootfs.tmp.* and is
# renamed into place after the workload ran in it (bwrap) and printed its checksum line.
#
# Environment: SANDLET_BENCH_PIP  the pip to install with (default /work/main/.venv/bin/pip, else pip3):
#                                 it must run CPython 3.11 on x86_64 (the wheels must match Debian's 3.11)
#              SANDLET_BENCH_WHEELS  a directory of the wheels (`pip download` of the same list): install
#                                 from it alone (--no-index), offline
set -euo pipefail

die() { echo "cold_start_image.sh: $*" >&2; exit 1; }
say() { echo "cold_start_image.sh: $*" >&2; }

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd -- "$here/.." && pwd)
out=
print_path=0
for arg in "$@"; do
  case $arg in
    --print-path) print_path=1 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) die "unknown option '$arg'" ;;
    *) [[ -z $out ]] || die "one OUT_DIR only"; out=$arg ;;
  esac
done
out=${out:-${SANDLET_CACHE:-/var/cache/sandlet}/bench-images/cold-start}
out=${out%/}
rootfs=$out/rootfs
stamp=$out/complete
workload=$here/cold_start_workload.py

# Wheels only (no builds from source), pinned so that every node builds the same image.
packages=(
  numpy==1.26.4 scipy==1.13.1 pandas==2.2.2 sympy==1.12.1 scikit-learn==1.5.0 matplotlib==3.9.0
  networkx==3.3 pillow==10.3.0 pyarrow==16.1.0 scikit-image==0.23.2 statsmodels==0.14.2
  numba==0.59.1 astropy==6.1.0 plotly==5.22.0 boto3==1.34.122 polars==0.20.31
  opencv-python-headless==4.10.0.82 bokeh==3.4.1 duckdb==1.0.0 pytest==8.2.2
)
min_bytes=$((1000 * 1000 * 1000))

want_stamp() {
  echo "packages=${packages[*]}"
  echo "workload_sha256=$(sha256sum "$workload" | cut -d' ' -f1)"
}

report() { if [[ $print_path -eq 1 ]]; then echo "$rootfs"; else echo "rootfs: $rootfs"; fi; }

if [[ -e $stamp && -d $rootfs ]] && diff -q <(want_stamp) <(grep -v '^\(bytes\|built\)=' "$stamp") >/dev/null; then
  [[ $print_path -eq 1 ]] || say "cached ($stamp)"
  report
  exit 0
fi

[[ $(id -u) -eq 0 ]] || die "must run as root (the base has root-owned files and device nodes)"
[[ -r $workload ]] || die "missing $workload"
pip=${SANDLET_BENCH_PIP:-}
if [[ -z $pip ]]; then
  if [[ -x /work/main/.venv/bin/pip ]]; then pip=/work/main/.venv/bin/pip; else pip=$(command -v pip3 || true); fi
fi
[[ -n $pip && -x $pip ]] || die "no pip (set SANDLET_BENCH_PIP)"
pyver=$("$(dirname -- "$pip")/python" -c 'import sys, platform; print("%d.%d-%s" % (sys.version_info[:2] + (platform.machine(),)))' 2>/dev/null ||
  echo unknown)
[[ $pyver == 3.11-x86_64 ]] || die "$pip runs Python $pyver; the image's python3 is 3.11 on x86_64"

mkdir -p "$out"
exec 9>"$out/.lock"
flock 9

base=$("$repo/scripts/debian-base.sh" --print-path)
[[ -x $base/usr/bin/python3.11 ]] || die "the base $base has no python3.11"

shopt -s nullglob
for d in "$rootfs" "$out"/rootfs.tmp.*; do
  [[ -e $d ]] && { say "removing old or unfinished $d"; rm -rf --one-file-system -- "$d"; }
done
shopt -u nullglob
rm -f -- "$stamp"

tmp=$(mktemp -d "$out/rootfs.tmp.XXXXXX")
trap 'rc=$?; [[ -n ${tmp:-} ]] && rm -rf --one-file-system -- "$tmp"; [[ $rc -eq 0 ]] || say "failed (exit $rc); nothing cached"' EXIT
trap 'exit 130' INT TERM HUP

# The package tree is installed once into OUT_DIR/dist-packages (stamped with the list) and copied into each
# build of the root: a failed later step does not download and install it again.
pkgs=$out/dist-packages
if [[ ! -e $pkgs.complete ]] || [[ $(cat "$pkgs.complete") != "${packages[*]}" ]]; then
  rm -rf --one-file-system -- "$pkgs" "$pkgs".tmp "$pkgs.complete"
  from=()
  [[ -z ${SANDLET_BENCH_WHEELS:-} ]] || from=(--no-index --find-links "$SANDLET_BENCH_WHEELS")
  say "pip install --target $pkgs (${#packages[@]} packages and their dependencies; downloads ~0.4 GB once)"
  # pip compiles the .pyc files: sandboxes read them instead of compiling into their upper layer.
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$pip" install -q --only-binary=:all: "${from[@]}" --target "$pkgs.tmp" \
    "${packages[@]}" >&2 || die "pip install failed"
  # pip --target puts console scripts into bin/; they point at the build venv's python.
  rm -rf -- "$pkgs.tmp/bin"
  mv -T -- "$pkgs.tmp" "$pkgs"
  echo "${packages[*]}" >"$pkgs.complete"
fi

say "copying the base $base and the package tree"
cp -a --reflink=auto -T -- "$base" "$tmp"
site=$tmp/usr/local/lib/python3.11/dist-packages
mkdir -p "$(dirname -- "$site")"
cp -a --reflink=auto -T -- "$pkgs" "$site"
install -D -m 0644 "$workload" "$tmp/opt/bench/workload.py"

say "checking the workload in bwrap on the image"
bwrap=$(command -v bwrap) || die "no bwrap on PATH (install bubblewrap)"
# With /proc (polars reads the CPU count there) and HOME=/root as in the sandboxes: matplotlib's font cache
# is built here once, on the writable root, and kept in the image.
line=$(env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
  PYTHONDONTWRITEBYTECODE=1 MPLBACKEND=Agg POLARS_MAX_THREADS=1 NUMBA_NUM_THREADS=1 \
  "$bwrap" --unshare-all --die-with-parent --bind "$tmp" / --proc /proc --dev /dev --tmpfs /tmp \
  /usr/bin/python3 /opt/bench/workload.py) || die "the workload failed in bwrap on $tmp"
[[ $line == checksum=* ]] || die "the workload printed '$line', expected checksum=..."
say "workload: $line"

bytes=$(du -sb --one-file-system "$tmp" | cut -f1)
[[ $bytes -ge $min_bytes ]] || die "the image holds $bytes bytes (< $min_bytes): add packages"
mv -T -- "$tmp" "$rootfs"
tmp=
sync -f "$rootfs" 2>/dev/null || sync
{ want_stamp; echo "bytes=$bytes"; echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"; } >"$stamp.tmp.$$"
mv -T -- "$stamp.tmp.$$" "$stamp"
say "built: $bytes bytes ($(du -sh --one-file-system "$rootfs" | cut -f1))"
report
