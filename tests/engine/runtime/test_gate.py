"""The action gate over an offline engine: every rule, in order, with its one wording."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from engine.runtime import Engine
from engine.runtime.engine import ActionRefused, NotAvailable
from engine.runtime.ledger.gate import ACTIONS, READ_ONLY, ActionGate, Suspended
from engine.runtime.ledger.placed import AllHere
from engine.runtime.state import ReleaseKey
from testkit.fixtures import LEGACY, SETTINGS, WEB, fixed_engine


def online_gate(engine: Engine, **kw: Any) -> ActionGate:
    """The rules of an engine with a cluster, over the fixed engine's book and storage."""
    return ActionGate(engine.book, engine.observer.latest, **kw)


def test_read_only_refuses_every_mutating_action_but_not_reading() -> None:
    gate = online_gate(fixed_engine(), readonly=True)
    assert {gate.why_not(a, WEB) for a in ACTIONS} == {"helmdeck runs read-only: actions are disabled"}
    assert gate.why_not("diff", WEB) is None and gate.why_not("cleanup-plan") is None
    with pytest.raises(ActionRefused, match="read-only"):
        gate.check("upgrade", WEB)


def test_a_follower_names_the_lease_holder() -> None:
    gate = online_gate(fixed_engine(), leader=False)
    gate.set_lease("ops@bastion", False)
    assert gate.why_not("rollback", WEB) == "read-only: ops@bastion holds the engine lease"
    assert not gate.acting
    gate.set_lease("me", True)
    assert gate.acting and gate.why_not("rollback", WEB) is None


def test_offline_only_keeps_its_own_status() -> None:
    engine = fixed_engine()
    assert engine.why_not("suspend", WEB) is None
    assert engine.why_not("upgrade", WEB) == "not connected to a cluster"
    with pytest.raises(NotAvailable):
        engine.check("test", WEB)


def test_package_pending_and_busy_rules() -> None:
    engine = fixed_engine()
    gate = online_gate(engine)
    assert gate.why_not("upgrade", LEGACY) == "no package declares release legacy/legacy-api"
    assert gate.why_not("rollback", LEGACY) is None  # a bare release can be rolled back
    assert gate.why_not("unlock", WEB) == "helmdeck-demo/web is not pending: nothing to unlock"
    assert gate.why_not("unlock", LEGACY) is None  # pending-upgrade

    async def hold() -> None:
        async with engine.book.running(SETTINGS, "upgrade", 300.0):
            assert gate.why_not("test", SETTINGS) == "upgrade is already running on helmdeck-demo/settings"
            assert gate.why_not("suspend", SETTINGS) is None  # does not hold the release
            with pytest.raises(ActionRefused, match="already running"):
                async with engine.book.running(SETTINGS, "test", 300.0):
                    pass
        assert gate.why_not("test", SETTINGS) is None

    asyncio.run(hold())


def test_unknown_actions_are_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown action"):
        fixed_engine().gate.why_not("explode")


def test_cancel_needs_a_running_action_and_stops_its_holder() -> None:
    engine = fixed_engine()
    gate = online_gate(engine)
    assert gate.why_not("cancel", SETTINGS) == "nothing runs on helmdeck-demo/settings: nothing to cancel"
    assert not engine.book.cancel(SETTINGS)

    async def scenario() -> None:
        entered = asyncio.Event()

        async def hold() -> str:
            async with engine.book.running(SETTINGS, "upgrade", 300.0):
                entered.set()
                await asyncio.sleep(60)  # stands for a hung helm
            return "finished"

        task = asyncio.create_task(hold())
        await entered.wait()
        assert gate.why_not("cancel", SETTINGS) is None
        assert engine.book.cancel(SETTINGS)
        await engine.book.released(SETTINGS)
        with pytest.raises(ActionRefused, match="upgrade on helmdeck-demo/settings was cancelled"):
            await task
        assert not task.cancelled() and task.cancelling() == 0  # the holder's task goes on (a queue worker)
        assert gate.why_not("cancel", SETTINGS) is not None and not engine.book.busy(SETTINGS)

    asyncio.run(scenario())


