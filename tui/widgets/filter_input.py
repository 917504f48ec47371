"""The ``/`` filter line: a regular expression (or literal text) matched against every cell of a row."""

from __future__ import annotations

from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input


class FilterInput(Input):
    """Hidden until ``/``; typing filters live, enter keeps the filter, escape clears it."""

    BINDINGS = [Binding("escape", "clear_filter", "Clear filter")]

    class Cleared(Message):
        """The operator dropped the filter (escape)."""

    def __init__(self, *, id: str | None = None):
        super().__init__(placeholder="filter rows: regex (literal if invalid), !regex excludes; "
                                     "enter keeps, escape clears", id=id)

    def action_clear_filter(self) -> None:
        self.value = ""
        self.post_message(self.Cleared())
