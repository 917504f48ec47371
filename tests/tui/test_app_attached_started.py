"""The app attached to a real `helmdeck controller` on the local cluster shows the controller's running action
from its ``<Action>Started`` Event: a `helm test` (which writes no pending revision, so storage alone would show
nothing running) is `⟳ test` in the row and the Overview while it runs, and no longer once its end Event came."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import pytest
from kubernetes import client
from textual.css.query import NoMatches
from textual.widgets import Static

from engine.kube.client import KubeTarget
from engine.runtime.assemble import build_engine
from testkit.controller import create, package
from tests.conftest import EXAMPLES
from tests.controller_fixtures import ControllerEnv
from tests.tui.test_app_pilot import SIZE, cell, row, select, wait_for
from tui.app import HelmdeckApp

pytestmark = pytest.mark.cluster

# Seconds the chart's failing test Job would live: longer than the package's helm timeout, so the test action
# runs until this test ends it (the Job's activeDeadlineSeconds cut to 1: :func:`_end_test`), whatever the load.
TEST_DEADLINE = 600


def _slow_failing_test_chart(work: Path) -> Path:
    """The flaky example chart whose `helm test` Job (``testFail``: never scheduled) fails only after
    :data:`TEST_DEADLINE` seconds, not 2."""
    chart = work / "chart" / "flaky"
    shutil.copytree(EXAMPLES / "charts" / "flaky", chart)
    hook = chart / "templates" / "tests" / "test.yaml"
    text = hook.read_text()
    assert "activeDeadlineSeconds: 2\n" in text
    hook.write_text(text.replace("activeDeadlineSeconds: 2\n", f"activeDeadlineSeconds: {TEST_DEADLINE}\n"))
    return chart


def _end_test(env: ControllerEnv, release: str) -> None:
    """Fail the release's running test Job now: its deadline cut to 1 s (a Job's activeDeadlineSeconds may be
    changed while it runs), so the Job controller fails it and `helm test` ends."""
    client.BatchV1Api(env.core.api_client).patch_namespaced_job(
        f"{release}-test", env.namespace, {"spec": {"activeDeadlineSeconds": 1}})


async def test_the_row_and_the_overview_show_the_controllers_started_test_as_running(
    controller_env: ControllerEnv, kube_target: KubeTarget, tmp_path: Path,
) -> None:
    env = controller_env
    objects, core, namespace, helm = env.objects, env.core, env.namespace, env.helm
    env.flaky_source(_slow_failing_test_chart(tmp_path))
    create(objects, package(namespace, "flaky", timeout="2m", test={"enable": True}, values={"testFail": True}))
    ctl = env.start()
    key = (namespace, "flaky")
    app = HelmdeckApp(build_engine(kube_target, helm, None, namespaces=[namespace], attach=True), context="test")

    def overview() -> str:
        try:
            return str(app.screen.query_one("#overview-text", Static).render())
        except NoMatches:
            return ""

    try:
        async with app.run_test(size=SIZE) as pilot:
            # Installed (deployed: no pending revision), then tested: the row runs the test from its Event.
            await wait_for(lambda: cell(app, key, "status") == "✔ deployed"
                           and (cell(app, key, "action") or "").startswith("⟳ test"), 120,
                           seen=lambda: (row(app, key), ctl.text()[-3000:]))
            view = app.client.release(key)
            assert view is not None and view.running is not None and view.running.action == "test"
            assert view.observation is not None and not view.observation.is_pending
            assert view.running.timeout == 120  # the package's helm timeout
            events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=flaky").items
            assert any(e.reason == "TestStarted" and e.action == "test" for e in events)
            await select(app, key)
            await pilot.press("enter")
            await wait_for(lambda: "⟳ test" in overview(), 30, seen=overview)
            # Its end Event (the Job failed at its deadline): nothing runs any more, in the Overview too.
            _end_test(env, "flaky")
            await wait_for(lambda: "⟳ test" not in overview() and "Running" not in overview(), 60,
                           seen=lambda: (overview(), ctl.text()[-2000:]))
            view = app.client.release(key)
            assert view is not None and view.running is None
            assert view.last is not None and view.last.action == "test" and not view.last.ok
    finally:
        ctl.stop(signal.SIGKILL)
