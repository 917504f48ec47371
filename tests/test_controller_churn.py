"""Never two actors on a release (issue 21): replicas of ``helmdeck controller`` as processes over Packages whose
upgrades take seconds, one SIGKILLed, another SIGSTOPped mid-upgrade for longer than its Lease then continued, a
new one started, specs edited throughout; the audit (tests/release_audit.py) of helm's storage, the Events and the
helm processes finds no overlapping actions, no "another operation is in progress", no release left pending and
every Package converged. A few Packages here (the suite stays fast); bench/controller_churn.py runs 300."""

from __future__ import annotations

import time

import pytest
from kubernetes import client

from tests.churn import Churn, run_churn
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
