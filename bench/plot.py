#!/usr/bin/env python3
"""Plots sandlet-bench results: a latency CDF per scenario (sandlet vs its peer) and one summary.png.

usage: python3 bench/plot.py [--out DIR] RESULT.json...

A RESULT file holds one or more JSON objects as sandlet-bench prints them (one per line with --json,
or pretty-printed). For every result with `cdf_ms` on both sides it writes `<name>.png`, where name is
`<scenario>[-c<concurrency>]` (concurrency only when > 1, plus a variant tag such as `-no-warm-pool`
when needed to tell results apart). summary.png shows, per result, bars of sandlet vs peer on the
scenario's headline figures with the ratio written above. Notes go to stderr, written paths to stdout.
"""
import argparse
import json
import math
import os
import sys
from pathlib import Path

CDF_POINTS = 101  # cdf_ms holds the 0th..100th percentiles
OURS_COLOR, PEER_COLOR = "#1f77b4", "#ff7f0e"

# What one latency sample is, per scenario (x axis of the CDF).
SAMPLE_LABEL = {
    "lifecycle": "create → exec /bin/true → destroy (ms)",
    "lifecycle-cli": "whole process: run /bin/true in a sandbox (ms)",
    "exec": "exec /bin/true (ms)",
    "idle-density": "start one idle sandbox, until ready (ms)",
    "workspace-provision": "one sandbox on the workspace, until `true` ran (ms)",
    "import": "import the workspace (ms)",
}
# Scenarios whose ratio_vs_peer is a median of paired (interleaved) ours/peer time ratios.
PAIRED_RATIO = {"lifecycle", "lifecycle-cli", "exec", "import"}


class InputError(Exception):
    """Missing or garbled input: reported as one line, exit status 2."""


# ---- reading -------------------------------------------------------------------------------------------

def load_results(path):
    """All JSON objects in `path` (JSON Lines or pretty-printed, several allowed), each tagged with it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from e
    decoder = json.JSONDecoder()
    results, pos = [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            break
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{e.lineno}:{e.colno}: not JSON: {e.msg}") from e
        results.append(check_result(obj, path))
    if not results:
        raise InputError(f"{path}: empty, no JSON object in it")
    return results


def check_result(obj, path):
    """The object if it looks like a sandlet-bench result; the fields the plots rely on are typed."""
    if not isinstance(obj, dict) or not isinstance(obj.get("scenario"), str):
        raise InputError(f'{path}: a JSON value without a "scenario" string: not a sandlet-bench result')
    where = f"{path} ({obj['scenario']})"
    for side, block in (("ours", obj), ("peer", obj.get("peer"))):
        if not isinstance(block, dict):
            continue
        for key in ("p50_ms", "p99_ms"):
            if key in block and not is_number(block[key]):
                raise InputError(f"{where}: {side} {key} is not a number")
        if "cdf_ms" in block:
            cdf = block["cdf_ms"]
            if (not isinstance(cdf, list) or len(cdf) != CDF_POINTS or not all(map(is_number, cdf))
                    or any(a > b for a, b in zip(cdf, cdf[1:]))):
                raise InputError(f"{where}: {side} cdf_ms is not {CDF_POINTS} non-decreasing numbers")
    for key in ("iterations", "concurrency"):
        if key in obj and not (isinstance(obj[key], int) and not isinstance(obj[key], bool)):
            raise InputError(f"{where}: {key} is not an integer")
    obj["_source"] = str(path)
    return obj


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# ---- naming and labels ---------------------------------------------------------------------------------

def base_name(r):
    """<scenario>[-c<C>] plus tags for the variants the bench has flags for."""
    name = r["scenario"]
    if r.get("concurrency", 1) > 1:
        name += f"-c{r['concurrency']}"
    if r.get("warm_pool") is False:
        name += "-no-warm-pool"
    if r.get("host_rss_gib"):
        name += f"-host-rss-gib-{r['host_rss_gib']}"
    if r.get("idle_ms"):
        name += f"-idle-{r['idle_ms']}ms"
    return name


def assign_names(results):
    """Unique names: clashes get -n<N>, then the source file's stem, then a running number."""
    names = [base_name(r) for r in results]
    for extra in (lambda r: f"-n{r.get('iterations')}", lambda r: "-" + Path(r["_source"]).stem):
        clashing = {n for n in names if names.count(n) > 1}
        names = [n + extra(r) if n in clashing else n for n, r in zip(names, results)]
    # Still equal: several runs alike in one file; number them in file order.
    clashing, seen = {n for n in names if names.count(n) > 1}, {}
    for i, n in enumerate(names):
        if n in clashing:
            seen[n] = seen.get(n, 0) + 1
            names[i] = f"{n}-{seen[n]}"
    for r, n in zip(results, names):
        r["_name"] = n


