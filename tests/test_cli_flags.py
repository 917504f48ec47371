"""Common flags mean the same before and after the subcommand (a flag before it used to be dropped)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helmdeck.cli import build_parser

SUBCOMMANDS = ["reconcile", "status", "render", "diff", "cleanup"]
# flag words -> (attribute, expected value)
FLAGS: list[tuple[list[str], str, Any]] = [
    (["--kubeconfig", "/tmp/kc"], "kubeconfig", Path("/tmp/kc")),
    (["--context", "staging"], "context", "staging"),
    (["-n", "team-a"], "namespaces", ["team-a"]),
    (["--namespace", "team-b"], "namespaces", ["team-b"]),
    (["-A"], "all_namespaces", True),
    (["--packages", "/tmp/pk"], "packages", Path("/tmp/pk")),
    (["--readonly"], "readonly", True),
    (["--helm", "/opt/helm"], "helm", "/opt/helm"),
    (["--log-level", "debug"], "log_level", "debug"),
    (["--log-file", "/tmp/l.log"], "log_file", Path("/tmp/l.log")),
    (["--concurrency", "7"], "concurrency", 7),
    (["--prune"], "prune", True),
    (["--no-lease"], "no_lease", True),
    (["--lease-namespace", "ops"], "lease_namespace", "ops"),
]


def _extra(command: str) -> list[str]:
    return ["pkg"] if command in ("render", "diff") else []


@pytest.mark.parametrize("command", SUBCOMMANDS)
@pytest.mark.parametrize(("words", "attr", "expected"), FLAGS, ids=[" ".join(f[0]) for f in FLAGS])
def test_flag_means_the_same_in_both_positions(command: str, words: list[str], attr: str, expected: Any) -> None:
    parser = build_parser()
    before = parser.parse_args([*words, command, *_extra(command)])
    after = parser.parse_args([command, *words, *_extra(command)])
    assert getattr(before, attr) == expected
    assert getattr(after, attr) == expected


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_defaults_hold_when_no_flag_is_given(command: str) -> None:
    args = build_parser().parse_args([command, *_extra(command)])
    assert args.kubeconfig is None and args.context is None and args.namespaces is None
    assert args.readonly is False and args.log_level == "info" and args.concurrency >= 1


def test_demo_keeps_log_level_and_theme_given_before_it() -> None:
    args = build_parser().parse_args(["--log-level", "debug", "--theme", "helmdeck-light", "demo"])
    assert (args.log_level, args.theme) == ("debug", "helmdeck-light")


def test_kubeconfig_before_the_subcommand_is_used(tmp_path: Path) -> None:
    """End to end: a kubeconfig named before `status` is the one read (its error names it)."""
    missing = tmp_path / "no-such-kubeconfig"
    proc = subprocess.run([sys.executable, "-m", "helmdeck", "--kubeconfig", str(missing), "status"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert str(missing) in proc.stderr
