"""Static shards on the local cluster: two `helmdeck controller`s with complementary --watch-label-selectors
each act only on their own Package objects, each holds its own Lease, and a Package relabelled to the other
shard is reconciled by that one from then on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.base.wire import ROLE, SELECTOR, SHARD, SHARD_KEY
from testkit.controller import GROUP, VERSION, create, eventually, get_package, package, releases
from tests.cli.test_cli import helmdeck
from tests.controller_fixtures import ControllerEnv

pytestmark = pytest.mark.cluster


def _owner(env: ControllerEnv, name: str) -> dict[str, Any]:
    obj = get_package(env.objects, env.namespace, name) or {}
    found: dict[str, Any] = (obj.get("status") or {}).get("controller") or {}
    return found


def _leases(env: ControllerEnv) -> dict[str, Any]:
    """The controllers' Leases in the namespace, by shard label."""
    items: Any = env.coordination.list_namespaced_lease(env.namespace, label_selector=f"{ROLE}=controller").items
    return {lease.metadata.labels.get(SHARD, ""): lease for lease in items}


def test_two_shards_each_act_only_on_their_own_packages_and_hold_their_own_lease(
    controller_env: ControllerEnv,
) -> None:
    env = controller_env
    ns = env.namespace
    env.web_source()  # one OCIRepository, unlabelled: each shard reads the sources its Packages name
    one = package(ns, "one", values={"replicas": 1})
    one["metadata"]["labels"] = {SHARD_KEY: "shard1"}
    create(env.objects, one)
    create(env.objects, package(ns, "two", values={"replicas": 1}))
    shard1 = env.start("--watch-label-selector", f"{SHARD_KEY}=shard1", name="shard1")
    main = env.start("--watch-label-selector", f"!{SHARD_KEY}", name="main")

    def logs() -> str:
        return f"--- shard1\n{shard1.text()}\n--- main\n{main.text()}"

    try:
        eventually(lambda: all(releases(env.core, ns, n) == [(1, "deployed")] for n in ("one", "two")), 120,
                   "one and two installed", logs=logs)
        owner_one = eventually(lambda: _owner(env, "one"), 30, "status.controller of one", logs=logs)
        owner_two = eventually(lambda: _owner(env, "two"), 30, "status.controller of two", logs=logs)
        assert owner_one["shard"] == "shard1" and f"-{shard1.pid}-" in owner_one["replica"], owner_one
        assert owner_two["shard"] == "main" and f"-{main.pid}-" in owner_two["replica"], owner_two

        def both() -> dict[str, Any] | None:
            found = _leases(env)
            return found if found.keys() == {"shard1", "main"} else None

        leases = eventually(both, 30, "a Lease per shard", logs=logs)
        assert leases["shard1"].metadata.name != leases["main"].metadata.name
        assert leases["shard1"].metadata.annotations[SELECTOR] == f"{SHARD_KEY}=shard1"
        assert leases["main"].metadata.annotations[SELECTOR] == f"!{SHARD_KEY}"
        assert f"-{shard1.pid}-" in leases["shard1"].spec.holder_identity
        assert f"-{main.pid}-" in leases["main"].spec.holder_identity  # both act at once: no contention

        # helmdeck status -o json names each release's owner: the Package, the replica and the shard.
        # (Asked again while a controller, starved on a loaded machine, let its Lease lapse: then it is not live.)
        def owners() -> dict[str, Any] | None:
            proc = helmdeck("status", "-o", "json", "--kubeconfig", str(env.kubeconfig), "--helm",
                            env.helm.binary, "-n", ns)
            rows = {r["name"]: r["owner"] for r in json.loads(proc.stdout or "[]")}
            return rows if all(rows.get(n, {}).get("kind") == "controller" for n in ("one", "two")) else None

        rows = eventually(owners, 90, "status -o json names both owners", logs=logs)
        assert rows["one"] == {"kind": "controller", "namespace": ns, "name": "one",
                               "replica": owner_one["replica"], "shard": "shard1", "packageSet": None}
        assert rows["two"] == {"kind": "controller", "namespace": ns, "name": "two",
                               "replica": owner_two["replica"], "shard": "main", "packageSet": None}

        # Each acted on its own only (the log names every release an action ran on).
        assert f"{ns}/two:" not in shard1.text() and f"{ns}/one:" in shard1.text()
        assert f"{ns}/one:" not in main.text() and f"{ns}/two:" in main.text()

        # Moved to shard1 (and edited at once): shard1 upgrades it, main lets it go and keeps its release.
        env.objects.patch_namespaced_custom_object(GROUP, VERSION, ns, "packages", "two", {
            "metadata": {"labels": {SHARD_KEY: "shard1"}}, "spec": {"values": {"replicas": 2}}})
        eventually(lambda: releases(env.core, ns, "two") == [(1, "superseded"), (2, "deployed")], 90,
                   "two upgraded after the move", logs=logs)
        eventually(lambda: f"-{shard1.pid}-" in _owner(env, "two").get("replica", "")
                   and _owner(env, "two").get("shard") == "shard1", 30, "shard1 owns two", logs=logs)
        assert releases(env.core, ns, "two") == [(1, "superseded"), (2, "deployed")]  # nothing uninstalled
        upgrades = [line for line in main.text().splitlines() if f"{ns}/two: upgrade" in line]
        assert not upgrades, upgrades
    finally:
        assert shard1.stop() == 0, shard1.text()
        assert main.stop() == 0, main.text()
