"""Theme files: TOML data mapped onto Textual's :class:`~textual.theme.Theme`.

A theme file (``*.toml``) holds ``name`` and colours, e.g.::

    name = "my-theme"
    dark = true
    primary = "#4c9aff"
    background = "#101418"
    [variables]                  # optional Textual CSS variables
    footer-key-foreground = "#4c9aff"

Fields: see :data:`COLOR_FIELDS` and :data:`OTHER_FIELDS`. helmdeck ships
its themes in the repository's ``themes/`` folder (``tui/themes`` links to it,
so an installed package carries them as package data); users add theme files to
``$XDG_CONFIG_HOME/helmdeck/themes/``. A bad file is reported with the file,
the field and a fix, and the other themes still load.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.color import ColorParseError as RichColorParseError
from rich.style import Style
from textual.color import Color, ColorParseError
from textual.theme import Theme

from engine.base.fields import closest
from tui.format import Tone

SHIPPED_DIR = Path(__file__).resolve().parent / "themes"
DEFAULT_THEME = "helmdeck-dark"
COLOR_FIELDS = (
    "primary", "secondary", "accent", "warning", "error", "success",
    "foreground", "background", "surface", "panel", "boost",
)
OTHER_FIELDS = ("name", "dark", "luminosity_spread", "text_alpha", "variables")
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


@dataclass
class ThemeError(Exception):
    """A theme file is invalid; ``str()`` reads ``file: field: problem (fix)``."""

    file: Path
    field: str
    problem: str
    fix: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.field}" if self.field else str(self.file)
        return f"{where}: {self.problem} ({self.fix})"


def load_theme_file(path: Path) -> Theme:
    """Read one theme file. Raises :class:`ThemeError` naming the field at fault."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ThemeError(path, "", f"cannot read the file: {exc.strerror}", "check the path and permissions") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ThemeError(path, "", f"not valid TOML: {exc}", "fix the syntax (see themes/README.md)") from exc
    return theme_from_dict(data, path)


def theme_from_dict(data: dict[str, Any], path: Path) -> Theme:
    """Validate a parsed theme file and build the Textual theme."""
    unknown = sorted(set(data) - set(COLOR_FIELDS) - set(OTHER_FIELDS))
    if unknown:
        valid = (*OTHER_FIELDS, *COLOR_FIELDS)
        hints = [f"{key}: did you mean {close}?" for key in unknown if (close := closest(key, valid))]
        raise ThemeError(path, ", ".join(unknown), "unknown field" if len(unknown) == 1 else "unknown fields",
                         f"{'; '.join([*hints, ''])}remove or rename; valid fields: {', '.join(valid)}")
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ThemeError(path, "name", f"must be a lower-case name, got {name!r}",
                         'e.g. name = "my-theme" (letters, digits and -)')
    if "primary" not in data:
        raise ThemeError(path, "primary", "missing", 'add a colour, e.g. primary = "#4c9aff"')
    colors: dict[str, str] = {}
    for field in COLOR_FIELDS:
        if field in data:
            colors[field] = _color(data[field], path, field)
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise ThemeError(path, "dark", f"must be true or false, got {dark!r}", "dark = true for a dark background")
    numbers = {f: _fraction(data[f], path, f) for f in ("luminosity_spread", "text_alpha") if f in data}
    variables = data.get("variables", {})
    if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
        raise ThemeError(path, "variables", "must be a table of strings",
                         '[variables] then lines like footer-key-foreground = "#4c9aff"')
    return Theme(
        name=name, primary=colors["primary"], secondary=colors.get("secondary"), accent=colors.get("accent"),
        warning=colors.get("warning"), error=colors.get("error"), success=colors.get("success"),
        foreground=colors.get("foreground"), background=colors.get("background"), surface=colors.get("surface"),
        panel=colors.get("panel"), boost=colors.get("boost"), dark=dark,
        luminosity_spread=numbers.get("luminosity_spread", 0.15), text_alpha=numbers.get("text_alpha", 0.95),
        variables=dict(variables),
    )


def _color(value: object, path: Path, field: str) -> str:
    if not isinstance(value, str):
        raise ThemeError(path, field, f"must be a colour string, got {value!r}", f'e.g. {field} = "#336699"')
    try:
        Color.parse(value)
    except ColorParseError as exc:
        raise ThemeError(path, field, f"{value!r} is not a colour", 'use "#rrggbb", "rgb(r,g,b)" or a name') from exc
    return value


def _fraction(value: object, path: Path, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ThemeError(path, field, f"must be a number from 0 to 1, got {value!r}", f"e.g. {field} = 0.15")
    return float(value)


def load_themes(folders: Iterable[Path]) -> tuple[list[Theme], list[ThemeError]]:
    """Every ``*.toml`` theme in ``folders`` (missing folders are skipped), and the bad files.

    A later folder's theme replaces an earlier one of the same name, so a
    user theme may override a shipped one.
    """
    themes: dict[str, Theme] = {}
    errors: list[ThemeError] = []
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            try:
                theme = load_theme_file(path)
            except ThemeError as exc:
                errors.append(exc)
                continue
            themes[theme.name] = theme
    return list(themes.values()), errors


# Theme variables that colour each tone; "plain" text keeps the widget's colour.
TONE_VARIABLES: dict[Tone, str] = {"ok": "text-success", "warn": "text-warning", "bad": "text-error",
                                   "busy": "text-accent"}


def tone_styles(variables: dict[str, str]) -> dict[Tone, Style]:
    """The Rich style of each tone under a theme's CSS ``variables`` (``App.theme_variables``)."""
    out: dict[Tone, Style] = {}
    for tone, var in TONE_VARIABLES.items():
        if var in variables:
            try:
                out[tone] = Style(color=variables[var])
            except RichColorParseError:  # a colour Rich cannot use here: plain text (symbols still tell)
                continue
    return out
