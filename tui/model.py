"""The release list model: columns, cell texts, filters, sort order and counts.

Pure functions over :class:`~engine.runtime.state.ReleaseView` values; the
widgets only draw what this module computes, so it is tested without a screen.
"""

from __future__ import annotations

import functools
import heapq
import operator
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import compress, repeat
from typing import Literal, NamedTuple

from engine.runtime.ledger.owners import owner_of
from engine.runtime.state import RELEASE_STATES, ReleaseKey, ReleaseView
from engine.storage.observation import PENDING_STATUSES
from tui import format as fmt
from tui.chart_origin import chart_cell
from tui.format import Tone


class Cell(NamedTuple):
    """One table cell: its text (readable without colour) and a colour hint."""

    text: str
    tone: Tone = "plain"


KeptCell = tuple[str, Tone]
"""A :class:`Cell` as the table keeps it, a plain tuple ``(text, tone)`` (equal to the Cell): CPython's cyclic
garbage collector stops tracking an exact tuple of strings at its first pass (not a tuple subclass such as a
NamedTuple), so 10,000 rows of cells add nothing to what a full collection walks."""


@dataclass(frozen=True)
class Column:
    """A release table column: key, header label, how rows sort by it, and its width in cells (one
    trailing space included: the columns are laid out without padding)."""

    key: str
    label: str
    sort_value: Callable[[ReleaseView, float], tuple[object, ...]]
    width: int


_DIGITS = re.compile(r"(\d+)")


@functools.lru_cache(maxsize=32_768)  # names and namespaces recur: a release's every update, the sort keys
def natural_key(text: str) -> tuple[object, ...]:
    """Sort key comparing digit runs as numbers, as k9s sorts names: ``rel-2`` before ``rel-10``.

    The text is split into alternating non-digit and digit runs (always starting with a
    non-digit one, maybe empty), so equal positions always hold the same type. Equal numbers
    written differently (``01`` and ``1``) are then ordered by their text, so the order is total.
    """
    parts = _DIGITS.split(text)
    return (*(int(p) if i % 2 else p.casefold() for i, p in enumerate(parts)), text)


def _names(view: ReleaseView) -> tuple[object, ...]:
    return names_key(view.namespace, view.name)


def names_key(namespace: str, name: str) -> tuple[object, ...]:
    """The table's first order (:class:`SortOrder`'s default): namespace, then name, digit runs as numbers."""
    return (natural_key(namespace), natural_key(name))


def first_rows(keys: Iterable[ReleaseKey], count: int) -> list[ReleaseKey]:
    """The first ``count`` of ``keys`` in the table's first order (:func:`names_key`): the rows the first
    screen shows of those releases (``count`` at least its height)."""
    return heapq.nsmallest(count, keys, key=lambda key: names_key(*key))


def _text_of(column: str) -> Callable[[ReleaseView, float], tuple[object, ...]]:
    return lambda view, now: (natural_key(cells(view, now)[column].text), *_names(view))


def _revision(view: ReleaseView, _now: float) -> tuple[object, ...]:
    return (view.observation.version if view.observation else -1, *_names(view))


def _age(view: ReleaseView, _now: float) -> tuple[object, ...]:
    # Youngest first when ascending, as an age column reads; never deployed last.
    at = fmt.deployed_at(view)
    return (at is None, -(at or 0.0), *_names(view))


def _state(view: ReleaseView, _now: float) -> tuple[object, ...]:
    # In RELEASE_STATES order (healthy first), releases without a state last.
    order = RELEASE_STATES.index(view.state) if view.state in RELEASE_STATES else len(RELEASE_STATES)
    return (order, *_names(view))


# Widths fit a 160-column terminal with the scroll bar (158 cells); longer texts end in "…".
COLUMNS: tuple[Column, ...] = (
    Column("namespace", "NAMESPACE", lambda v, _n: _names(v), 14),
    Column("name", "NAME", lambda v, _n: (natural_key(v.name), natural_key(v.namespace)), 15),
    Column("chart", "CHART", _text_of("chart"), 21),
    Column("app_version", "APP", _text_of("app_version"), 7),
    Column("revision", "REV", _revision, 4),
    Column("status", "HELM STATUS", _text_of("status"), 17),
    Column("state", "STATE", _state, 12),
    Column("ready", "READY", _text_of("ready"), 6),
    Column("monitor", "MONITOR", _text_of("monitor"), 12),
    # Most warnings first when ascending: what needs a look comes up.
    Column("warnings", "WARN", lambda v, _n: (-v.warnings, *_names(v)), 5),
    Column("maintenance", "MAINT", _text_of("maintenance"), 6),
    Column("suspended", "SUSP", _text_of("suspended"), 6),
    Column("owner", "OWNER", _text_of("owner"), 9),
    Column("action", "LAST ACTION", _text_of("action"), 18),
    Column("age", "AGE", _age, 6),
)
COLUMN_KEYS = tuple(c.key for c in COLUMNS)
COLUMN_INDEX = {key: i for i, key in enumerate(COLUMN_KEYS)}  # a column's place in :func:`row_cells`
_BY_KEY = {c.key: c for c in COLUMNS}


