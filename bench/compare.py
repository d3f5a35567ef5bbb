"""One bench of two source trees, run in turn (ABBA), every row of its output as new/old ratios.

For "no row of ``make bench`` gets worse": a second worktree at the commit before
(``git worktree add --detach ../old COMMIT``, its C extensions built into it), then

    .venv/bin/python bench/compare.py ../old . bench/storage.py [--pairs 3] [--out DIR] [-- ARGS]

Each run is ``python TREE/bench/NAME.py ARGS`` in TREE with ``PYTHONPATH=TREE/src`` (the brokers a
bench starts inherit it, so they run that tree's code too); ``--same-script`` runs the new tree's
script on both trees' code (when the script changed but the old code still runs it). The pairs
alternate old, new, new, old, ... so that the machine's load drifts onto both sides alike; the
load average before each run is printed, and each run's output is kept in ``--out``; a run that
fails part way (its exit status printed) still gives the rows it printed.

A row is a line of output, its key the line with every number replaced by ``#`` (and runs of
spaces by one); its figures are its numbers, matched by position (a key's n-th line in a run is a
row of its own). For each figure that moved, the line is printed with ``old -> new (xR [lo-hi])``:
the medians of each side, the median of the pairs' own new/old ratios and their range (a ratio
that the range puts on both sides of 1 is the machine's noise). Whether a figure is better higher
(records/s) or lower (µs, ms) is the reader's call; rows printed by one tree only are listed apart.
``--saved`` prints the report again from the runs kept in ``--out``.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from collections import defaultdict

NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][-+]?\d+)?")

Rows = dict[tuple[str, int], list[float]]


def rows(output: str) -> Rows:
    """Each line's numbers under its key (the line with numbers as #, and its occurrence)."""
    seen: dict[str, int] = defaultdict(int)
    found: Rows = {}
    for line in output.splitlines():
        figures = [float(n.replace(",", "")) for n in NUMBER.findall(line)]
        if not figures:
            continue
        key = " ".join(NUMBER.sub("#", line).split())  # alignment aside: columns widen with their figures
        found[key, seen[key]] = figures
        seen[key] += 1
    return found


def saved(out: str, name: str) -> Rows:
    """The rows of a run saved before (``--saved``: the report again, without running)."""
    with open(os.path.join(out, f"{name}.txt")) as file:
        return rows(file.read().split("\n# stderr\n")[0])


def run(tree: str, script: str, args: list[str], out: str, name: str) -> Rows:
    """One run of the bench in TREE, its output saved as OUT/NAME.txt."""
    env = {**os.environ, "PYTHONPATH": os.path.join(os.path.abspath(tree), "src")}
    load = os.getloadavg()[0]
    start = time.monotonic()
    done = subprocess.run([sys.executable, script, *args], cwd=tree, env=env, capture_output=True, text=True)
    print(f"  {name}: load {load:.2f}, {time.monotonic() - start:.0f} s, exit {done.returncode}", flush=True)
    with open(os.path.join(out, f"{name}.txt"), "w") as file:
        file.write(f"# load {load:.2f}\n{done.stdout}\n# stderr\n{done.stderr}")
    return rows(done.stdout)  # a run that failed part way still printed its first rows


def fmt(value: float) -> str:
    """A figure in four significant digits (rates run to millions, latencies to fractions)."""
    return f"{value:.4g}"


def report(old: list[Rows], new: list[Rows]) -> None:
    """Every row both trees printed in every run, with its moved figures; then the rest."""
    keys = [k for k in new[0] if all(k in r and len(r[k]) == len(new[0][k]) for r in old + new)]
    for key in keys:
        parts = key[0].split("#")
        if len(parts) != len(new[0][key]) + 1:  # a '#' of the output's own
            continue
        text, moved = parts[0], False
        for i, part in enumerate(parts[1:]):
            before = statistics.median(r[key][i] for r in old)
            after = statistics.median(r[key][i] for r in new)
            pairs = [n[key][i] / o[key][i] for o, n in zip(old, new, strict=True) if o[key][i]]
            if all(r[key][i] == old[0][key][i] for r in old + new):
                text += fmt(before)
            else:
                moved = True
                ratio = f"x{statistics.median(pairs):.3f} [{min(pairs):.2f}-{max(pairs):.2f}]" if pairs else "x?"
                text += f"[{fmt(before)} -> {fmt(after)} ({ratio})]"
            text += part
        if moved:
            print(text)
    for side, runs, other in (("old", old, new), ("new", new, old)):
        only = sorted({k[0] for r in runs for k in r} - {k[0] for r in other for k in r})
        for line in only:
            print(f"only {side}: {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", help="the tree before (a worktree with its C extensions built)")
    parser.add_argument("new", help="the tree after")
    parser.add_argument("bench", help="the bench's path inside a tree, e.g. bench/storage.py")
    parser.add_argument("--pairs", type=int, default=3, help="runs of each tree (default 3)")
    parser.add_argument("--same-script", action="store_true", help="the new tree's script on both trees' code")
    parser.add_argument("--out", default="/tmp/compare", help="where each run's output is kept")
    parser.add_argument("--saved", action="store_true", help="report the runs kept in --out, run nothing")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)  # the bench's own arguments follow --
    opts = parser.parse_args(argv[:cut])
    opts.args = argv[cut + 1 :]
    name = os.path.splitext(os.path.basename(opts.bench))[0]
    os.makedirs(opts.out, exist_ok=True)
    new_script = os.path.join(os.path.abspath(opts.new), opts.bench)
    old_script = new_script if opts.same_script else os.path.join(os.path.abspath(opts.old), opts.bench)
    old: list[Rows] = []
    new: list[Rows] = []
    for i in range(opts.pairs):
        order = [("old", opts.old, old_script, old), ("new", opts.new, new_script, new)]
        for side, tree, script, results in order if i % 2 == 0 else order[::-1]:
            label = f"{name}-{side}{i}"
            results.append(saved(opts.out, label) if opts.saved else run(tree, script, opts.args, opts.out, label))
    old, new = [r for r in old if r], [r for r in new if r]
    if old and new:
        report(old[: len(new)], new[: len(old)])
    else:
        print("no run of one side finished: see", opts.out)


if __name__ == "__main__":
    main()
