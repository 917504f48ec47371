"""Test: ``helm test`` on the current release (Flux's Test reconciler).

The outcome comes from the test hooks' phases in storage. A failure counts
against the active remediation unless the package ignores test failures.
"""

from __future__ import annotations

from engine.reconcile import conditions as cond
from engine.reconcile.action import Reconciler, count_failure, observed_run, outcome, release_ref
from engine.reconcile.errors import ActionFailed
from engine.reconcile.options import kube_user
from engine.reconcile.request import Request
from engine.reconcile.status import ActionOutcome


class Test(Reconciler):
    """Type ``test``."""

    __test__ = False  # not a pytest test class
    name = "test"
    type = "test"

    async def reconcile(self, req: Request) -> ActionOutcome:
        spec = req.spec
        ns, release = req.key
        timeout = spec.action_timeout("test")
        await self.begin(req, "running helm test")
        seen, error = await observed_run(
            self.ctx, req, self.ctx.paused,
            lambda: self.ctx.helm.test(release, ns, timeout=timeout, filters=spec.test.helm_filters(),
                                       kube_as_user=kube_user(spec)), action=self.name)
        current = seen.newest
        if current is None:
            raise ActionFailed(f"helm test: release {release_ref(req, None)} is not in storage")
        tests = [h for h in current.hooks if h.is_test]
        failed = [h.name for h in tests if h.phase == "Failed"]
        ref = release_ref(req, current.version)
        if error is not None or failed:
            what = ", ".join(failed) if failed else (error.message if error else "")
            message = self.failed(req, f"Helm test failed for release {ref}: {what}",
                                  (cond.TEST_SUCCESS, False, cond.TEST_FAILED), error)
            if not spec.test.ignore_failures:
                count_failure(req)
            return outcome(self.name, False, message, current, error)
        message = f"Helm test succeeded for release {ref}: {f'{len(tests)} test(s)' if tests else 'no tests'}"
        return self.succeeded(req, message, current, (cond.TEST_SUCCESS, True, cond.TEST_SUCCEEDED))
