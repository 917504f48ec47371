"""A table with a row cursor, where Home and End go to the first and last row."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable


class RowTable(DataTable[Text]):
    """A :class:`DataTable` whose Home/End move the cursor to the first/last row, as in k9s and a list box.

    DataTable's own Home/End move to the first/last *column* (with a row cursor: scroll sideways) and
    keep Ctrl+Home/Ctrl+End for the rows; here both pairs go to the rows.
    """

    BINDINGS = [
        Binding("home", "scroll_top", "First row", show=False),
        Binding("end", "scroll_bottom", "Last row", show=False),
    ]