def column(key: str) -> Column:
    """The column named ``key`` (KeyError when unknown)."""
    return _BY_KEY[key]


def _owner(view: ReleaseView) -> str:
    owner = owner_of(view)
    # A Package object a helmdeck controller reconciles: its shard's name, "cluster" when not sharded (the
    # Overview names the replica).
    if owner.kind == "controller":
        return owner.shard or "cluster"
    return {"none": "-"}.get(owner.kind, owner.kind)


_READING: KeptCell = ("…", "plain")  # a cell of a release listed from storage's labels, its record not decoded yet
_LISTED_ROW = (_READING,) * len(COLUMN_KEYS)  # a listed row's cells before its own are put in


@functools.lru_cache(maxsize=64)
def _status_cell(status: str) -> KeptCell:
    return (f"{fmt.status_symbol(status)} {status}", fmt.status_tone(status))


def listed_row(view: ReleaseView, now: float) -> tuple[KeptCell, ...]:
    """The kept cells (:func:`row_cells`) of a release known only from its storage labels
    (:attr:`ReleaseView.listed`, while the engine starts): namespace, name, revision, Helm status and age as
    ``helm list`` shows them; the columns the record and the engine fill say ``…``. Made directly as the
    table keeps them: 10,000 at start-up, the equal cells shared."""
    listed = view.listed
    assert listed is not None
    row = list(_LISTED_ROW)
    row[_NAMESPACE], row[_NAME] = (view.namespace, "plain"), (view.name, "plain")
    row[_REVISION], row[_STATUS] = (str(listed.version), "plain"), _status_cell(listed.status)
    row[_AGE] = (fmt.duration(now - listed.modified_at, coarse=True) if listed.modified_at else "-", "plain")
    return tuple(row)


_NAMESPACE, _NAME, _REVISION, _STATUS, _AGE = (COLUMN_INDEX[k] for k in ("namespace", "name", "revision", "status",
                                                                         "age"))


def listed_cells(view: ReleaseView, now: float) -> dict[str, Cell]:
    """:func:`listed_row` by column, as :func:`cells` gives them."""
    return dict(zip(COLUMN_KEYS, map(Cell._make, listed_row(view, now)), strict=True))


def _listed(view: ReleaseView) -> bool:
    return view.observation is None and view.listed is not None and not view.unreadable


def cells(view: ReleaseView, now: float) -> dict[str, Cell]:
    """Every column's cell for one release, at Unix time ``now`` (for ages and progress)."""
    obs = view.observation
    if _listed(view):
        return listed_cells(view, now)
    return {
        "namespace": Cell(view.namespace),
        "name": Cell(view.name),
        "chart": Cell(*chart_cell(view)),
        "app_version": Cell((obs.app_version or "-") if obs else "-"),
        "revision": Cell(str(obs.version) if obs else "-"),
        "status": Cell(*fmt.helm_status_text(view)),
        "state": Cell(*fmt.state_text(view, cell=True)),
        "ready": Cell(*fmt.ready_text(view.ready)),
        "monitor": Cell(*fmt.monitor_text(view.monitor)),
        "warnings": Cell(f"⚠ {view.warnings}", "bad") if view.warnings else Cell("-"),
        "maintenance": Cell(*fmt.maintenance_text(view.maintenance)),
        "suspended": Cell(*fmt.suspended_text(view.suspended)),
        "owner": Cell(_owner(view)),
        "action": Cell(*fmt.last_action_text(view, now)),
        "age": Cell(fmt.age_text(view, now)),
    }


