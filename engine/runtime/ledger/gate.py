"""The action gate: the one place deciding whether an operator action may run now, and why not.

The engine's actions, the CLI and the app all ask it, so a refusal reads the
same everywhere. Rules, in the order they are checked:

1. read-only: ``--readonly`` removes every mutating action;
2. lease: with a lease configured only its holder acts (as controller-runtime's
   leader election), the others watch read-only;
3. capability: an engine without a cluster (offline: fixtures, snapshots)
   cannot act on one;
4. no package: actions that need the package's spec (upgrade, suspend,
   maintenance, render, diff, versions); versions also needs a chart from a repository;
5. Flux owns it: a release a Flux HelmRelease owns (:func:`engine.runtime.ledger.owners.owner_of`: its object
   seen in the cluster, its document's HelmRelease there, or Flux's labels in its manifest) is Flux's to act on:
   the keys :data:`~engine.runtime.ledger.owners.FLUX_REQUESTS` names are Flux's own requests on the object
   (upgrade, unlock, suspend; this app's lease does not matter, Flux acts; a reconcile asked of a suspended
   HelmRelease is refused, as the flux CLI refuses it), the rest Flux would undo are refused saying what Flux
   offers instead (:func:`~engine.runtime.ledger.owners.flux_refusal`); on a cluster its last discovery found not
   serving the HelmRelease API, Flux's requests are refused saying so
   (:func:`~engine.runtime.ledger.owners.flux_unserved_reason`) before anything is asked. The work queue's pass
   (``reconcile``) still runs: it looks at the cluster again and acts only once Flux no longer owns the release;
   Stored apart: a release stored in another namespace than its own (a HelmRelease's, as Flux stores it:
   api/v2 ``GetStorageNamespace``) cannot be acted on with helm's CLI: the operator's helm actions on it
   (upgrade, rollback, test, maintenance, uninstall) are refused, saying why and what to do
   (:func:`engine.package.identity.storage_apart_reason`; the pass stalls likewise before any helm action);
6. pending: unlock needs a release held pending (``pending-*``, as Helm's
   ``IsPending``);
7. busy: at most one action of this engine runs on a release;
8. idle: cancel needs an action of this engine running on the release;
9. suspended: a ``reconcile`` (a pass nobody forced: the work queue's, ``reconcile --once``'s, one the
   monitor asks for) does not run on a suspended package, by its file's ``spec.suspend: true`` or by
   the operator (the app's suspend, an uninstall with ``D``, a hand rollback; kept in its status), as
   Flux skips a suspended HelmRelease. ``plan`` reads the same rule. The operator's forced upgrade
   (``upgrade``) still runs and lifts the suspension, as ``flux reconcile --force`` after a resume.

10. shards (checked after rule 7): with ``helmdeck controller --shards auto`` an action holding the release
   runs only on the replica the package is placed on, and not while another live member holds its actor claim
   (:mod:`engine.runtime.ledger.claims`; the claim write before each helm action decides again,
   :mod:`engine.runtime.cluster.shards`).

Attached to a controller (the release's package is a Package object a live ``helmdeck controller``
reconciles, :mod:`engine.runtime.cockpit.attach`), the same rules decide, and the controller carries the action
out (a request on the object): rule 1 holds; rule 2 (this app's own lease) does not apply; the controller
takes requests for upgrade, rollback, unlock, cancel, the monitor, and suspend, maintenance and a version
pinned (the object's spec): any other action is refused naming what to do instead (:func:`controller_refusal`); unlock
needs a pending release (rule 5) and cancel an action of the controller's running (its pending revision).

``diff``, ``render`` and ``cleanup-plan`` change nothing: rules 1 and 2 do not apply to them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

from engine.package.identity import storage_apart_reason
from engine.runtime.ledger.book import ActionRefused, NotAvailable, ReleaseBook, busy_reason
from engine.runtime.ledger.owners import (
    FLUX_REQUESTS,
    Owner,
    flux_refusal,
    flux_suspended_reason,
    flux_unserved_reason,
    owner_of,
)
from engine.runtime.ledger.placed import ALL_HERE, Placed
from engine.runtime.state import Attached, ReleaseKey
from engine.storage.observation import Observation

# Mutating actions, by the name the app's keys use.
ACTIONS = (
    "upgrade", "rollback", "test", "monitor", "maintenance", "suspend", "unlock", "cleanup", "uninstall", "cancel",
    "versions",  # pick a chart version from the package's repository: pins it in the package file
    "reconcile",  # a pass nobody forced (queue, --once, the monitor's): refused while suspended
)
# Actions that only read ("cleanup-plan": what cleanup would remove).
READING = ("diff", "render", "cleanup-plan")
# What an engine without a cluster can do: keep its own status (it holds fixed storage records only).
_OFFLINE_OK = frozenset({"suspend"})
_NEEDS_PACKAGE = frozenset({"upgrade", "reconcile", "suspend", "maintenance", "render", "diff", "versions"})
# The operator's actions that run helm's CLI on the release (refused on a release stored apart).
_RUNS_HELM = frozenset({"upgrade", "rollback", "test", "maintenance", "uninstall"})
# Actions that hold the release's running-action guard.
_HOLDS_RELEASE = frozenset({"upgrade", "reconcile", "rollback", "test", "unlock", "uninstall", "maintenance"})

READ_ONLY = "helmdeck runs read-only: actions are disabled"
OFFLINE = "not connected to a cluster"


def is_pending(latest: Observation | None) -> bool:
    """True while an operation holds the release (its latest revision is ``pending-*``)."""
    return latest is not None and latest.is_pending


def not_pending_reason(key: ReleaseKey) -> str:
    return f"{key[0]}/{key[1]} is not pending: nothing to unlock"


def no_package_reason(key: ReleaseKey) -> str:
    return f"no package declares release {key[0]}/{key[1]}"


def local_chart_reason(key: ReleaseKey) -> str:
    return (f"{key[0]}/{key[1]} uses a local chart: versions are listed for a chart from a HelmRepository "
            "or OCIRepository")


# The app's actions a controller takes as requests on a Package object (engine.runtime.cluster.annotation_requests;
# suspend and maintenance as the spec's own fields); "reconcile" is the pass after a pin.
CONTROLLER_TAKES = frozenset({"upgrade", "reconcile", "rollback", "unlock", "cancel", "monitor", "suspend",
                              "maintenance", "versions"})


def controller_refusal(action: str, found: Attached) -> str | None:
    """Why the controller cannot carry ``action`` out on the Package object of ``found`` (None: it can)."""
    if action in CONTROLLER_TAKES:
        return None
    ns, name = found.ref
    whose = f"Package {ns}/{name} is reconciled by helmdeck controller {found.controller}"
    if action in READING:
        return f"{whose}: it renders the chart; this app does not (kubectl describe pkg -n {ns} {name})"
    if action == "uninstall":
        return f"{whose}: delete the object to uninstall (kubectl delete pkg -n {ns} {name}; its finalizer uninstalls)"
    if action == "test":
        return f"{whose}: it takes no test request (spec.test runs the tests after each install and upgrade)"
    return f"{whose}: {action} is not one of its requests"


class Suspended(ActionRefused):
    """A reconcile refused because the package is suspended (rule 9): it rests, nothing is retried."""


@dataclass(eq=False, repr=False)
class ActionGate:
    """Decides for one engine; ``readonly``, ``online`` and the lease holder are its own state.

    ``book`` tells packages and running actions; ``latest`` gives the
    latest stored revision of a release (for the pending rule).
    """

    _book: ReleaseBook
    _latest: Callable[[str, str], Observation | None]
    _: KW_ONLY
    readonly: bool = False
    online: bool = True
    leader: bool = True
    holder: str = field(init=False, default="")  # who holds the lease when another instance does
    # The Package object of a release a live controller reconciles (None: this engine carries actions out).
    attached: Callable[[ReleaseKey], Attached | None] | None = None
    # Shards (rule 10): why this replica may not act on a release now, and the member the release's package is
    # placed on when another (engine.runtime.cluster.shards); ALL_HERE: no shards.
    placed: Placed = ALL_HERE
    # Does the cluster serve Flux's HelmRelease API, as the Flux cockpit's last discovery said
    # (engine.runtime.cockpit.flux FluxCockpit.served; None: not known yet). None (no cockpit), or not known: the
    # request finds out (FluxClient.request).
    flux_served: Callable[[], bool | None] | None = None

    @property
    def acting(self) -> bool:
        """True when this instance may change the cluster (not read-only, and holding the lease if any)."""
        return not self.readonly and self.leader

    def placed_elsewhere(self, key: ReleaseKey) -> str | None:
        """The controller replica ``key``'s package is placed on when it is another (``--shards auto``), else
        None."""
        return self.placed.placed_elsewhere(key)

    def placed_here(self, key: ReleaseKey) -> bool:
        """Does this instance reconcile ``key``'s package: it holds the engine lease (a replica standing by for
        its shard's Lease does not; no Lease: it does) and ``--shards auto`` places the package on no other
        member."""
        return self.leader and self.placed_elsewhere(key) is None

    def set_lease(self, holder: str, leader: bool) -> None:
        """Who holds the engine lease, and whether it is this instance."""
        self.holder = holder
        self.leader = leader

    def suspension(self, key: ReleaseKey) -> str | None:
        """Why ``key``'s package is suspended (rule 9), None when it is not. The book keeps the state
        (:meth:`ReleaseBook.suspended`); this is the one wording and the one check every path asks."""
        if not self._book.suspended(key):
            return None
        spec = self._book.packages.get(key)
        if spec is not None and spec.suspend:
            return f"{key[0]}/{key[1]} is suspended (spec.suspend: true in {spec.declared_in})"
        return (f"{key[0]}/{key[1]} is suspended by the operator (suspend, an uninstall or a rollback in the "
                "app): resume it there (s), or force an upgrade (u)")

    def why_not(self, action: str, key: ReleaseKey | None = None) -> str | None:
        """None when ``action`` may run now (on ``key``, if given), else why not in one sentence.

        Without ``key`` only the rules that do not depend on a release apply.
        Raises ValueError for an action the gate does not know.
        """
        if action not in ACTIONS and action not in READING:
            raise ValueError(f"unknown action {action!r}")
        found = self.attached(key) if key is not None and self.attached is not None else None
        flux = self.flux_owner(key) if key is not None and found is None else None
        # Flux decides (rule 5): its requests and what it would undo; the rest is helmdeck's own (test, diff)
        fluxs = flux is not None and (action in FLUX_REQUESTS
                                      or flux_refusal(action, f"{flux.namespace}/{flux.name}") is not None)
        if action in ACTIONS:
            if self.readonly:
                return READ_ONLY
            if not self.leader and found is None and not fluxs:
                return f"read-only: {self.holder or 'another instance'} holds the engine lease"
        if not self.online and (action not in _OFFLINE_OK or flux is not None):
            return OFFLINE
        if key is None:
            return None
        if found is not None:
            return self._for_controller(action, key, found)
        if flux is not None and fluxs:
            return self._for_flux(action, key, flux)
        if action in _NEEDS_PACKAGE and key not in self._book.packages:
            return no_package_reason(key)
        if action == "versions" and self._book.packages[key].chart_request is None:
            return local_chart_reason(key)
        if action in _RUNS_HELM:
            refused = storage_apart_reason(action, key, self._storage_ns(key))
            if refused is not None:
                return refused
        if action == "unlock" and not is_pending(self._latest(*key)):
            return not_pending_reason(key)
        if action == "cancel" and not self._book.busy(key):
            return f"nothing runs on {key[0]}/{key[1]}: nothing to cancel"
        if action in _HOLDS_RELEASE and self._book.busy(key):
            view = self._book.view(key)
            return busy_reason(key, view.running if view else None)
        if action in _HOLDS_RELEASE:
            refused = self.placed.why_not(key)
            if refused is not None:
                return refused
        if action == "reconcile":
            return self.suspension(key)
        return None

    def _storage_ns(self, key: ReleaseKey) -> str:
        """Where ``key``'s release is stored: as its package says, else where its latest revision was read."""
        spec = self._book.packages.get(key)
        if spec is not None:
            return spec.storage_ns
        latest = self._latest(*key)
        return latest.storage_namespace if latest is not None else key[0]

    def flux_owner(self, key: ReleaseKey) -> Owner | None:
        """The Flux HelmRelease owning ``key``'s release (rule 5), None when Flux does not own it."""
        view = self._book.view(key)
        owner = owner_of(view) if view is not None else None
        return owner if owner is not None and owner.kind == "flux" else None

    def _for_flux(self, action: str, key: ReleaseKey, owner: Owner) -> str | None:
        ref = f"{owner.namespace}/{owner.name}"
        if action not in FLUX_REQUESTS:
            return flux_refusal(action, ref)
        if self.flux_served is not None and self.flux_served() is False:  # known: refused before the confirmation
            return flux_unserved_reason(ref)
        view = self._book.view(key)
        flux = view.flux if view is not None else None
        if FLUX_REQUESTS[action] != "suspend" and flux is not None and flux.suspended:
            return flux_suspended_reason(ref)
        return None

    def _for_controller(self, action: str, key: ReleaseKey, found: Attached) -> str | None:
        refused = controller_refusal(action, found)
        if refused is not None:
            return refused
        if action == "unlock" and not is_pending(self._latest(*key)):
            return not_pending_reason(key)
        if action == "cancel" and not is_pending(self._latest(*key)):
            return f"nothing runs on {key[0]}/{key[1]} (no pending revision of the controller's): nothing to cancel"
        return None

    def check(self, action: str, key: ReleaseKey | None = None) -> None:
        """Raise when :meth:`why_not` gives a reason: NotAvailable when this engine cannot do it at all
        (offline), Suspended for a reconcile of a suspended package, else ActionRefused."""
        why = self.why_not(action, key)
        if why is None:
            return
        if why == OFFLINE:
            raise NotAvailable(why)
        if action == "reconcile" and key is not None and why == self.suspension(key):
            raise Suspended(why)
        raise ActionRefused(why)
