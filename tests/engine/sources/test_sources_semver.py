"""Version ranges as Helm resolves them (Masterminds/semver v3 semantics).

The table in data/semver_cases.json holds, for each range, the versions the Go
library itself accepted (computed once with Masterminds/semver v3.5.0).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.sources.semver import Range, SemverError, Version, newest_match, sort_newest_first

CASES = json.loads((Path(__file__).parents[2] / "data" / "semver_cases.json").read_text())


@pytest.mark.parametrize("case", CASES["cases"], ids=lambda c: repr(c["range"]))
def test_range_matches_masterminds(case: dict[str, object]) -> None:
    if case.get("error"):
        with pytest.raises(SemverError):
            Range.parse(str(case["range"]))
        return
    rng = Range.parse(str(case["range"]))
    got = [v for v in CASES["versions"] if rng.allows(Version.parse(v))]
    assert got == case["match"]


def test_version_order_follows_semver_precedence() -> None:
    ordered = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
               "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.10.0", "2.0.0"]
    parsed = [Version.parse(v) for v in ordered]
    assert sorted(reversed(parsed)) == parsed
    assert Version.parse("1.2.3+a") == Version.parse("1.2.3+b")
    assert Version.parse("v1.2") == Version.parse("1.2.0")


@pytest.mark.parametrize("bad", ["", "1.2.3.4", "latest", "1.0.0-01", "1.0.0-", "x" * 300])
def test_bad_versions_are_refused(bad: str) -> None:
    with pytest.raises(SemverError):
        Version.parse(bad)


def test_newest_match_as_helm() -> None:
    tags = ["0.9.0", "1.0.0", "1.4.0", "1.5.0-rc.1", "2.0.0", "latest"]
    assert newest_match(tags, "^1.0.0") == "1.4.0"  # newest inside, the pre-release left out
    assert newest_match(tags, ">=1.5.0-0 <2.0.0") == "1.5.0-rc.1"  # a range naming a pre-release
    assert newest_match(tags, "*") == "2.0.0"
    assert newest_match(tags, "") == "2.0.0"
    assert newest_match(tags, "latest") == "latest"  # exact match first, as helm
    assert newest_match(tags, "~3.0") is None
    with pytest.raises(SemverError):
        newest_match(tags, "not a range")


def test_sort_newest_first_drops_non_versions() -> None:
    assert sort_newest_first(["1.0.0", "latest", "1.10.0", "1.2.0-rc.1", "1.2.0"]) == [
        "1.10.0", "1.2.0", "1.2.0-rc.1", "1.0.0"]


def test_range_limits() -> None:
    with pytest.raises(SemverError, match="longer"):
        Range.parse(">=1.0.0 " * 100)
    with pytest.raises(SemverError, match="groups"):
        Range.parse(" || ".join(["1.0.0"] * 40))


def test_an_oci_repository_semver_is_only_a_range() -> None:
    # source-controller ocirepository_controller.go getTagBySemver: no exact match first (a HelmRepository's
    # chart version has one: chart_repository.go getChartVersion)
    assert newest_match(["latest", "1.0.0"], "latest") == "latest"
    with pytest.raises(SemverError):
        newest_match(["latest", "1.0.0"], "latest", exact=False)
    assert newest_match(["1.2", "1.0.0"], "1.2") == "1.2"  # exact, though no chart version
    assert newest_match(["1.2", "1.0.0"], "*", exact=False) == "1.0.0"  # 1.2: ParseVersion wants three parts
