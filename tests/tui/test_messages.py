"""Messages and screens: a chart's multi-line `fail` message kept whole (bounded) everywhere it is shown, no
premature state at start-up, the Events tab's columns, and long diff lines folded with their markers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from engine.helm import Helm, HelmError
from engine.helm.errors import MESSAGE_CHARS, MESSAGE_LINES, RenderError, classify, error_message
from engine.kube.client import KubeTarget
from engine.monitor.events import KubeEvent
from engine.reconcile import state as st
from engine.runtime.assemble import build_engine
from engine.runtime.state import LogEntry, ReleaseUpdated
from testkit.packages import write_package
from tests.cli.test_cli import cluster_args, helmdeck
from tests.engine.resolve.test_values_from import until
from tui.widgets.event_log import event_lines, kube_event_line
from tui.widgets.text_view import fold_diff

REASON = ("\nREASON: the chart refuses this\n\nPASSWORDS ERROR: You must provide your current passwords.\n"
          "    - auth.password: the password is empty\n")
HELM_OUTPUT = ("Error: INSTALLATION FAILED: execution error at (fails/templates/cm.yaml:1:3): \n"
               "REASON: the chart refuses this\n\n\nPASSWORDS ERROR: You must provide your current passwords.\n"
               "    - auth.password: the password is empty\n\n\nUse --debug flag to render out invalid YAML\n")


def test_a_multi_line_fail_message_is_kept_whole() -> None:
    error = classify("install", HELM_OUTPUT, 1, stderr=HELM_OUTPUT)
    assert isinstance(error, RenderError)
    assert error.message == ("INSTALLATION FAILED: execution error at (fails/templates/cm.yaml:1:3):\n"
                             "REASON: the chart refuses this\n\n"
                             "PASSWORDS ERROR: You must provide your current passwords.\n"
                             "    - auth.password: the password is empty")
    assert error_message("level=warn one\nError: plain failure\n") == "plain failure"
    assert error_message("no error line\nlast words\n") == "last words" and error_message("") == "helm failed"


def test_a_huge_fail_message_is_bounded() -> None:
    many = error_message("Error: x\n" + "".join(f"line {i}\n" for i in range(1000)))
    assert len(many.splitlines()) == MESSAGE_LINES + 1 and many.endswith("(961 more lines)")
    wide = error_message("Error: " + "y" * 100_000)
    assert len(wide) < MESSAGE_CHARS + 40 and wide.endswith(f"(cut at {MESSAGE_CHARS} characters)")


def test_events_keep_their_columns_and_multi_line_messages_stay_under_them() -> None:
    kube = [kube_event_line(KubeEvent(at=1.0, namespace="ns", kind="ReplicaSet", name="web", type=kind,
                                      reason=reason, message="m"))
            for reason, kind in (("ScalingReplicaSet", "Normal"), ("SuccessfulCreate", "Normal"),
                                 ("FailedCreatePodSandBox", "Warning"), ("Pulled", "Normal"))]
    ours = event_lines(LogEntry(at=1.0, key=("ns", "web"), package="web", action="install", outcome="failed",
                                message="first\nsecond",
                                tail=("helm says",)))
    columns = {line.plain.index(kind) for line, kind in zip(kube, ("Normal", "Normal", "Warning", "Normal"),
                                                               strict=True)}
    assert columns == {ours[0].plain.index("failed")}
    assert "FailedCreatePodSa… Warning" in kube[2].plain
    assert ours[0].plain.endswith("first") and ours[1].plain.strip() == "second" and "│ helm says" in ours[2].plain


def test_long_diff_lines_are_folded_with_their_marker() -> None:
    diff = "--- a\n+++ b\n@@ -1 +1 @@\n-" + "o" * 25 + "\n+" + "n" * 25 + "\n " + "k" * 5 + "\n"
    folded = fold_diff(diff, 12).splitlines()
    assert folded[3:6] == ["-ooooooooooo", "-ooooooooooo", "-ooo"]
    assert folded[6:9] == ["+nnnnnnnnnnn", "+nnnnnnnnnnn", "+nnn"] and folded[9] == " kkkkk"
    assert all(len(line) <= 12 for line in folded) and folded[0] == "--- a"
    assert fold_diff(diff, 100) == diff


# -- on the local cluster --------------------------------------------------------------


def failing_chart(root: Path) -> Path:
    (root / "templates").mkdir(parents=True)
    (root / "Chart.yaml").write_text("apiVersion: v2\nname: fails\nversion: 0.1.0\n")
    (root / "values.yaml").write_text("refuse: true\n")
    escaped = REASON.replace("\n", "\\n")
    (root / "templates" / "cm.yaml").write_text(
        f'{{{{- if .Values.refuse }}}}{{{{ fail "{escaped}" }}}}{{{{ end }}}}\n'
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  a: b\n")
    return root


def package(folder: Path, namespace: str, chart: Path, refuse: bool) -> None:
    write_package(folder, "app", namespace, chart=chart, timeout="20s", values={"refuse": refuse})


@pytest.mark.cluster
async def test_the_whole_fail_message_reaches_render_status_events_and_plan(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    chart, pkgs = failing_chart(tmp_path / "fails"), tmp_path / "p"
    package(pkgs, namespace, chart, refuse=True)
    key = (namespace, "app")
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
    await engine.start()
    try:
        await until(lambda: (v := engine.release(key)) is not None and v.ready is False)
        with pytest.raises(HelmError) as raised:
            await engine.render(key)
        view = engine.release(key)
        assert view is not None
        ready = view.condition("Ready")
        assert ready is not None
        shown = [raised.value.message, ready.message, *(e.message for e in engine.events(key) if e.outcome == "failed")]
        for text in shown:
            assert "REASON: the chart refuses this" in text and "- auth.password: the password is empty" in text
    finally:
        await engine.stop()
    proc = await asyncio.to_thread(helmdeck, "plan", *cluster_args(helm, kube_target, namespace, pkgs,
                                                                   tmp_path / "log"))
    assert "    PASSWORDS ERROR: You must provide your current passwords." in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.cluster
async def test_an_installed_release_shows_no_premature_state_at_start_up(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    chart, pkgs = failing_chart(tmp_path / "fails"), tmp_path / "p"
    package(pkgs, namespace, chart, refuse=False)
    key = (namespace, "app")
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
    await engine.start()
    try:
        await until(lambda: (v := engine.release(key)) is not None and v.state == st.IN_SYNC)
    finally:
        await engine.stop()
    again = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
    seen: list[tuple[str | None, int | None]] = []
    again.subscribe(lambda e: seen.append((e.view.state, e.view.observation.version if e.view.observation else None))
                    if isinstance(e, ReleaseUpdated) and e.view.key == key else None)
    await again.start(reconcile=False)
    try:
        assert seen and seen[0] == (st.IN_SYNC, 1)
        assert all(state not in (st.ABSENT, st.UNMANAGED) for state, _ in seen)
    finally:
        await again.stop()
