"""Rollback: the operator's ``helm rollback`` to a chosen revision (helm's rollback action).

Unlike RollbackRemediation (which the atomic loop picks after a failed
upgrade, to the previous snapshot of our history) this rolls back to the
revision the operator names, or the previous one (0). The outcome is read
from storage as for every reconciler: success is a new revision stored
``deployed``; helm's error or no new revision is failure. The revisions it
wrote are recorded on the request's status history, so the release stays
ours and is not taken for a change made outside.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from engine.reconcile.action import Reconciler, newer, observed_run, outcome
from engine.reconcile.options import rollback_options
from engine.reconcile.request import Request
from engine.reconcile.status import ActionOutcome


@dataclass
class Rollback(Reconciler):
    """Type ``release``. Never raises for helm failures: a failed rollback is a failed outcome."""

    name = "rollback"
    type = "release"

    revision: int = 0  # 0: the previous revision

    async def reconcile(self, req: Request) -> ActionOutcome:
        ns, release = req.key
        target = self.revision or "previous"
        before = self.latest(req)
        # helm's revision 0 is the one before the latest
        version = self.revision or (before.version - 1 if before is not None else 0)
        opts = rollback_options(req.spec, method=self.apply_method(req, version))
        await self.begin(req, f"rolling back to revision {target}")
        # The monitor is left as it is (as before this reconciler existed): its refresh follows the action.
        seen, error = await observed_run(
            self.ctx, req, lambda _n, _r: contextlib.nullcontext(),
            lambda: self.ctx.helm.rollback(release, ns, self.revision, opts), action=self.name)
        after = newer(seen, before)
        ok = error is None and after is not None and after.status == "deployed"
        if ok and after is not None:
            message = f"rolled back {ns}/{release} to revision {target}: revision {after.version}"
        else:
            message = f"rollback failed: {error.message if error else 'no new revision stored'}"
        self.ctx.events(self.name, "succeeded" if ok else "failed", message, error.tail if error else ())
        return outcome(self.name, ok, message, seen.newest, error)