def peer_label(r):
    """The peer's short name, with its program when that says more (host-fork-exec → true)."""
    peer = r["peer"]
    name = peer.get("name", "peer")
    program = os.path.basename(str(peer.get("command", "")).split(" ")[0])
    return name if not program or program == name else f"{name} ({program})"


def params_text(r):
    """The key parameters of a run, short: N=300, c=1, no warm pool, 500 MB workspace."""
    parts = [f"N={r['iterations']}" if "iterations" in r else None, f"c={r.get('concurrency', 1)}"]
    if r.get("warm_pool") is False:
        parts.append("no warm pool")
    if r.get("host_rss_gib"):
        parts.append(f"host RSS {r['host_rss_gib']} GiB")
    if r.get("workspace_mb"):
        parts.append(f"{r['workspace_mb']} MB workspace")
    if r.get("idle_ms"):
        parts.append(f"{r['idle_ms']} ms idle before each")
    return ", ".join(p for p in parts if p)


def day(r):
    return str(r.get("date", "undated"))[:10]


def fmt(v):
    """Three significant digits: 0.564, 7.51, 27.4, 1433."""
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


# ---- CDF plots -----------------------------------------------------------------------------------------

def has_cdfs(r):
    """cdf_ms, p50_ms and p99_ms on both sides (the legend quotes the percentiles)."""
    return all(key in block for block in (r, r["peer"]) for key in ("cdf_ms", "p50_ms", "p99_ms"))


def use_log_x(values):
    # Tails of 10-100x the median squash the body of a linear axis; log keeps both readable.
    positive = [v for v in values if v > 0]
    return bool(positive) and max(positive) / min(positive) > 20


def plot_cdf(r, out_dir, plt, ticker):
    """<name>.png: the two CDFs, p50/p99 marked, figures and ratios in the legend."""
    ours, peer = r["cdf_ms"], r["peer"]["cdf_ms"]
    pct = list(range(CDF_POINTS))
    fig, ax = plt.subplots(figsize=(8, 5.6), dpi=110, layout="constrained")
    ax.plot(ours, pct, color=OURS_COLOR, lw=2, label="sandlet" + side_figures(r))
    ax.plot(peer, pct, color=PEER_COLOR, lw=2, label=peer_label(r) + side_figures(r["peer"]))
    for q in (50, 99):
        ax.axhline(q, color="grey", lw=0.8, ls=":")
        ax.annotate(f"p{q}", (1.0, q), xycoords=("axes fraction", "data"), xytext=(3, 0),
                    textcoords="offset points", fontsize=8, color="grey", va="center")
    if use_log_x(ours + peer):
        ax.set_xscale("log")
        # Plain numbers (0.5, 1, 2, 5, 10) instead of 10^0 style labels.
        ax.xaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_ylim(0, 101)
    ax.set_yticks([0, 10, 25, 50, 75, 90, 99])
    ax.set_xlabel(SAMPLE_LABEL.get(r["scenario"], "latency (ms)"))
    ax.set_ylabel("samples at or below (%)")
    ax.set_title(f"{r['scenario']} — {params_text(r)} — {day(r)}")
    ax.grid(True, which="major", alpha=0.3)
    # Under the axes: inside, any corner can hide a curve (a slow side crosses the lower right).
    fig.legend(loc="outside lower center", title=ratio_line(r), fontsize=9, title_fontsize=9, frameon=False)
    path = out_dir / f"{r['_name']}.png"
    fig.savefig(path)
    plt.close(fig)
    return path


