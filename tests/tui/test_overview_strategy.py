"""The Overview's failure counters say what a failure leads to: the retries allowed, or under RetryOnFailure
(``install/upgrade.strategy``) the interval it is retried at, with no retry budget (issue 34, behaviour 3)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from engine.package.model import InstallSpec, PackageSpec, UpgradeSpec
from engine.runtime.state import ReleaseView
from tui.widgets.overview import overview_content


def test_the_overview_says_retry_on_failure_s_interval() -> None:
    spec = PackageSpec(Path("app.yaml"), "app", "ns", Path("chart"), "app")
    text = str(overview_content(ReleaseView("ns", "app", package=spec), [], 0.0))
    assert "(retries allowed: install 0, upgrade 0; negative = unlimited)" in text
    retrying = dataclasses.replace(spec, install=InstallSpec(retries=2, on_failure="RetryOnFailure"),
                                   upgrade=UpgradeSpec(on_failure="RetryOnFailure", retry_interval=90.0))
    text = str(overview_content(ReleaseView("ns", "app", package=retrying), [], 0.0))
    assert ("(retries allowed: install unlimited (RetryOnFailure, every 5m0s), "
            "upgrade unlimited (RetryOnFailure, every 1m30s); negative = unlimited)") in text
