"""``helmdeck plan``: every package's state, next action, why and objects (:mod:`engine.runtime.plan`).

Acts on nothing: a read-only engine without lease, package watch or monitors.
Exit codes as ``diff``: 0 nothing would change, 2 something would, 1 on error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from helmdeck import builder
from helmdeck.console import Refused
from helmdeck.logs import setup_logging
from helmdeck.parser import DIFF_CODES, EXIT_CHANGES, EXIT_FAILED, EXIT_NO_CHANGES, Subcommands


def add(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    plan = sub.add_parser(
        "plan", parents=[common], help="print what a reconcile would do to every package (acts on nothing)",
        description="For every package of --packages, in dependency order: its state, the next action, why, "
                    "and the objects an install or upgrade would add, change or remove (no values: secrets "
                    f"never show). {DIFF_CODES}")
    plan.add_argument("--base", metavar="GIT_REF",
                      help="plan the change from this commit's packages to the working tree's (both rendered; the "
                           "cluster's drift does not show): what merging a pull request would change")
    plan.add_argument("-o", "--output", choices=["text", "json", "markdown"], default="text",
                      help="markdown: a pull-request comment (a summary table, then a collapsed section per release)")
    plan.set_defaults(run=run)


@builder.engine_command
def run(args: argparse.Namespace) -> int:
    """Print the plan of ``args.packages`` (text, ``-o json`` or ``-o markdown``) and return the exit code;
    with ``--base REF``, the plan of the change from REF's tree to the working tree (:func:`base_tree`)."""
    from helmdeck.access import report as report_access

    if args.packages is None:
        print("error: plan needs --packages DIR or --kustomize DIR", file=sys.stderr)
        return EXIT_FAILED
    setup_logging(args.log_level, args.log_file)
    args.no_lease = True
    with contextlib.ExitStack() as stack:
        base = None
        if getattr(args, "base", None):
            try:
                base_dir = stack.enter_context(base_tree(args.packages, args.base))
            except GitError as exc:
                print(f"error: --base {args.base}: {exc}", file=sys.stderr)
                return EXIT_FAILED
            moved = {"packages": base_dir}
            if getattr(args, "kustomize", None):  # its messages name files from the commit's tree
                moved |= {"kustomize": base_dir, "kustomize_root": tree_root(base_dir, args.packages)}
            base = builder.engine(argparse.Namespace(**{**vars(args), **moved}), readonly=True, watch=False,
                                  monitors=False, records_of="package set")
        # The packages' releases and the set's others (those it would prune): no other record is read.
        engine = builder.engine(args, readonly=True, watch=False, monitors=False, records_of="package set")

        async def plan_all() -> Any:
            started = [e for e in (base, engine) if e is not None]
            try:
                for e in started:
                    await e.start(reconcile=False)
                if report_access(engine.access()):
                    raise Refused("cannot plan: release storage that cannot be read would be missed")
                return await (engine.plan_against(base, args.base) if base is not None else engine.plan())
            finally:
                for e in started:
                    await e.stop()

        try:
            plan = asyncio.run(plan_all())
        except Refused as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_FAILED
    out = {"json": lambda: plan.as_json() + "\n", "markdown": plan.markdown}.get(args.output, plan.text)()
    sys.stdout.write(out)
    if plan.failed:
        return EXIT_FAILED
    return EXIT_CHANGES if plan.changes else EXIT_NO_CHANGES


class GitError(RuntimeError):
    """``--base`` cannot be read with git; the message says why (git's own words)."""


def _git(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=300, check=False)
    except FileNotFoundError:
        raise GitError("git is not installed (--base reads the commit with git)") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} took longer than 300 s") from None
    if proc.returncode != 0:
        raise GitError(proc.stderr.decode(errors="replace").strip() or f"git {args[0]} failed")
    return proc


def tree_root(base: Path, folder: Path) -> Path:
    """The top of the commit's tree :func:`base_tree` gave ``base`` from (``folder`` of the checkout): messages
    name files from there, as the repository does."""
    top = Path(_git("rev-parse", "--show-toplevel", cwd=folder.resolve()).stdout.decode().strip())
    depth = len(folder.resolve().relative_to(top.resolve()).parts)
    return base.parents[depth - 1] if depth else base


@contextlib.contextmanager
def base_tree(folder: Path, ref: str) -> Iterator[Path]:
    """The folder ``folder`` as it is in commit ``ref`` of the git checkout holding it: the commit's whole
    tree (an overlay may read ``../../apps/base``) exported with ``git archive`` into a temporary folder,
    removed after. Git itself reads the repository, nothing else does. Raises GitError: not in a git
    checkout, ``ref`` names no commit, or the folder is not in that commit."""
    folder = folder.resolve()
    top = Path(_git("rev-parse", "--show-toplevel", cwd=folder).stdout.decode().strip())
    if ref.startswith("-"):
        raise GitError("a ref cannot start with '-'")
    try:
        commit = _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", cwd=top).stdout.decode().strip()
    except GitError:
        raise GitError(f"names no commit of {top}") from None
    relative = folder.relative_to(top.resolve())
    with tempfile.TemporaryDirectory(prefix="helmdeck-base-") as tmp:
        archive = Path(tmp) / "tree.tar"
        with archive.open("wb") as out:
            proc = subprocess.run(["git", "archive", "--format=tar", commit], cwd=top, stdout=out,
                                  stderr=subprocess.PIPE, timeout=300, check=False)
        if proc.returncode != 0:
            raise GitError(proc.stderr.decode(errors="replace").strip() or "git archive failed")
        tree = Path(tmp) / "tree"
        with tarfile.open(archive) as tar:
            tar.extractall(tree, filter="data")  # no links out of the tree, no special files
        archive.unlink()
        base = tree / relative
        if not base.is_dir():
            raise GitError(f"{relative} is not in {ref} ({commit[:12]})")
        yield base
