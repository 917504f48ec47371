"""A flag means the same before and after the subcommand, for every subcommand the parser has (a flag
before `controller` used to be dropped), and a flag a subcommand does not take is refused in both places."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helmdeck.cli import build_parser
from helmdeck.parser import subcommands

COMMANDS = sorted(subcommands(build_parser()))
# Every flag of the top level: words -> (attribute, expected value).
FLAGS: list[tuple[list[str], str, Any]] = [
    (["--kubeconfig", "/tmp/kc"], "kubeconfig", Path("/tmp/kc")),
    (["--context", "staging"], "context", "staging"),
    (["-n", "team-a"], "namespaces", ["team-a"]),
    (["--namespace", "team-b"], "namespaces", ["team-b"]),
    (["-A"], "all_namespaces", True),
    (["--packages", "/tmp/pk"], "packages", Path("/tmp/pk")),
    (["--kustomize", "/tmp/ks"], "kustomize", Path("/tmp/ks")),
    (["--var", "A=1"], "vars", ["A=1"]),
    (["--vars-from", "/tmp/v.env"], "vars_from", [Path("/tmp/v.env")]),
    (["--vars-from-cluster", "flux-system/apps"], "vars_from_cluster", "flux-system/apps"),
    (["--allow-unsupported"], "allow_unsupported", True),
    (["--package-set", "team"], "package_set", "team"),
    (["--readonly"], "readonly", True),
    (["--helm", "/opt/helm"], "helm", "/opt/helm"),
    (["--log-level", "debug"], "log_level", "debug"),
    (["--log-file", "/tmp/l.log"], "log_file", Path("/tmp/l.log")),
    (["--concurrency", "7"], "concurrency", 7),
    (["--prune"], "prune", True),
    (["--no-lease"], "no_lease", True),
    (["--lease-namespace", "ops"], "lease_namespace", "ops"),
    (["--theme", "helmdeck-light"], "theme", "helmdeck-light"),
    (["--controller-metrics", "http://127.0.0.1:8080/metrics"], "controller_metrics",
     ["http://127.0.0.1:8080/metrics"]),
]


def _words(parser: argparse.ArgumentParser) -> list[str]:
    """The positional words ``parser`` needs (a subcommand's first action, then its own)."""
    out: list[str] = []
    for action in parser._actions:
        if action.option_strings:
            continue
        if isinstance(action, argparse._SubParsersAction):
            name, sub = next(iter(action.choices.items()))
            out += [name, *_words(sub)]
        else:
            out.append("x")
    return out


def _actions(command: str) -> list[argparse.Action]:
    sub = subcommands(build_parser())[command]
    return [*sub._actions, *(a for s in subcommands(sub).values() for a in s._actions)]


def _takes(command: str, words: list[str], attr: str) -> bool | None:
    """Whether ``command`` takes the flag (True), has no such option (False) or one of its own by that name
    (None: `export --namespace`, the objects' namespace)."""
    same = [a for a in _actions(command) if words[0] in a.option_strings]
    return None if same and same[0].dest != attr else bool(same)


def test_the_table_has_every_flag_of_the_top_level() -> None:
    """A flag added to the top level without a row here fails: each is tried with every subcommand."""
    parser = build_parser()
    options = {o for a in parser._actions for o in a.option_strings if o.startswith("-")}
    assert options - {"-h", "--help", "--version"} == {f[0][0] for f in FLAGS} | {"--all-namespaces"}
    assert {"controller", "export", "demo", "cluster", "plan", "versions"} <= set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(("words", "attr", "expected"), FLAGS, ids=[" ".join(f[0]) for f in FLAGS])
def test_flag_means_the_same_in_both_positions(command: str, words: list[str], attr: str, expected: Any) -> None:
    rest = _words(subcommands(build_parser())[command])
    before, after = [*words, command, *rest], [command, *rest, *words]
    takes = _takes(command, words, attr)
    if not takes:  # refused where it is not the subcommand's, never kept unused
        for argv in (before, after) if takes is False else (before,):
            with pytest.raises(SystemExit) as exited:
                build_parser().parse_args(argv)
            assert exited.value.code == 2, argv
        return
    assert getattr(build_parser().parse_args(before), attr) == expected
    assert getattr(build_parser().parse_args(after), attr) == expected


@pytest.mark.parametrize("command", COMMANDS)
def test_defaults_hold_when_no_flag_is_given(command: str) -> None:
    args = build_parser().parse_args([command, *_words(subcommands(build_parser())[command])])
    assert args.kubeconfig is None and args.context is None and args.namespaces is None
    assert args.readonly is False and args.log_level == "info" and args.concurrency >= 1


def test_a_subcommand_keeps_its_own_defaults() -> None:
    """The controller's Lease namespace defaults to its pod's (None here), not the top level's "default"."""
    args = build_parser().parse_args(["controller"])
    assert (args.lease_namespace, args.concurrency, args.log_file) == (None, 4, None)
    assert build_parser().parse_args(["status"]).lease_namespace == "default"


def test_a_flag_before_a_subcommand_that_does_not_take_it_names_both(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--packages", "/tmp/pk", "controller"])
    assert "--packages: `helmdeck controller` does not take this flag" in capsys.readouterr().err


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


def test_the_lease_duration_help_gives_the_defaults_the_controller_takes() -> None:
    """The help's two defaults are the ones the shard selector and the one Lease take (the parser does not import
    them: their modules would cost every command's start ~0.3 s)."""
    from engine.runtime.cluster.members import AUTO_LEASE_DURATION
    from engine.runtime.drive.lease import LeaseConfig

    controller = subcommands(build_parser())["controller"]
    text = " ".join(controller.format_help().split())
    assert f"(default: {LeaseConfig.duration:g}, with --shards auto {AUTO_LEASE_DURATION:g}:" in text