def side_figures(block):
    return f"   p50 {fmt(block['p50_ms'])} ms, p99 {fmt(block['p99_ms'])} ms"


def ratio_line(r):
    """sandlet/peer at p50 and p99; the paired ratio where the bench measured one."""
    p = r["peer"]
    parts = [f"{q} ×{fmt_ratio(r[q + '_ms'] / p[q + '_ms'])}" for q in ("p50", "p99") if p.get(q + "_ms")]
    if r["scenario"] in PAIRED_RATIO and is_number(r.get("ratio_vs_peer")):
        parts.append(f"paired median ×{fmt_ratio(r['ratio_vs_peer'])}")
    return "sandlet / peer:  " + ",  ".join(parts)


def fmt_ratio(x):
    """×0.53, ×2.84; tiny ratios keep two significant digits and read as 1/N (×0.0024 = 1/410)."""
    if x >= 0.1 or x == 0:
        return f"{x:.2f}"
    return f"{x:.2g} (1/{1 / x:.0f})"


# ---- summary -------------------------------------------------------------------------------------------

def panels(r):
    """[(title, unit, higher_is_better, [(label, ours, peer)])] for the summary; [] if none fits."""
    peer = r["peer"]
    title = f"{r['_name']}\n{params_text(r)}"
    if r["scenario"] == "workspace-provision" and is_number(r.get("all_ready_ms")) \
            and is_number(peer.get("all_ready_ms")):
        # The headline is the wall time until all N sandboxes are ready, not a per-sandbox latency.
        return [(title, "all ready (ms)", False, [("all ready", r["all_ready_ms"], peer["all_ready_ms"])])]
    if r["scenario"] == "import" and is_number(r.get("mb_per_s")) and is_number(peer.get("mb_per_s")):
        return [(title, "import rate (MB/s)", True, [("MB/s", r["mb_per_s"], peer["mb_per_s"])])]
    out = []
    bars = [(q, r[q + "_ms"], peer[q + "_ms"]) for q in ("p50", "p99")
            if is_number(r.get(q + "_ms")) and is_number(peer.get(q + "_ms"))]
    if bars:
        unit = "create latency (ms)" if r["scenario"] == "idle-density" else "latency (ms)"
        out.append((title, unit, False, bars))
    if r["scenario"] == "idle-density" and is_number(r.get("memory_per_sandbox_mib")) \
            and is_number(peer.get("memory_per_sandbox_mib")):
        # Idle density is about memory first; its own panel since the unit differs.
        out.append((f"{r['_name']} (memory)\n{params_text(r)}", "host memory per sandbox (MiB)", False,
                    [("MiB/sandbox", r["memory_per_sandbox_mib"], peer["memory_per_sandbox_mib"])]))
    return out


def draw_panel(ax, panel, peer_name, ticker):
    """Pairs of bars (sandlet, peer), the ratio above each pair, the values under it."""
    title, unit, higher_better, bars = panel
    xs = range(len(bars))
    w = 0.38
    ours = [b[1] for b in bars]
    peer = [b[2] for b in bars]
    ax.bar([x - w / 2 for x in xs], ours, w, color=OURS_COLOR, label="sandlet")
    ax.bar([x + w / 2 for x in xs], peer, w, color=PEER_COLOR, label=peer_name)
    values = [v for v in ours + peer if v > 0]
    if values and max(values) / min(values) > 50:
        ax.set_yscale("log")  # e.g. workspace-provision: 0.5 s vs 200 s
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    top = max(values) if values else 1
    for x, (_, o, p) in zip(xs, bars):
        better = (o > p) if higher_better else (o < p)
        ax.annotate(f"×{fmt_ratio(o / p)}" if p else "n/a", (x, max(o, p)), xytext=(0, 3),
                    textcoords="offset points", ha="center", va="bottom", fontsize=10, fontweight="bold",
                    color="green" if better else "firebrick")
    # Room above the tallest bar for the ratio label and the legend.
    if ax.get_yscale() == "log":
        ax.set_ylim(min(values) / 3, top * 30)
    else:
        ax.set_ylim(0, top * 1.45)
    ax.set_xticks(list(xs))
    # The values themselves under each pair: bar heights alone are hard to read off a log axis.
    ax.set_xticklabels([f"{b[0]}\n{fmt(b[1])} vs {fmt(b[2])}" for b in bars], fontsize=9)
    ax.set_ylabel(unit + (" ↑ better" if higher_better else " ↓ better"), fontsize=9)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(True, axis="y", alpha=0.3)


