#!/usr/bin/env bash
# check_symbols.sh NM LIBRARY SYMBOLS_LIST HEADER — the exported symbols of libsandlet.so are the contract:
#   1. what `nm -D --defined-only LIBRARY` lists (name@@NODE) equals SYMBOLS_LIST (cmake/sandlet.symbols);
#   2. every function HEADER (sandlet.h, with its parts sandlet_*.h) declares with SANDLET_API is in that list, and nothing else is;
#   3. every symbol carries a version node (name@@NODE: a default version, not a bare name).
# Exit: 0 pass, 1 fail (printing each difference), 2 usage.
set -euo pipefail

[[ $# -eq 4 ]] || { echo "usage: $0 NM LIBRARY SYMBOLS_LIST HEADER" >&2; exit 2; }
nm=$1 lib=$2 list=$3 header=$4
for f in "$lib" "$list" "$header"; do [[ -r $f ]] || { echo "FAIL: cannot read $f" >&2; exit 1; }; done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sandlet-abi-symbols.XXXXXX")
trap 'rm -rf -- "$tmp"' EXIT

# nm: "ADDRESS TYPE NAME"; the version nodes themselves are absolute symbols (type A) named after the node.
"$nm" -D --defined-only "$lib" | awk '$2 != "A" { print $3 }' | sort >"$tmp/exported"
grep -v '^#' "$list" | sed '/^[[:space:]]*$/d' | sort >"$tmp/expected"
# SANDLET_API declarations: the function name is the first sandlet_* identifier followed by '('.
# (sandlet.h and the parts it includes, sandlet_*.h beside it.)
cat "$header" "$(dirname "$header")"/sandlet_*.h | grep '^SANDLET_API' | grep -o 'sandlet_[a-z0-9_]*(' | tr -d '(' | sort -u >"$tmp/declared"

failed=0
if ! diff -u --label "$list (expected)" --label "$lib (exported)" "$tmp/expected" "$tmp/exported" >"$tmp/diff"; then
  echo "FAIL: the library's exported symbols differ from $list ('-' listed only, '+' exported only):"
  cat "$tmp/diff"
  echo "(a new function goes into cmake/sandlet.map and $list; see SANDLET_ABI_VERSION in sandlet.h)"
  failed=1
fi
if grep -v '@@' "$tmp/exported" >"$tmp/unversioned"; then
  echo "FAIL: exported without a version node (name@@NODE):"
  cat "$tmp/unversioned"
  failed=1
fi
sed 's/@.*//' "$tmp/expected" | sort -u >"$tmp/listed_names"
if ! diff -u --label "$header (declared SANDLET_API)" --label "$list (names)" "$tmp/declared" "$tmp/listed_names" \
  >"$tmp/diff"; then
  echo "FAIL: the functions sandlet.h declares differ from $list ('-' declared only, '+' listed only):"
  cat "$tmp/diff"
  failed=1
fi
if [[ $failed -eq 0 ]]; then
  echo "OK: $(wc -l <"$tmp/exported") symbols, as listed and declared, each with a version node"
fi
exit $failed
