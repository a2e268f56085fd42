#!/usr/bin/env bash
# installed_headers.sh CMAKE BUILD_DIR SOURCE_DIR CC CXX — installs the build into a throw-away prefix and
# checks that the public headers are all there (sandlet.h, sandlet.hpp and every part under sandlet/cxx/)
# and usable as users include them: a C89 and a C++17 program compiled against the installed headers with
# the installed pkg-config file's flags, and the C++ one linked with the installed library.
# Exit: 0 pass, 1 fail, 2 usage.
set -euo pipefail

[[ $# -eq 5 ]] || { echo "usage: $0 CMAKE BUILD_DIR SOURCE_DIR CC CXX" >&2; exit 2; }
cmake=$1 build=$2 src=$3 cc=$4 cxx=$5
fail() { echo "FAIL: $*" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sandlet-install.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT
prefix=$tmp/prefix

"$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "cmake --install failed"; }

(cd "$src/include" && find sandlet -type f -name '*.h*' | sort) >"$tmp/source-headers"
[[ -s $tmp/source-headers ]] || fail "no headers under $src/include"
while read -r h; do
  [[ -f $prefix/include/$h ]] || fail "$h is not installed (under $prefix/include)"
  cmp -s "$src/include/$h" "$prefix/include/$h" || fail "the installed $h differs from the source"
done <"$tmp/source-headers"

pcdir=$(dirname "$(find "$prefix" -name sandlet.pc | head -1)")
[[ -f $pcdir/sandlet.pc ]] || fail "no sandlet.pc installed"
cflags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags sandlet)
libs=$(PKG_CONFIG_PATH=$pcdir pkg-config --libs sandlet)

cat >"$tmp/user.c" <<'C'
#include <sandlet/sandlet.h>
int main(void) { return sandlet_abi_version() == SANDLET_ABI_VERSION ? 0 : 1; }
C
cat >"$tmp/user.cpp" <<'CPP'
#include <sandlet/sandlet.hpp>
int main() { return sandlet::abi_version() == SANDLET_ABI_VERSION && sandlet::version()[0] != '\0' ? 0 : 1; }
CPP
# shellcheck disable=SC2086  # the pkg-config flags are words
"$cc" -std=c89 -Wall -Wextra -pedantic -Werror $cflags -c "$tmp/user.c" -o "$tmp/user-c.o" \
  || fail "a C89 program does not compile against the installed sandlet.h"
# shellcheck disable=SC2086
"$cxx" -std=c++17 -Wall -Wextra -pedantic -Werror $cflags "$tmp/user.cpp" -o "$tmp/user-cpp" $libs \
  || fail "a C++17 program does not build against the installed sandlet.hpp and library"
libdir=$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=libdir sandlet)
LD_LIBRARY_PATH=$libdir "$tmp/user-cpp" || fail "the program built against the install tree does not run"
echo "OK: $(wc -l <"$tmp/source-headers") headers installed and usable"
