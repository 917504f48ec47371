"""Never two actors on a release (issue 21): replicas of ``helmdeck controller`` as processes over Packages whose
upgrades take seconds, one SIGKILLed, another SIGSTOPped mid-upgrade for longer than its Lease then continued, a
new one started, specs edited throughout; the audit (testkit/release_audit.py) of helm's storage, the Events and the
helm processes finds no overlapping actions, no "another operation is in progress", no release left pending and
every Package converged. A few Packages here (the suite stays fast); bench/controller_churn.py runs 300."""

from __future__ import annotations

import signal
import time
from typing import Any

import pytest
from kubernetes import client

from engine.base.wire import SHARD
from engine.runtime.cluster.members import AUTO
from engine.runtime.ledger.placement import assign, package_name
from testkit.churn import Churn, Replica, ready_now, run_churn
from testkit.controller import GROUP, VERSION, eventually, releases
from tests.controller_fixtures import ControllerEnv

pytestmark = pytest.mark.cluster
PACKAGES = 12


@pytest.mark.timeout(600)  # a few minutes under this machine's load
@pytest.mark.parametrize("mode", [pytest.param(("--shards", "auto"), id="auto")])
def test_no_release_is_acted_on_by_two_replicas_through_kills_pauses_and_edits(
    controller_env: ControllerEnv, mode: tuple[str, ...],
) -> None:
    env = controller_env
    churn = Churn(env.objects.api_client, env.kubeconfig, env.namespace, env.helm, env.work, env.registry,
                  extra=mode, lease=10.0)
    try:
        result = run_churn(churn, PACKAGES, delay=3, edit_every=1.0, tail=10.0, timeout=240.0)
    finally:
        churn.stop()
    assert result.edits > 10  # edits happened throughout
    assert sum(result.actions.values()) >= PACKAGES + 5
    assert result.findings == [], "\n".join(map(str, result.findings)) + "\n" + churn.tails()


def test_the_audit_finds_two_controllers_acting_on_the_same_releases(
    controller_env: ControllerEnv, core_api: client.CoreV1Api,
) -> None:
    # Two controllers whose Leases live in different namespaces both act on every Package: what the audit exists
    # to catch must be caught.
    env = controller_env
    elsewhere = f"{env.namespace[:50]}-lease"
    core_api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=elsewhere)))
    churn = Churn(env.objects.api_client, env.kubeconfig, env.namespace, env.helm, env.work, env.registry)
    try:
        names = churn.packages(3, delay=2)
        churn.start("a")
        churn.extra = ("--lease-namespace", elsewhere)
        churn.start("b")
        for _ in range(6):
            for name in names:
                churn.edit(name)
            time.sleep(2.5)
        time.sleep(5)  # (they never converge: each undoes what the other wrote)
        findings = churn.audit()
    finally:
        churn.stop()
        core_api.delete_namespace(elsewhere)
    kinds = {f.kind for f in findings}
    assert kinds & {"overlap", "in-progress"}, "\n".join(map(str, findings))


def _identity(env: ControllerEnv, replica: Replica) -> str:
    """The replica's identity, as its membership Lease names it (its default identity holds its pid)."""
    items: Any = env.coordination.list_namespaced_lease(env.namespace, label_selector=f"{SHARD}={AUTO}").items
    return next((str(x.spec.holder_identity) for x in items
                 if f"-{replica.ctl.pid}-" in str(x.spec.holder_identity or "")), "")


@pytest.mark.timeout(600)
def test_one_edit_is_one_upgrade_when_a_replica_is_paused_while_its_upgrades_run(controller_env: ControllerEnv) -> None:
    # Issue 32: two --shards auto replicas; every Package edited once; the replica running upgrades is SIGSTOPped
    # (its helm processes, not stopped, finish meanwhile) until the other has taken every Package over, then
    # continued and given its share back. The revisions its helm made are the edit's one upgrade: the replica
    # taking over records them from storage, the resumed one upgrades nothing again. Decided on storage and the
    # Packages' statuses, never on how long anything took.
    env = controller_env
    churn = Churn(env.objects.api_client, env.kubeconfig, env.namespace, env.helm, env.work, env.registry,
                  extra=("--shards", "auto", "--concurrency", "8"), lease=10.0)
    names = churn.packages(6, delay=1, timeout="30s")
    try:
        a, b = churn.start("a"), churn.start("b")
        churn.wait_ready(len(names), 240)
        ids = eventually(lambda: (lambda found: found if all(found.values()) else None)(
            {r.name: _identity(env, r) for r in (a, b)}), 60, "both membership Leases", logs=churn.tails)
        for name in names:  # one edit each; its upgrade waits minReadySeconds (8 s) for the new pod
            churn.objects.patch_namespaced_custom_object(GROUP, VERSION, env.namespace, "packages", name,
                                                         {"spec": {"values": {"delay": 8, "value": "e1"}}})
        sleeper = churn.acting("upgrade", timeout=120)
        assert sleeper is not None, "no replica ran an upgrade\n" + churn.tails()
        other = b if sleeper is a else a
        sleeper.ctl.proc.send_signal(signal.SIGSTOP)
        sleeper.paused.append((time.time(), float("inf")))
        churn.say(f"  SIGSTOP {sleeper.name} with {churn.running('upgrade').get(sleeper.ctl.pid, 0)} upgrades running")

        def statuses() -> list[dict[str, Any]]:
            body: Any = churn.objects.list_namespaced_custom_object(GROUP, VERSION, env.namespace, "packages")
            return list(body.get("items") or ())

        def written_by(placed: dict[str, str]) -> bool:
            """Every Package Ready at its generation, unclaimed, its status written by the replica ``placed``
            names."""
            found = {obj["metadata"]["name"]: obj for obj in statuses()}
            return all(n in found and ready_now(found[n]) and not found[n]["status"].get("claim")
                       and (found[n]["status"].get("controller") or {}).get("replica") == placed[n] for n in names)

        # The other replica takes every Package over (the sleeper's Lease lapses) and converges them; the
        # sleeper's helm processes end on their own.
        eventually(lambda: written_by(dict.fromkeys(names, ids[other.name])) and
                   not churn.running().get(sleeper.ctl.pid), 240, f"{other.name} reconciled every Package",
                   every=1.0, logs=churn.tails)
        sleeper.ctl.proc.send_signal(signal.SIGCONT)
        sleeper.paused[-1] = (sleeper.paused[-1][0], time.time())
        churn.say(f"  SIGCONT {sleeper.name}")
        # The sleeper gets its share back: it passes each (the status it writes names it).
        placed = assign([package_name(env.namespace, n) for n in names], list(ids.values()))
        eventually(lambda: written_by({n: placed[package_name(env.namespace, n)] for n in names}), 240,
                   f"{sleeper.name} reconciled its share again", every=1.0, logs=churn.tails)
        findings = churn.audit()
    finally:
        churn.stop()
    stored = {n: releases(env.core, env.namespace, n) for n in names}
    assert all(revisions == [(1, "superseded"), (2, "deployed")] for revisions in stored.values()), stored
    assert findings == [], "\n".join(map(str, findings)) + "\n" + churn.tails()
