"""The app's own settings, kept in ``$XDG_CONFIG_HOME/helmdeck/`` (default ``~/.config/helmdeck/``).

``config.toml`` holds the chosen theme (``theme = "helmdeck-dark"``);
``themes/`` holds the user's theme files.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path


def config_dir() -> Path:
    """``$XDG_CONFIG_HOME/helmdeck`` (default ``~/.config/helmdeck``)."""
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return (Path(xdg) if xdg else Path.home() / ".config") / "helmdeck"


@dataclass(frozen=True)
class Settings:
    """Where settings live; ``load``/``save_theme`` read and write ``config.toml`` there."""

    directory: Path

    @property
    def file(self) -> Path:
        return self.directory / "config.toml"

    @property
    def themes_dir(self) -> Path:
        return self.directory / "themes"

    def load_theme(self) -> tuple[str | None, str | None]:
        """``(theme name or None, problem or None)``: a missing file is no problem, a bad one is."""
        try:
            data = tomllib.loads(self.file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None, None
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            return None, f"{self.file}: cannot read it ({exc}); delete it or fix the TOML"
        theme = data.get("theme")
        if theme is not None and not isinstance(theme, str):
            return None, f'{self.file}: theme: must be a string (e.g. theme = "helmdeck-dark")'
        return theme, None

    def save_theme(self, name: str) -> None:
        """Remember ``name`` as the theme to use next time. Raises OSError."""
        self.directory.mkdir(parents=True, exist_ok=True)
        # A JSON string is a valid TOML basic string for the names themes allow.
        tmp = self.file.with_suffix(".tmp")
        tmp.write_text(f"theme = {json.dumps(name)}\n", encoding="utf-8")
        tmp.replace(self.file)
