"""The footer: the screen's keys; when they do not fit, the least needed go first, help and quit never.

Textual's footer lets keys run off its right end, so at 120 columns the keys
at the end (``?`` help and ``q`` quit among them) were lost. Help (``?``) and
the command palette still list every key.
"""

from __future__ import annotations

from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey, FooterLabel, KeyGroup

ALWAYS = frozenset({"help", "quit"})
# The other actions, most needed first: the last ones are left out first. An action not named here is left
# out before all of these. Grouped keys (quick filters, tabs) are ranked by their action's name.
KEEP_ORDER: tuple[str, ...] = (
    "app.pop_screen", "open_detail", "select_cursor", "filter", "operation('upgrade')",
    "operation('rollback')", "operation('cancel')", "operation('uninstall')", "tab", "quick", "operation('test')",
    "operation('maintenance')", "operation('suspend')", "operation('versions')", "reveal", "computed", "pulses",
    "reload", "sort_next", "namespace", "context",
)
_RANK = {action: i for i, action in enumerate(KEEP_ORDER)}


def rank(action: str) -> int:
    """How needed a footer key is: -1 always shown, then 0 (most needed) up; unknown actions rank last."""
    if action in ALWAYS:
        return -1
    return _RANK.get(action, _RANK.get(action.partition("(")[0], len(KEEP_ORDER)))


def kept(units: list[tuple[int, int]], room: int) -> list[bool]:
    """Which of ``units`` (``(rank, width in cells)``, in footer order) fit in ``room`` cells: the highest
    ranks are left out first, rank -1 never."""
    keep = [True] * len(units)
    total = sum(width for _, width in units)
    for i in sorted(range(len(units)), key=lambda i: (units[i][0], i), reverse=True):  # later ones first
        if total <= room or units[i][0] < 0:
            break
        keep[i] = False
        total -= units[i][1]
    return keep


Unit = tuple[int, tuple[str, ...], list[Widget]]
"""One footer entry: its rank, what identifies it (its keys' actions and texts), its widgets."""


class KeyFooter(Footer):
    """A :class:`Footer` that leaves out the least needed keys (:data:`KEEP_ORDER`) rather than the last ones.

    Each entry's width is measured the first time it is laid out, then kept by what it shows: the footer
    is made again whenever the keys it shows change, and is fitted before it is drawn. Textual's footer is
    made again on every refresh of the bindings (focus, lease and controller changes: five or six at
    start-up, ~30 ms each); the same keys are not made again.
    """

    def __init__(self) -> None:
        super().__init__(compact=True)
        self._widths: dict[tuple[str, ...], int] = {}
        self._tries = 0  # refreshes waited for the first layout of new entries
        self._made: object = None  # what the footer was last made of (:meth:`_keys`)

    def _keys(self) -> object:
        """What the footer is made of: the screen's active bindings, each with its key, enabled state and
        tooltip (None before the first refresh of the bindings: the footer is empty). Attached only."""
        if not self._bindings_ready:
            return None
        return tuple((key, b.binding, b.enabled, b.tooltip) for key, b in self.screen.active_bindings.items())

    async def recompose(self) -> None:
        if not self.is_attached:  # removed (its screen made again) before the refresh it waited for
            return
        keys = self._keys()
        if keys == self._made:
            return
        self._made = keys
        await super().recompose()
        self._tries = 0
        self._fit()

    def on_resize(self) -> None:
        self._fit()

    def _units(self) -> list[Unit]:
        """The entries in footer order (the palette key, docked right, first): a key group and its label
        go together."""
        units: list[Unit] = []
        for child in self.children:
            keys = [child] if isinstance(child, FooterKey) else list(child.query(FooterKey))
            what = tuple(f"{k.action}={k.key_display}:{k.description}" for k in keys)
            if isinstance(child, FooterKey) and child.has_class("-command-palette"):
                units.insert(0, (-2, what, [child]))
            elif isinstance(child, FooterLabel) and units:
                units[-1][2].append(child)
            elif isinstance(child, FooterKey | KeyGroup):
                units.append((min((rank(k.action) for k in keys), default=len(KEEP_ORDER)), what, [child]))
        return units

    def _fit(self) -> None:
        units = self._units()
        new = [(what, widgets) for _, what, widgets in units if what not in self._widths]
        if not all(w.outer_size.width for _, widgets in new for w in widgets):
            self._tries += 1
            if self._tries < 10:  # new entries not laid out yet: measured after the next refresh
                self.call_after_refresh(self._fit)
            return
        for what, widgets in new:
            self._widths[what] = sum(w.outer_size.width + w.styles.margin.width for w in widgets)
        room = self.size.width - sum(self._widths[what] for r, what, _ in units if r == -2)  # the palette's
        entries = [(r, what, widgets) for r, what, widgets in units if r != -2]
        for (_, _, widgets), keep in zip(entries, kept([(r, self._widths[w]) for r, w, _ in entries], room),
                                         strict=True):
            for widget in widgets:
                widget.display = keep
