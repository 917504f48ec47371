"""Static shards: ``--watch-label-selector`` parsed and validated, the shard's name and its Lease's name."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine.base.label_selector import SelectorError, matches, normalise, parse
from engine.base.wire import CONTROLLER, ROLE, SELECTOR, SHARD, SHARD_KEY, WATCH_NAMESPACES
from engine.runtime.cluster.members import member_lease_name
from engine.runtime.cluster.shard_selector import MAIN, ShardSelectorError, controller_lease, shard_for
from engine.runtime.package_set import cluster_package_set
from helmdeck.parser import EXIT_USAGE

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")


@pytest.mark.parametrize(("selector", "labels", "expected"), [
    (f"{SHARD_KEY}=shard1", {SHARD_KEY: "shard1"}, True),
    (f"{SHARD_KEY}=shard1", {SHARD_KEY: "shard2"}, False),
    (f"{SHARD_KEY}=shard1", {}, False),
    (f"!{SHARD_KEY}", {}, True),
    (f"!{SHARD_KEY}", {SHARD_KEY: "shard1"}, False),
    (f"{SHARD_KEY} notin (shard1,shard2)", {SHARD_KEY: "shard3"}, True),
    (f"{SHARD_KEY} notin (shard1,shard2)", {}, True),  # a missing key holds notin, as Kubernetes
    (f"{SHARD_KEY} in (shard1, shard2),team!=b", {SHARD_KEY: "shard2", "team": "a"}, True),
    (f"{SHARD_KEY} in (shard1, shard2),team!=b", {SHARD_KEY: "shard2", "team": "b"}, False),
    ("team", {"team": ""}, True),
    ("team==a", {"team": "a"}, True),
])
def test_selector_matches_as_kubernetes(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert matches(parse(selector), labels) is expected
    shard = shard_for(selector)
    assert shard is not None and shard.matches(labels) is expected


def test_normal_form_sorts_requirements_and_values() -> None:
    assert normalise(" b in (y, x) , a=1,!c ") == "a=1,b in (x,y),!c"
    assert normalise("a==1") == normalise("a=1") == "a=1"
    assert shard_for("b in (y,x),a=1") == shard_for("a=1, b in (x, y)")


@pytest.mark.parametrize(("selector", "name"), [
    (f"{SHARD_KEY}=shard1", "shard1"),
    (f" {SHARD_KEY} == shard-2 ", "shard-2"),
    (f"{SHARD_KEY} in (shard3)", "shard3"),
    (f"!{SHARD_KEY}", MAIN),
])
def test_shard_names_read_as_flux_shards(selector: str, name: str) -> None:
    shard = shard_for(selector)
    assert shard is not None and shard.name == name


def test_other_selectors_get_a_digest_name_and_no_selector_is_no_shard() -> None:
    shard = shard_for("team=a,tier!=db")
    assert shard is not None and re.fullmatch(r"sel-[0-9a-f]{10}", shard.name)
    assert shard_for(None) is None
    assert shard_for("  ") is None  # an empty selector matches everything: not a shard


def test_lease_names_differ_per_shard_and_namespace_set_and_fit() -> None:
    cluster = cluster_package_set()
    one, two, main = (shard_for(s) for s in (f"{SHARD_KEY}=shard1", f"{SHARD_KEY}=shard2", f"!{SHARD_KEY}"))
    assert one is not None and two is not None and main is not None
    names = {one.lease_name(cluster), two.lease_name(cluster), main.lease_name(cluster), cluster.lease_name}
    assert len(names) == 4  # no two shards (nor the unsharded controller) contend for one Lease
    assert one.lease_name(cluster).startswith("helmdeck-cluster-")
    assert one.lease_name(cluster) == one.lease_name(cluster_package_set())  # stable
    narrowed = cluster_package_set(None, ["team-a"])
    assert one.lease_name(narrowed) != one.lease_name(cluster)
    longest = cluster_package_set("p" * 53)
    for shard in (one, two, main):
        for pset in (cluster, narrowed, longest):
            name = shard.lease_name(pset)
            assert len(name) <= 63 and DNS_LABEL.match(name), name
    assert one.lease_name(longest) != two.lease_name(longest)  # the digest survives the shortening


@pytest.mark.parametrize(("selector", "says"), [
    ("sharding.helmdeck.dev/key=", None),  # an empty value is a value: parses
    ("a=b,,c", "empty requirement"),
    ("a=b,", "empty requirement"),
    ("a in ()", "at least one value"),
    ("a in (b", "not a selector requirement"),
    ("=b", "not a selector requirement"),
    ("a=b=c", "not a selector requirement"),
    ("-a=b", "not a label key"),
    ("a/b/c=d", "not a label key"),
    ("a=" + "v" * 64, "not a label value"),
    ("k" * 64, "not a label key"),
    ("a=é", "not a label value"),
    ("é", "not a label key"),
    ("a" * 5000, "characters long"),
    ("a in (b,-c)", "not a label value"),
])
def test_bad_selectors_name_the_flag_and_the_fix(selector: str, says: str | None) -> None:
    if says is None:
        parse(selector)
        return
    with pytest.raises(SelectorError, match=says):
        parse(selector)
    with pytest.raises(ShardSelectorError) as caught:
        shard_for(selector)
    text = str(caught.value)
    assert text.startswith("--watch-label-selector ") and says in text
    assert f"{SHARD_KEY}=shard1" in text and f"!{SHARD_KEY}" in text  # the fix: how Flux's shards are written
    assert len(text) < 800  # a huge selector is not echoed whole


def test_the_controller_refuses_a_bad_selector_before_it_reaches_the_cluster(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "helmdeck", "controller", "--serviceaccount-dir", str(tmp_path),
                           "--watch-label-selector", f"{SHARD_KEY} in (shard1"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert proc.stderr.startswith("error: --watch-label-selector ") and f"!{SHARD_KEY}" in proc.stderr, proc.stderr


def test_the_controller_refuses_shards_auto_with_a_selector_before_it_reaches_the_cluster(tmp_path: Path) -> None:
    # No kubeconfig and no in-cluster config either: had the flags passed, the error would be about those.
    proc = subprocess.run([sys.executable, "-m", "helmdeck", "controller", "--serviceaccount-dir", str(tmp_path),
                           "--shards", "auto", "--watch-label-selector", f"{SHARD_KEY}=shard1"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith("error: --shards auto and --watch-label-selector ") and "cannot be combined" in first
    assert "drop --watch-label-selector" in first and "drop --shards auto" in first, first  # the fix, both ways
    with pytest.raises(ShardSelectorError, match="cannot be combined"):
        shard_for("", auto=True)  # even an empty one: the flags say two different things
    assert shard_for(None, auto=True) is None


def test_the_controllers_lease_is_made_from_its_options() -> None:
    # The engine makes the controller's Lease (the command line passes its flags): one per package set, a static
    # shard's own, or with --shards auto the replica's membership Lease; each labelled for the app to find it.
    ps = cluster_package_set(None, ["b", "a"])
    one = controller_lease(ps, "ops", watch_namespaces=["a", "b"])
    assert (one.name, one.namespace, one.duration, one.retry) == (ps.lease_name, "ops", 15.0, 2.0)
    assert (one.labels, one.annotations) == (((ROLE, CONTROLLER),), ((WATCH_NAMESPACES, "a,b"),))
    shard = shard_for(f"{SHARD_KEY}=shard1")
    assert shard is not None
    static = controller_lease(ps, "ops", shard=shard, duration=4.0)
    assert (static.name, static.duration, static.retry) == (shard.lease_name(ps), 4.0, 0.8)
    assert static.labels == ((ROLE, CONTROLLER), (SHARD, "shard1"))
    assert static.annotations == ((WATCH_NAMESPACES, ""), (SELECTOR, shard.selector))
    auto = controller_lease(ps, "ops", auto=True)
    assert auto.identity is not None and auto.name == member_lease_name(auto.identity)
    assert (auto.duration, auto.retry, auto.labels) == (5.0, 1.0, ((ROLE, CONTROLLER), (SHARD, "auto")))
    assert auto.annotations == ((WATCH_NAMESPACES, ""),)

