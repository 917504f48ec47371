"""Secret masking for values, manifests and diffs, until the operator reveals them.

The rule (also shown on the help screen):

* a value whose key ends in a secret-like word is masked — the key is split
  into words at camelCase, ``_``, ``-`` and ``.`` boundaries and its last
  word is one of :data:`SECRET_WORDS` (``dbPassword``, ``api_key``,
  ``clientSecret``, ``token``), so ``secretName`` or ``tokenTtl`` stay visible;
* everything under a map whose key ends in ``secrets``, ``secret`` or
  ``credentials`` is masked, at any depth;
* any string holding a PEM private key is masked wherever it is;
* the password of a URL with credentials (``scheme://user:password@host``);
* in manifests, the ``data`` and ``stringData`` values of every ``Secret``,
  and in any object a scalar whose key matches the key-name rule (a
  ConfigMap's ``DB_PASSWORD: ...``);
* booleans and nulls are never masked (they carry no secret);
* in free text (a chart's NOTES), every value the rules above mask in the
  release's values wherever it appears, PEM private key blocks and URL passwords;
* every value that came from a Secret (``spec.valuesFrom``), whatever its key:
  in values by its path (``secret_paths``), and in every text (manifests,
  diffs, notes, live objects, the event log) wherever the value (or its
  base64) appears — the engine :meth:`Masker.remember` s them when it reads
  the Secret (values under 4 characters only by path). Every remembered value
  stays masked for the run: they are bounded by the values limits of the
  objects read.

A masked value reads ``•••••• #1a2b``: the tag is an HMAC of the value
under a key made fresh for each app run, so two masked values differ
exactly when the values differ (diffs still show that a secret changed)
while nothing about the value can be recovered from it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import yaml

from engine.base.loader import Dumper

SECRET_WORDS = frozenset({
    "password", "passwd", "pwd", "passphrase", "secret", "token", "key", "apikey", "privatekey",
    "credential", "credentials", "dsn",
})
SECRET_MAPS = frozenset({"secrets", "secret", "credentials"})
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_PEM_PRIVATE = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")
_MASKED = "•••••• #"
_PEM_BLOCK = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL)
_MIN_REMEMBERED = 4  # shorter texts are masked by path only: replacing "on" in every text would mangle it
_TRIE_MAX = 128  # longer remembered texts are replaced as plain substrings (the regex trie stays shallow)
_URL_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^:/@\s\"']+:)([^@/\s\"']+)(@)", re.IGNORECASE)


def words(key: str) -> list[str]:
    """``dbPassword`` → ``["db", "password"]``; ``API_KEY`` → ``["api", "key"]``."""
    return [w.lower() for w in _WORD.findall(key)]


def is_secret_key(key: str) -> bool:
    """Whether a value under ``key`` is masked by the key-name rule."""
    parts = words(key)
    return bool(parts) and parts[-1] in SECRET_WORDS


def is_secret_map(key: str) -> bool:
    """Whether everything under ``key`` is masked (a ``secrets`` map)."""
    parts = words(key)
    return bool(parts) and parts[-1] in SECRET_MAPS


def _secret_leaves(values: Any, masked: Any, found: set[str]) -> None:
    """Collect into ``found`` the text of each leaf of ``values`` that ``masked`` (its masked copy) hides.

    Very short leaves (under 4 characters) are left out: replacing ``1`` or ``on`` everywhere
    in a text would hide nothing secret and mangle the rest.
    """
    if isinstance(values, dict) and isinstance(masked, dict):
        for k, v in values.items():
            _secret_leaves(v, masked.get(k), found)
    elif isinstance(values, list) and isinstance(masked, list):
        for v, m in zip(values, masked, strict=False):
            _secret_leaves(v, m, found)
    elif isinstance(values, str | int | float) and isinstance(masked, str) and masked.startswith(_MASKED):
        # A URL with a password is masked only in part: the URL rule catches it in the text.
        text = str(values)
        if len(text) >= 4:
            found.add(text)


def _maskable(value: object) -> bool:
    return value is not None and not isinstance(value, bool)


_DOC_SPLIT = re.compile(r"^---[^\n]*$", re.MULTILINE)
_TOP_KEY = re.compile(r"^(data|stringData):\s*$")
_CHILD = re.compile(r"^(\s+)([^:#][^:]*):(\s*)(.*)$")
_TOP_SCALAR = re.compile(r"^()([^\s:#][^:]*):(\s*)(.*)$")


def _trie(texts: Iterable[str]) -> str:
    """A regex matching any of ``texts``, longest match first, as a prefix trie (``abc|abd`` becomes
    ``ab(?:c|d)``): Python's ``re`` tries an alternation's branches one by one at each position, a trie
    one character. Depth is the longest text (at most :data:`_TRIE_MAX`)."""
    root: dict[str, Any] = {}
    for text in texts:
        node = root
        for ch in text:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, Any]) -> str:
        branches = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if "" in node else body  # greedy: the longer secret wins

    return build(root)


class Masker:
    """Masks secrets with tags keyed by ``key`` (fresh random bytes unless given, e.g. in tests)."""

    def __init__(self, key: bytes | None = None):
        self._key = key if key is not None else secrets.token_bytes(32)
        self._lock = threading.Lock()
        self._known: set[str] = set()  # remembered secret texts
        self._pattern: re.Pattern[str] | None = None  # the texts up to _TRIE_MAX characters, as a trie
        self._long: tuple[str, ...] = ()  # the longer ones, longest first

    def remember(self, texts: Iterable[str]) -> None:
        """Mask each of ``texts`` (and its base64) wherever it appears from now on (values that came
        from Secrets). Texts under 4 characters are skipped. The texts are matched as one regex trie, so a
        scrub costs about the same with 10 or 30,000 remembered values (an alternation of 30,000 texts took
        45 s over 100 kB)."""
        with self._lock:
            fresh = {form for text in texts for form in (text, base64.b64encode(text.encode()).decode())
                     if len(form) >= _MIN_REMEMBERED} - self._known
            if not fresh:
                return
            self._known |= fresh
            short = [t for t in self._known if len(t) <= _TRIE_MAX]
            self._pattern = re.compile(_trie(short)) if short else None
            self._long = tuple(sorted((t for t in self._known if len(t) > _TRIE_MAX), key=len, reverse=True))

    def scrub(self, text: str) -> str:
        """``text`` with every remembered secret masked (see :meth:`remember`)."""
        if not text:
            return text
        for secret in self._long:  # longest first: a secret holding another is masked whole
            if secret in text:
                text = text.replace(secret, self.mask(secret))
        pattern = self._pattern
        return pattern.sub(lambda m: self.mask(m.group(0)), text) if pattern is not None else text

    def _known_text(self, value: object) -> bool:
        return isinstance(value, str | int | float) and not isinstance(value, bool) and str(value) in self._known

    def mask(self, value: object) -> str:
        """The masked form of one value: ``•••••• #`` and 4 hex of an HMAC."""
        tag = hmac.new(self._key, repr(value).encode(), hashlib.sha256).hexdigest()[:4]
        return f"{_MASKED}{tag}"

    def mask_values(self, values: Any, *, under_secret: bool = False,
                    secret_paths: Iterable[Sequence[str | int]] = ()) -> Any:
        """A copy of ``values`` (a YAML-like tree) with secret values replaced by :meth:`mask`; everything
        at ``secret_paths`` (keys and list indices: values that came from Secrets) is masked too.

        One walk over ``values`` whatever the number of paths (they are looked up in a tree of their
        segments): a values layer of 10,000s of Secret-sourced leaves masks in about the time of its size."""
        return self._masked(values, under_secret, _path_tree(secret_paths))

    def _masked(self, values: Any, under_secret: bool, paths: dict[Any, Any] | None) -> Any:
        if paths is not None and _WHOLE in paths:
            paths, under_secret = None, True  # a value from a Secret: masked whole
        if isinstance(values, dict):
            out: dict[Any, Any] = {}
            for k, v in values.items():
                name = str(k)
                sub = paths.get(k) if paths else None
                if isinstance(v, dict | list):
                    hidden = under_secret or is_secret_map(name) or is_secret_key(name)
                    out[k] = self._masked(v, hidden, sub)
                elif (under_secret or is_secret_key(name) or (sub is not None and _WHOLE in sub)) and _maskable(v):
                    out[k] = self.mask(v)
                else:
                    out[k] = self._masked(v, under_secret, sub)
            return out
        if isinstance(values, list):
            return [self._masked(v, under_secret, paths.get(i) if paths else None) for i, v in enumerate(values)]
        if isinstance(values, str) and (under_secret or _PEM_PRIVATE.search(values)):
            return self.mask(values)
        if (under_secret and _maskable(values)) or self._known_text(values):
            return self.mask(values)
        if isinstance(values, str):
            return self.scrub(self.mask_url_passwords(values))
        return values

    def mask_url_passwords(self, text: str) -> str:
        """``text`` with the password of every ``scheme://user:password@`` masked."""
        return _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{self.mask(m.group(2))}{m.group(3)}", text)

    def mask_text(self, text: str, values: Any) -> str:
        """Free text (a chart's NOTES, rendered from ``values``) with every secret of ``values`` masked.

        A secret is a string or number the values rule masks (:meth:`mask_values`); each occurrence of
        its text is replaced by its mask, longest first (so a secret containing another stays whole).
        PEM private key blocks and URL passwords are masked as in manifests.
        """
        found: set[str] = set()
        _secret_leaves(values, self.mask_values(values), found)
        for secret in sorted(found, key=len, reverse=True):
            text = text.replace(secret, self.mask(secret))
        text = _PEM_BLOCK.sub(lambda m: self.mask(m.group(0)), text)
        return self.scrub(self.mask_url_passwords(text))

    def values_yaml(self, values: dict[str, Any], *, reveal: bool,
                    secret_paths: Iterable[Sequence[str | int]] = ()) -> str:
        """Values as YAML, masked unless ``reveal`` (``secret_paths`` as :meth:`mask_values`); ``{}`` for none."""
        if not values:
            return "{}\n"
        shown = values if reveal else self.mask_values(values, secret_paths=secret_paths)
        return yaml.dump(shown, Dumper=Dumper, sort_keys=True, allow_unicode=True, default_flow_style=False)

    def mask_manifest(self, manifest: str) -> str:
        """``manifest`` with the ``data``/``stringData`` values of each Secret masked.

        Works on the text (not a re-dump) so the layout Helm stored is kept; a
        block scalar (``key: |``) is masked as one value.
        """
        out: list[str] = []
        pos = 0
        for sep in [*_DOC_SPLIT.finditer(manifest), None]:
            end = sep.start() if sep else len(manifest)
            out.append(self._mask_document(manifest[pos:end]))
            if sep:
                out.append(sep.group(0))
                pos = sep.end()
        return self.scrub("".join(out))

    def _mask_document(self, doc: str) -> str:
        doc = self.mask_url_passwords(doc)
        if not re.search(r"^kind:\s*Secret\s*$", doc, re.MULTILINE):
            return self._mask_secret_keys(doc)
        lines = doc.split("\n")
        result: list[str] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            result.append(line)
            i += 1
            if not _TOP_KEY.match(line):
                continue
            while i < len(lines):
                child = lines[i]
                indent = len(child) - len(child.lstrip(" "))
                if child.strip() and indent == 0:
                    break  # next top-level key
                m = _CHILD.match(child)
                if m is None:
                    result.append(child)  # blank line or comment
                    i += 1
                    continue
                child_indent = len(m.group(1))
                value_lines = [m.group(4)]
                i += 1
                # A block scalar or folded value continues on more-indented lines.
                while i < len(lines) and lines[i].strip() and len(lines[i]) - len(lines[i].lstrip(" ")) > child_indent:
                    value_lines.append(lines[i].strip())
                    i += 1
                masked = self.mask("\n".join(value_lines))
                result.append(f"{m.group(1)}{m.group(2)}:{m.group(3) or ' '}{masked}")
        return "\n".join(result)

    def _mask_secret_keys(self, doc: str) -> str:
        """Mask scalar values whose key matches the key-name rule (a line ``key: value``)."""
        out = []
        for line in doc.split("\n"):
            m = _CHILD.match(line) or _TOP_SCALAR.match(line)
            if m is not None:
                value = m.group(4).strip()
                key = m.group(2).strip().strip("\"'")
                if value and value not in ("|", ">", "|-", ">-", "{}", "[]") and not value.startswith("&") \
                        and is_secret_key(key) and value.lower() not in ("true", "false", "null", "~"):
                    bare = value.strip("\"'")
                    line = f"{m.group(1)}{m.group(2)}:{m.group(3) or ' '}{self.mask(bare)}"
            out.append(line)
        return "\n".join(out)


_WHOLE = object()  # in a path tree: the value here is masked whole


def _path_tree(paths: Iterable[Sequence[str | int]]) -> dict[Any, Any] | None:
    """``secret_paths`` as nested dicts of their segments (``_WHOLE`` where a path ends); None for none."""
    root: dict[Any, Any] = {}
    for path in paths:
        node = root
        for segment in path:
            node = node.setdefault(segment, {})
        node[_WHOLE] = True
    return root or None
