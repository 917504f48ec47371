"""Which release-table columns a terminal width shows, and how wide each is.

At full width (158 cells: a 160-column terminal less the scroll bar) every
column has its width from :data:`tui.model.COLUMNS`. A narrower table first
narrows the columns of :data:`NARROW` down to their minimum (their longer
texts end in "…"), then leaves columns out in :data:`DROP` order, least
needed first, behind a marker column that counts them (``+3``); the header
names them. Columns are narrowed only as far as needed, in :data:`NARROW`
order. Pure: the table asks again on every resize.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.model import COLUMNS

# Columns that may be narrowed, in the order they give up width, each down to its minimum (one trailing
# blank included). The minimums keep the short texts whole ("✔ deployed", "✖ upgrade", "web@0.2.0") and
# the headers NAMESPACE and HELM STATUS.
NARROW: tuple[tuple[str, int], ...] = (
    ("status", 12), ("action", 12), ("namespace", 12), ("name", 12), ("chart", 14),
)
# Columns left out when narrowing is not enough, first to last. Never: NAMESPACE, NAME, STATE.
DROP: tuple[str, ...] = (
    "app_version", "owner", "age", "suspended", "monitor", "maintenance", "warnings", "action", "ready",
    "chart", "revision", "status",
)
MARKER = "hidden"  # the marker column's key
MARKER_WIDTH = 4  # "+12"


@dataclass(frozen=True)
class ColumnLayout:
    """The shown columns in order with their widths in cells (one trailing blank included, none after the
    last), and the left-out column keys in table order (a marker column then ends the row)."""

    widths: tuple[tuple[str, int], ...]
    hidden: tuple[str, ...] = ()

    @property
    def marker(self) -> str:
        """The marker column's header: ``+3`` (three columns left out), ``""`` when all are shown."""
        return f"+{len(self.hidden)}" if self.hidden else ""

    def text_widths(self) -> dict[str, int]:
        """Per shown column, the cells its text may fill (its width less the blank that separates it)."""
        last = self.widths[-1][0] if not self.hidden else None
        return {key: width - (key != last) for key, width in self.widths}


def header_label(label: str, arrow: str, room: int) -> str:
    """A column header in ``room`` cells: ``label`` then the sort ``arrow`` (``"▲"``, ``"▼"`` or ``""``);
    a label too long is cut short with "…", the arrow kept (``HELM STA… ▲``)."""
    suffix = f" {arrow}" if arrow else ""
    if len(label) + len(suffix) <= room:
        return label + suffix
    return label[:max(0, room - len(suffix) - 1)] + "…" + suffix


# The newer-version marker that ends a CHART cell (tui.chart_origin.update_mark): kept when the cell is cut short.
UPDATE_MARKS = ("↑", "⇡")


def fit_text(text: str, room: int) -> str:
    """A cell's text for ``room`` cells: as it is, unless it ends in a newer-version marker (``web@0.2.0
    ↑0.3.0``) and does not fit: then the marker stays and the chart before it is cut short (``web@0… ↑0.3.0``).
    Other texts are cut by the table, ending in "…"."""
    if len(text) <= room:
        return text
    head, _, mark = text.rpartition(" ")
    if not head or not mark.startswith(UPDATE_MARKS):
        return text
    keep = room - len(mark) - 1
    return f"{head if len(head) <= keep else head[:max(keep - 1, 0)] + '…'} {mark}"


FULL = ColumnLayout(tuple((c.key, c.width) for c in COLUMNS))
_MINIMUM = dict(NARROW)


def fit(width: int) -> ColumnLayout:
    """The layout for a table ``width`` cells wide (scroll bar excluded).

    The full layout when it fits; else the fewest columns left out (in :data:`DROP` order) for which the
    narrowed columns fit; when even NAMESPACE, NAME and STATE at their minimums do not fit, those three
    (the table then scrolls sideways).
    """
    full = dict(FULL.widths)
    for dropped in range(len(DROP) + 1):
        hidden = set(DROP[:dropped])
        shown = {key: w for key, w in full.items() if key not in hidden}
        room = width - (MARKER_WIDTH if hidden else 0)
        excess = sum(shown.values()) - room
        if excess > sum(w - _MINIMUM.get(key, w) for key, w in shown.items()) and dropped < len(DROP):
            continue
        for key, least in NARROW:  # narrow in order, each only as far as needed
            if key in shown and excess > 0:
                cut = min(excess, shown[key] - least)
                shown[key] -= cut
                excess -= cut
        return ColumnLayout(tuple(shown.items()), tuple(c.key for c in COLUMNS if c.key in hidden))
    raise AssertionError("unreachable: the last step returns")