def row_cells(view: ReleaseView, now: float) -> tuple[KeptCell, ...]:
    """:func:`cells` as one plain tuple of :data:`KeptCell` in :data:`COLUMN_KEYS` order (:data:`COLUMN_INDEX`):
    what the table keeps per row, untracked by the cyclic garbage collector after its first pass."""
    if _listed(view):
        return listed_row(view, now)
    return tuple(map(tuple, cells(view, now).values()))  # type: ignore[arg-type]


# -- filtering -----------------------------------------------------------------

QuickFilter = Literal["all", "failed", "pending", "drifted", "maintenance"]
QUICK_FILTERS: tuple[QuickFilter, ...] = ("all", "failed", "pending", "drifted", "maintenance")
QUICK_FILTER_HELP: dict[QuickFilter, str] = {
    "all": "every release",
    "failed": "Helm status failed, engine state Failed or Stalled, the last action failed, or the package "
              "cannot be resolved (Ready False: ValuesError, InvalidPackage, a source error)",
    "pending": "Helm status pending-*, engine state Locked, or an action running",
    "drifted": "engine state Drifted or OutOfSync, or the monitor reports absent resources",
    "maintenance": "packages in maintenance mode (NoResourceReconciliation)",
}


def quick_match(view: ReleaseView, quick: QuickFilter) -> bool:
    """Whether ``view`` belongs to the quick filter ``quick``."""
    return quick == "all" or quick in quick_set(view)


_REGEX_SYNTAX = frozenset(".^$*+?{}[]\\|()")


@dataclass(frozen=True)
class TextFilter:
    """What the ``/`` filter matches against a row's text.

    The text is a case-insensitive regular expression; when it does not
    compile it is matched literally (so ``web(`` still finds ``web(``) and
    ``error`` says why. A leading ``!`` keeps the rows that do *not* match.
    ``^`` and ``$`` anchor at each cell's start and end (``^web$`` is the
    release named web), as the row's cells are searched one per line.
    """

    source: str = ""

    @property
    def inverted(self) -> bool:
        return self.source.startswith("!")

    @property
    def pattern(self) -> str:
        return self.source[1:] if self.inverted else self.source

    @property
    def error(self) -> str | None:
        """Why the text is not a valid regular expression (None when it is)."""
        try:
            re.compile(self.pattern)
        except re.error as exc:
            return str(exc)
        return None

    def _hit(self) -> Callable[[str], object]:
        """A test of one lower-cased search text, truthy on a match (before ``!``): a C-level call, so a scan
        of 10,000 rows runs no Python per row."""
        if not _REGEX_SYNTAX.intersection(self.pattern):  # plain text: a substring test, no regex engine
            return operator.methodcaller("__contains__", self.pattern.lower())
        try:
            return re.compile(self.pattern, re.IGNORECASE | re.MULTILINE).search
        except re.error:
            return re.compile(re.escape(self.pattern), re.IGNORECASE).search

    def compile(self) -> Callable[[str], bool]:
        """A predicate over a row's joined text, lower-cased (:func:`search_text`)."""
        hit, inverted = self._hit(), self.inverted
        return lambda text: bool(hit(text)) != inverted

    def matches(self, texts: Iterable[str]) -> Iterator[object]:
        """Per search text (lower-cased, :func:`search_text`), whether it matches (truthy), in order."""
        hits = map(self._hit(), texts)
        return map(operator.not_, hits) if self.inverted else hits


_QUICK_SETS: dict[tuple[QuickFilter, ...], frozenset[QuickFilter]] = {}  # shared: a few distinct sets


def quick_set(view: ReleaseView) -> frozenset[QuickFilter]:
    """The quick filters ``view`` belongs to (besides "all"); the table keeps it per row, made per change."""
    obs = view.observation
    status = obs.status if obs is not None else None
    state, running, last = view.state, view.running, view.last
    kept: list[QuickFilter] = []
    # A package that cannot be resolved is Failed with a failed "resolve" last action (engine.runtime.ledger.book).
    if status == "failed" or state == "Failed" or (state == "Stalled" and not fmt.acting_on_stalled(view)) or (
            running is None and last is not None and not last.ok):
        kept.append("failed")
    if status in PENDING_STATUSES or state == "Locked" or running is not None:
        kept.append("pending")
    if state in ("Drifted", "OutOfSync", "TargetChanged") or (view.monitor.resources and view.monitor.absent):
        kept.append("drifted")
    if view.maintenance:
        kept.append("maintenance")
    key = tuple(kept)
    found = _QUICK_SETS.get(key)
    if found is None:
        found = _QUICK_SETS[key] = frozenset(key)
    return found


