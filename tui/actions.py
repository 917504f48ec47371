"""The catalogue of operator actions: one entry per key, shared by footer, help and command palette."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True)
class ActionInfo:
    """A mutating action: its Textual action name, keys, labels and the engine capability it needs."""

    name: str
    keys: str
    label: str
    capability: str
    summary: str

    @property
    def key_display(self) -> str:
        """``u`` or ``D / ctrl+d`` for help texts."""
        return " / ".join(self.keys.split(","))


ACTIONS: tuple[ActionInfo, ...] = (
    ActionInfo("upgrade", "u", "Upgrade", "upgrade",
               "Upgrade now (a forced reconcile); shows what would change first when the engine can tell, "
               "and asks when the package is in maintenance"),
    ActionInfo("rollback", "r", "Rollback", "rollback",
               "Roll back to a revision you pick; asks, naming both revisions; the package is then suspended "
               "so the engine does not undo it"),
    ActionInfo("test", "t", "Test", "test", "Run the release's helm tests"),
    ActionInfo("monitor", "p", "Pause", "monitor",
               "Pause the resource monitor, or resume it one step (pauses are counted)"),
    ActionInfo("maintenance", "m", "Maint", "maintenance",
               "Enter or leave maintenance mode (NoResourceReconciliation); asks, explaining what it means"),
    ActionInfo("suspend", "s", "Suspend", "suspend", "Suspend or resume reconciliation of the package"),
    ActionInfo("unlock", "l", "Unlock", "unlock", "Unlock a release stuck in a pending state; asks first"),
    ActionInfo("cleanup", "c", "Cleanup", "cleanup",
               "Uninstall helmdeck-managed releases no package declares; lists them and asks first"),
    ActionInfo("uninstall", "D,ctrl+d", "Uninstall", "uninstall",
               "Uninstall the release; lists the resources it removes and asks first"),
)
BY_NAME = {a.name: a for a in ACTIONS}


def action_bindings() -> list[Binding]:
    """Footer bindings for every action, each followed by a hidden fallback on the same keys.

    Textual skips a binding whose ``check_action`` is not True and tries the
    next one for the key: the fallback then says why the action is refused
    instead of the key press doing nothing.
    """
    out: list[Binding] = []
    for a in ACTIONS:
        out.append(Binding(a.keys, a.name, a.label, tooltip=a.summary))
        out.append(Binding(a.keys, f"refuse('{a.name}')", show=False))
    return out
