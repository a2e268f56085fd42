#!/usr/bin/env python3
"""Checks the source tree's shape (docs/ARCHITECTURE.md, "Layering"):

  - src/runtime includes no header of a particular backend (only backends/backend.hpp, backends/registry.hpp);
  - src/backends includes no runtime header;
  - src/sys (the kernel wrappers at the bottom) includes nothing above it;
  - src/spec, src/proto, src/policy, src/image, src/snapshot include neither runtime nor backend headers;
  - src/remote_store (blob store clients, linked alone by a loader binary) includes only common, sys, image/sha256
    and its own headers; nothing in it reaches runtime or backends;
  - src/lazy (the node's loader) includes only common, sys, store, its own headers and two image headers; src/image
    and src/remote_store never include it (LayerMounts knows the loader only through its hooks);
  - src/network/dns (the DNS name gate) includes only common, sys/fd.hpp, the spec's network header, the allowlist's
    resolved-set headers and its own headers;
  - src/tree (directory trees, built into the agent too) includes only the errno table, sandlet.h, the tree
    protocol and its own headers;
  - src/recipe (recipes) may use runtime and image, not backends, capi or cli; nothing below it includes it;
  - no include cycle between components (a component = a .hpp and its .cpp, named by path without suffix);
  - no product code outside src/backends reads inside a record's backend section (`backend_state`: the
    backend's own, opaque to everything else; only the record's reader and writer, src/runtime/record.cpp,
    name it as a field);
  - no source file over MAX_LINES lines.

usage: check_layering.py SOURCE_DIR     Exits 1 and lists every violation when there is one.
"""
import os
import re
import sys

MAX_LINES = 600
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE_SUFFIXES = (".cpp", ".hpp", ".h", ".c", ".py", ".pyi", ".sh")
SIZE_ROOTS = ("src", "include", "test", "bench", "bindings", "examples", "scripts")

# (files under this prefix, may not include headers under any of these prefixes, except these headers)
RULES = [
    ("src/runtime/", ("backends/",), ("backends/backend.hpp", "backends/registry.hpp")),
    ("src/backends/", ("runtime/",), ()),
    ("src/sys/", ("runtime/", "backends/", "spec/", "image/", "policy/", "proto/", "capi/", "cli/"), ()),
    ("src/spec/", ("runtime/", "backends/", "image/", "capi/", "cli/"), ()),
    ("src/proto/", ("runtime/", "backends/", "spec/", "image/", "sys/", "capi/", "cli/"), ()),
    ("src/policy/", ("runtime/", "backends/", "capi/", "cli/"), ()),
    ("src/image/", ("runtime/", "backends/", "capi/", "cli/", "snapshot/"), ()),
    ("src/snapshot/", ("runtime/", "backends/", "capi/", "cli/"), ()),
    # Builds run on the runtime's public face (Runtime, Sandbox) and the layer store; nothing below the
    # build uses it.
    ("src/recipe/", ("backends/", "capi/", "cli/"), ("backends/backend.hpp",)),
    ("src/runtime/", ("recipe/",), ()),
    ("src/image/", ("recipe/",), ()),
    ("src/spec/", ("recipe/",), ()),
    ("src/snapshot/", ("recipe/",), ()),
    # The image layer knows the loader only through LayerMounts' hooks; the loader never reaches up.
    ("src/image/", ("lazy/",), ()),
    ("src/remote_store/", ("lazy/",), ()),
    # Registry pulls sit beside the layer store: below the runtime, which calls them.
    ("src/registry/", ("runtime/", "backends/", "capi/", "cli/", "recipe/", "lazy/"), ()),
]