def test_on_a_release_flux_owns_u_l_s_are_fluxs_requests_and_the_rest_flux_would_undo_is_refused() -> None:
    """One decision (engine.runtime.ledger.owners.FLUX_REQUESTS, flux_refusal) for a release a Flux HelmRelease
    owns, here by Flux's labels in its manifest: upgrade, unlock and suspend are Flux's requests (the app's own
    lease does not matter: Flux acts; unlock needs no pending revision, a reset needs none), rollback, uninstall
    and maintenance are refused saying what Flux offers, test stays (Flux's release digest leaves test hooks
    out: helm-controller internal/release/observation.go IgnoreHookTestEvents)."""
    engine = fixed_engine()
    gate = online_gate(engine, leader=False)  # another instance holds the app's lease
    assert gate.flux_owner(LEGACY) is None and gate.why_not("rollback", LEGACY) is not None  # the lease's rule
    view = engine.book.view(LEGACY)
    assert view is not None and view.observation is not None
    # As the observer decodes a manifest carrying Flux's labels.
    engine.book._views[LEGACY] = dataclasses.replace(
        view, observation=dataclasses.replace(view.observation, flux_owner="flux-system/legacy"))
    assert [gate.why_not(a, LEGACY) for a in ("upgrade", "unlock", "suspend")] == [None] * 3
    rollback = gate.why_not("rollback", LEGACY)
    assert rollback is not None and rollback.startswith("Flux rolls back only as upgrade remediation")
    assert "change the chart version or values in Git" in rollback
    uninstall = gate.why_not("uninstall", LEGACY)
    assert uninstall is not None and "delete HelmRelease flux-system/legacy to uninstall" in uninstall
    assert "suspend it (s)" in (gate.why_not("maintenance", LEGACY) or "")
    with pytest.raises(ActionRefused, match="Flux rolls back only"):
        gate.check("rollback", LEGACY)
    assert gate.why_not("test", LEGACY) == "read-only: another instance holds the engine lease"  # helmdeck's own
    assert online_gate(engine, readonly=True).why_not("upgrade", LEGACY) == READ_ONLY
    offline = online_gate(engine, online=False)
    assert offline.why_not("suspend", LEGACY) == "not connected to a cluster"  # a request needs the cluster


def test_a_suspended_package_is_not_reconciled_but_the_operator_may_upgrade_it() -> None:
    engine = fixed_engine()
    gate = online_gate(engine)
    assert gate.suspension(SETTINGS) is None and gate.why_not("reconcile", SETTINGS) is None
    engine.book.update_status(SETTINGS, suspended=True)  # as after D, a rollback or s
    why = gate.suspension(SETTINGS)
    assert why == ("helmdeck-demo/settings is suspended by the operator (suspend, an uninstall or a rollback in "
                   "the app): resume it there (s), or force an upgrade (u)")
    assert gate.why_not("reconcile", SETTINGS) == why
    with pytest.raises(Suspended, match="suspended by the operator"):
        gate.check("reconcile", SETTINGS)
    assert gate.why_not("upgrade", SETTINGS) is None  # forced: it runs and lifts the suspension
    engine.book.update_status(SETTINGS, suspended=False)
    spec = engine.book.packages[SETTINGS]
    engine.book.packages[SETTINGS] = dataclasses.replace(spec, suspend=True)
    assert gate.suspension(SETTINGS) == f"helmdeck-demo/settings is suspended (spec.suspend: true in {spec.file.name})"
    with pytest.raises(ActionRefused):  # Suspended is an ActionRefused: callers that only refuse still do
        gate.check("reconcile", SETTINGS)


class _Elsewhere(AllHere):
    """Shards placing WEB on replica b."""

    refusals = {WEB: "Package helmdeck-demo/web is placed on controller replica b (--shards auto)"}

    def why_not(self, key: ReleaseKey) -> str | None:
        return self.refusals.get(key)

    def placed_elsewhere(self, key: ReleaseKey) -> str | None:
        return {WEB: "b"}.get(key)


def test_shards_refuse_what_holds_a_release_placed_or_claimed_elsewhere() -> None:
    engine = fixed_engine()
    assert online_gate(engine).placed_elsewhere(WEB) is None  # not sharded: every package is this engine's
    refusals = _Elsewhere.refusals
    gate = online_gate(engine, placed=_Elsewhere())
    assert gate.placed_elsewhere(WEB) == "b" and gate.placed_elsewhere(SETTINGS) is None
    for action in ("upgrade", "reconcile", "rollback", "test", "unlock", "uninstall", "maintenance"):
        why = gate.why_not(action, WEB)
        assert why == refusals[WEB] or (action == "unlock" and why is not None), (action, why)
    assert gate.why_not("upgrade", SETTINGS) is None  # placed here
    assert gate.why_not("diff", WEB) is None and gate.why_not("suspend", WEB) is None  # nothing run on it
    with pytest.raises(ActionRefused, match="replica b"):
        gate.check("reconcile", WEB)
    assert gate.placed_here(SETTINGS) and not gate.placed_here(WEB)


def test_a_replica_standing_by_for_its_lease_reconciles_no_package() -> None:
    gate = online_gate(fixed_engine())
    assert gate.placed_here(WEB)  # no Lease: this engine reconciles every package
    gate.set_lease("ctl-0", False)  # another replica of the shard holds it (helmdeck_releases counts none here)
    assert not gate.placed_here(WEB) and not gate.placed_here(SETTINGS)
    gate.set_lease("ctl-1", True)
    assert gate.placed_here(WEB)
