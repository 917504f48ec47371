"""A headless command that needs no release record, over a namespace holding many: from process start.

``helmdeck reconcile --once``, ``helmdeck plan`` and ``helmdeck status`` of an EMPTY packages folder, ``-n NS``,
NS holding ``--releases`` (10,000) releases of other tools (Secrets in helm's storage, one revision each,
``bench.storage_common.seed_namespace``, in ``bench-releases-N``: made once, kept for the next run and for
``bench/tui_launch.py``). Such a command reconciles, plans or shows the folder's packages and nothing else:
``reconcile --once`` and ``status`` need the stored records of the releases its packages name (none here), so
they list none (``status --all`` prints every release, as ``helm list``: not timed here); ``plan`` also needs
its package set's other releases (it lists those it would prune), so it makes one list, narrowed on the server
to records labelled with its package set (none here).
Issue 36, goal 2: ≤ 0.5 s. What each command lists is counted from the outside: the process's log at
debug level (``--log-file``) names each storage list it makes (``storage list``); the bench prints the count.
Also timed in the same run: ``helm list -n NS --max 0 -o json`` (every release of the namespace, decoded:
what helmdeck read before), ``helmdeck --version`` (process start, the command line, ``helm version``) and
the interpreter alone; with ``--baseline DIR``, the same commands of the helmdeck source checkout in DIR (another
commit: before and after in one run). Medians of ``--runs`` (5) fresh processes; the load average is printed with each
figure (the 1-minute average of runnable processes, ``os.getloadavg``).

    .venv/bin/python -m bench.empty_folder [--releases 10000] [--runs 5] [--baseline DIR]
        [--kubeconfig FILE | --cluster-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.storage_common import add_cluster_args, bench_cluster, releases_namespace, seed_namespace
from localcluster import build

ROOT = Path(__file__).resolve().parent.parent  # this checkout


def timed(argv: list[str], env: dict[str, str], runs: int, ok: Sequence[int] = (0,),
          cwd: Path | None = None) -> tuple[float, str]:
    """Median wall time of ``argv`` (run in ``cwd``) from spawn to exit, and the last run's stderr."""
    took, err = [], ""
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=cwd)
        took.append(time.perf_counter() - start)
        if proc.returncode not in ok:
            raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr}")
        err = proc.stderr
    return statistics.median(took), err


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--releases", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="also time the helmdeck source checkout in DIR")
    add_cluster_args(parser)
    args = parser.parse_args(argv)
    with bench_cluster(args) as target, tempfile.TemporaryDirectory(prefix="helmdeck-empty-") as work:
        namespace = releases_namespace(args.releases)
        seed_namespace(target, namespace, args.releases)
        folder = Path(work) / "packages"
        folder.mkdir()
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"XDG_CONFIG_HOME": f"{work}/config", "XDG_STATE_HOME": f"{work}/state"}
        helm = str(build.binary("helm4"))
        common = ["--kubeconfig", str(target.kubeconfig), "-n", namespace, "--helm", helm, "--packages", str(folder)]
        helmdeck = [sys.executable, "-m", "helmdeck"]
        sources = {"": ROOT, **({" (baseline)": args.baseline.resolve()} if args.baseline else {})}
        commands = {
            f"helmdeck {what} (empty folder){label}": ([*helmdeck, *words, *common], source)
            for label, source in sources.items()
            for what, words in (("reconcile --once", ["reconcile", "--once"]), ("plan", ["plan"]),
                                ("status", ["status"]))
        }
        for source in sources.values():  # not timed: bytecode written, files in the page cache
            timed([*helmdeck, "--version"], env, 1, cwd=source)
        print(f"== {args.releases} releases in {namespace}, an empty packages folder; median of {args.runs} "
              "fresh processes")
        results: dict[str, float] = {}
        for name, (cmd, source) in commands.items():
            results[name], _ = timed(cmd, env, args.runs, cwd=source)
            log = Path(work) / f"{len(results)}.log"
            timed([*cmd, "--log-level", "debug", "--log-file", str(log)], env, 1, cwd=source)
            lists = sum("storage list" in line for line in log.read_text().splitlines())
            counted = f"storage lists made: {lists}" if source == ROOT else "its lists are not logged"
            print(f"  {name}: {results[name] * 1000:.0f} ms (goal ≤ 500 ms); {counted} "
                  f"(load average {os.getloadavg()[0]:.1f})", flush=True)
        helm_list, _ = timed([helm, "list", "-n", namespace, "--max", "0", "-o", "json", *target.helm_args()],
                             env, args.runs)
        version, _ = timed([*helmdeck, "--helm", helm, "--version"], env, args.runs)
        interpreter, _ = timed([sys.executable, "-c", "pass"], env, args.runs)
        for name, took in results.items():
            print(f"  {name}: {took / helm_list:.2f}x helm list -n {namespace} --max 0")
        print(f"  helm list -n {namespace} --max 0 -o json: {helm_list * 1000:.0f} ms")
        print(f"  helmdeck --version: {version * 1000:.0f} ms; python -c pass: {interpreter * 1000:.0f} ms")
        print(f"  load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} (runnable processes, 1/5/15 min)")


if __name__ == "__main__":
    main()