# (files under this prefix may include only headers under these prefixes, or these exact headers)
ONLY = [
    # The stores are linked on their own by a loader binary: the bottom layers and their own headers.
    ("src/remote_store/", ("common/", "sys/", "remote_store/", "image/sha256.hpp")),
    # The loader's sources (but its client) are linked into the static loader binary with the stores, sha256
    # and a few sys files: what they may include.
    ("src/lazy/", ("common/", "sys/", "remote_store/", "lazy/", "image/sha256.hpp", "image/blob_builder.hpp",
                   "image/fs_tree.hpp")),
    # The DNS name gate (linked into the node's gateway): the spec's rules, the allowlist's resolved set,
    # fds, the DNS log's layout, and its own headers; never the runtime or a backend.
    ("src/tree/", ("common/errno_code.hpp", "common/status_value.hpp", "sandlet/sandlet.h", "proto/tree_protocol.hpp", "proto/wire.hpp", "tree/")),
    ("src/network/dns/", ("common/", "sys/fd.hpp", "spec/network_spec.hpp", "policy/net_resolved.hpp", "policy/net_rules.hpp",
                  "proto/dns_log.hpp", "network/dns/")),
]


def sources(root, top):
    for d, _, files in os.walk(os.path.join(root, top)):
        for f in files:
            if f.endswith(SOURCE_SUFFIXES):
                yield os.path.relpath(os.path.join(d, f), root)


def includes(root, path):
    with open(os.path.join(root, path), errors="replace") as f:
        return INCLUDE.findall(f.read())


def resolve(root, path, inc):
    """The repo path an include names: relative to src/ or include/, or to the including file."""
    for base in ("src", "include", os.path.dirname(path)):
        candidate = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return None


def component(path):
    return os.path.splitext(path)[0]


def find_cycles(graph):
    """Every cycle found by a depth-first search, as a list of components (each reported once)."""
    cycles, seen_cycles, state = [], set(), {}

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):]
                key = frozenset(cycle)
                if key not in seen_cycles:
                    seen_cycles.add(key)
                    cycles.append(cycle + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return cycles


# Looking inside the backend's section: naming it as a JSON key, or indexing, searching or fetching from it.
BACKEND_SECTION_READ = re.compile(r'"backend_state"|backend_state\s*(\.at\(|\[|\.if_contains\(|\.find\(|\.get\()')
BACKEND_SECTION_OWNERS = ("src/backends/", "src/runtime/record.cpp")
PRODUCT_ROOTS = ("src", "bindings/python/sandlet", "bindings/python/src")


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    problems = []
    graph = {}
    for path in sorted(sources(root, "src")):
        if not path.endswith((".cpp", ".hpp", ".h", ".c")):
            continue
        for inc in includes(root, path):
            for prefix, banned, allowed in RULES:
                if path.startswith(prefix) and inc.startswith(banned) and inc not in allowed:
                    problems.append(f"{path}: includes {inc} ({prefix} may not depend on {', '.join(banned)})")
            for prefix, allowed in ONLY:
                if path.startswith(prefix) and not inc.startswith(allowed):
                    problems.append(f"{path}: includes {inc} ({prefix} may include only {', '.join(allowed)})")
            target = resolve(root, path, inc)
            if target and target.startswith("src/") and component(target) != component(path):
                graph.setdefault(component(path), set()).add(component(target))
    for top in PRODUCT_ROOTS:
        for path in sorted(sources(root, top)):
            if path.startswith(BACKEND_SECTION_OWNERS):
                continue
            with open(os.path.join(root, path), errors="replace") as f:
                for n, line in enumerate(f, 1):
                    if BACKEND_SECTION_READ.search(line):
                        problems.append(f"{path}:{n}: reads inside a record's backend section (only its backend may)")
    for cycle in find_cycles(graph):
        problems.append("include cycle: " + " -> ".join(cycle))
    for top in SIZE_ROOTS:
        for path in sorted(sources(root, top)):
            with open(os.path.join(root, path), errors="replace") as f:
                n = sum(1 for _ in f)
            if n > MAX_LINES:
                problems.append(f"{path}: {n} lines (more than {MAX_LINES}: split it by purpose)")
    for p in problems:
        print(p)
    print(f"check_layering: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