def source_tag(r):
    src = Path(r["_source"])
    return f"{src.parent.name}/{src.name}"


def plot_summary(results, out_dir, plt, ticker):
    """summary.png: one panel per headline figure, own y scale each (they span 0.5 ms to minutes)."""
    # Results from several directories (fresh and recorded runs): each panel says which it is.
    tagged = len({Path(r["_source"]).parent for r in results}) > 1
    items = []
    for r in results:
        for title, *rest in panels(r):
            items.append(((f"{title}\n[{source_tag(r)}]" if tagged else title, *rest), peer_label(r)))
    if not items:
        return None
    cols = min(4, len(items))
    rows = math.ceil(len(items) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.9 * rows), dpi=100, squeeze=False)
    for ax, (panel, peer_name) in zip(axes.flat, items):
        draw_panel(ax, panel, peer_name, ticker)
    for ax in list(axes.flat)[len(items):]:
        ax.axis("off")
    days = sorted({day(r) for r in results})
    fig.suptitle(f"sandlet vs peer — ratio = sandlet / peer (green: sandlet better) — "
                 f"{days[0] if len(days) == 1 else days[0] + ' … ' + days[-1]}", fontsize=12)
    fig.tight_layout()
    path = out_dir / "summary.png"
    fig.savefig(path)
    plt.close(fig)
    return path


# ---- main ----------------------------------------------------------------------------------------------

def import_matplotlib():
    try:
        import matplotlib
        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
        from matplotlib import ticker
    except ImportError as e:
        raise SystemExit(f"plot.py: matplotlib is needed ({e}); install it with: pip install matplotlib")
    return plt, ticker


def note(msg):
    print(f"plot.py: note: {msg}", file=sys.stderr)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Plot sandlet-bench JSON results (latency CDFs and summary.png).")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "plots",
                    help="output directory (default: bench/plots next to this script)")
    ap.add_argument("results", nargs="+", metavar="RESULT.json", help="sandlet-bench output files")
    args = ap.parse_args(argv)

    # Read everything first: a garbled file stops the run before anything is written.
    results = []
    try:
        for path in args.results:
            results.extend(load_results(path))
    except InputError as e:
        print(f"plot.py: error: {e}", file=sys.stderr)
        return 2

    usable = []
    for r in results:
        if "error" in r:
            note(f"{r['_source']} ({r['scenario']}): the run failed ({r['error']}); skipped")
        elif not isinstance(r.get("peer"), dict):
            note(f"{r['_source']} ({r['scenario']}): no peer block (--no-peer?); nothing to compare, skipped")
        else:
            usable.append(r)
    if not usable:
        print("plot.py: error: no result with a peer to compare; nothing written", file=sys.stderr)
        return 1
    assign_names(usable)

    plt, ticker = import_matplotlib()
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        print(f"plot.py: error: cannot create {args.out}: {e.strerror or e}", file=sys.stderr)
        return 2
    written = []
    for r in usable:
        if has_cdfs(r):
            written.append(plot_cdf(r, args.out, plt, ticker))
        else:
            note(f"{r['_source']} ({r['scenario']}): no cdf_ms on both sides; no CDF plot, summary bars only")
        if not panels(r):
            note(f"{r['_source']} ({r['scenario']}): no p50/p99 or headline figure on both sides; not in summary")
    summary = plot_summary(usable, args.out, plt, ticker)
    if summary:
        written.append(summary)
    else:
        note("nothing to put in summary.png")
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