@dataclass(frozen=True)
class RowFilter:
    """Which releases the table shows: text filter, quick filter and namespace (None = all)."""

    text: TextFilter = TextFilter()
    quick: QuickFilter = "all"
    namespace: str | None = None

    @property
    def active(self) -> bool:
        return bool(self.text.source) or self.quick != "all" or self.namespace is not None

    def predicate(self, now: float) -> Callable[[ReleaseView], bool]:
        """A function deciding whether one release is shown (one row at a time: for tests and single rows)."""
        def shown(view: ReleaseView) -> bool:
            rid = row_id(view.key)
            return bool(self.select([rid], {rid: search_text(row_cells(view, now))}, {rid: quick_set(view)}))
        return shown

    def select(self, rows: Iterable[str], search: Mapping[str, str],
               quick: Mapping[str, frozenset[QuickFilter]]) -> list[str]:
        """The row keys (``namespace/name``, :func:`row_id`) this filter keeps, in their order, given each
        row's :func:`search_text` and :func:`quick_set` (kept per row by the table). One linear scan of those
        compact keys per part of the filter, each step a C-level call: a keystroke costs no Python per row."""
        kept = list(rows)
        if self.namespace is not None:
            kept = list(compress(kept, map(operator.methodcaller("startswith", f"{self.namespace}/"), kept)))
        if self.quick != "all":
            kept = list(compress(kept, map(operator.contains, map(quick.__getitem__, kept), repeat(self.quick))))
        if self.text.source:
            kept = list(compress(kept, self.text.matches(map(search.__getitem__, kept))))
        return kept

    def describe(self, watched: tuple[str, ...] | None = None) -> str:
        """``ns helmdeck-demo · failed · /web/`` or ``all namespaces`` — for the header; ``watched``: the
        namespaces the engine watches when narrowed (``-n``), named instead of "all namespaces"."""
        every = "all namespaces" if not watched else f"ns {', '.join(watched)}"
        parts = [f"ns {self.namespace}" if self.namespace is not None else every]
        if self.quick != "all":
            parts.append(self.quick)
        if self.text.source:
            parts.append(f"/{self.text.source}/" + (" (literal)" if self.text.error else ""))
        return " · ".join(parts)


def row_text(view: ReleaseView, now: float) -> str:
    """Every cell's text of a row, tab-separated: what the text filter searches."""
    return "\t".join(c.text for c in cells(view, now).values())


def search_text(row: Iterable[KeptCell]) -> str:
    """A row's cells (:func:`row_cells`) as the text filter searches them: one per line (``^``/``$`` anchor
    at a cell's bounds), lower-cased."""
    return "\n".join(text for text, _tone in row).lower()


# -- sorting -------------------------------------------------------------------


@dataclass(frozen=True)
class SortOrder:
    """Rows sort by ``column`` (a key of :data:`COLUMNS`), descending when ``reverse``."""

    column: str = "namespace"
    reverse: bool = False

    def next_column(self, step: int = 1) -> SortOrder:
        """The same direction on the column ``step`` places to the right (wrapping)."""
        i = (COLUMN_KEYS.index(self.column) + step) % len(COLUMN_KEYS)
        return SortOrder(COLUMN_KEYS[i], self.reverse)

    def flipped(self) -> SortOrder:
        return SortOrder(self.column, not self.reverse)

    def key(self, view: ReleaseView, now: float) -> tuple[object, ...]:
        """Sort key of ``view`` for this column."""
        return column(self.column).sort_value(view, now)


# -- counts --------------------------------------------------------------------


def state_counts(views: Iterable[ReleaseView]) -> Counter[str]:
    """How many releases are in each engine state (``-`` = no state reported)."""
    return Counter(v.state or "-" for v in views)


def namespaces(views: Iterable[ReleaseView]) -> list[str]:
    """The distinct namespaces of ``views``, sorted naturally (``ns-2`` before ``ns-10``)."""
    return sorted({v.namespace for v in views}, key=natural_key)


def row_id(key: ReleaseKey) -> str:
    """The table row key of a release: ``namespace/name``."""
    return f"{key[0]}/{key[1]}"


def key_of(row: str) -> ReleaseKey:
    """Inverse of :func:`row_id` (namespaces never contain ``/``)."""
    ns, _, name = row.partition("/")
    return (ns, name)
