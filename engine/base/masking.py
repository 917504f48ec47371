"""Secret masking for values, manifests and diffs, until the operator reveals them.

The rule (also shown on the help screen):

* a value whose key ends in a secret-like word is masked — the key is split
  into words at camelCase, ``_``, ``-`` and ``.`` boundaries and its last
  word is one of :data:`SECRET_WORDS` (``dbPassword``, ``clientSecret``,
  ``token``), or is ``key`` after one of :data:`SECRET_KEYS` (``api_key``,
  ``privateKey``, ``accessKey``), so ``secretName``, ``tokenTtl``, ``key`` or
  ``topologyKey`` stay visible;
* everything under a map whose key ends in ``secrets``, ``secret`` or
  ``credentials`` is masked, at any depth;
* any string holding a PEM private key is masked wherever it is;
* the password of a URL with credentials (``scheme://user:password@host``);
* in manifests and live objects, which are masked on the parsed objects (the
  YAML shown stays valid, only scalars change): the ``data`` and ``stringData``
  values of every ``Secret``; in a ConfigMap's ``data`` the entries whose name
  matches the key-name rule (``DB_PASSWORD``) and, in a multi-line entry (a
  config file), its ``password: ...`` lines; every text the rules above mask in
  the release's values, wherever the chart put it. Kubernetes' own fields are
  never masked for their name (``key``, ``secretKeyRef``, ``checksum/secret``);
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
import itertools
import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from engine.base.loader import Dumper, YamlLimitError, manifest_limits, parse_text

SECRET_WORDS = frozenset({
    "password", "passwd", "pwd", "passphrase", "secret", "token", "apikey", "privatekey",
    "credential", "credentials", "dsn",
})
# ``key`` alone is mostly a name (Kubernetes' ``key`` fields, ``topologyKey``): only these kinds of key are secret.
SECRET_KEYS = frozenset({
    "api", "private", "access", "secret", "encryption", "signing", "master", "license", "ssh", "tls", "client",
    "auth", "session", "shared", "service", "account", "admin", "root", "cookie", "jwt", "hmac", "crypto",
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
    if not parts:
        return False
    return parts[-1] in SECRET_WORDS or (parts[-1] == "key" and len(parts) > 1 and parts[-2] in SECRET_KEYS)


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
_CONFIG_LINE = re.compile(r"^(\s*)([A-Za-z_][\w.-]*):(\s*)(.*)$")  # `name: value` in an embedded config file
_MANIFEST_CACHE = 32  # masked manifests kept (a release's revisions, both sides of diffs)
_WIDTH = 1 << 20  # dumped lines are not folded: masked documents keep one line per scalar


_Ident = tuple[str, str, str] | None  # an object's kind, namespace and name in a manifest


def _ident(obj: Any) -> _Ident:
    """``obj``'s kind, namespace and name, or None when it is not a Kubernetes object."""
    if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
        return None
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    return obj["kind"], str(meta.get("namespace") or ""), str(meta.get("name") or "")


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
        self._generation = 0  # bumped when a text is remembered: masked manifests cached before are stale
        self._manifests: OrderedDict[tuple[Any, ...], str] = OrderedDict()

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
            self._generation += 1
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

    def secret_texts(self, values: Any) -> frozenset[str]:
        """The texts of the leaves of ``values`` the values rule masks (:meth:`mask_values`), each of 4
        characters or more: what a manifest or NOTES rendered from ``values`` must not show."""
        found: set[str] = set()
        if values:
            _secret_leaves(values, self.mask_values(values), found)
        return frozenset(found)

    def mask_manifest(self, manifest: str, values: Any = None) -> str:
        """``manifest`` (YAML documents joined by ``---`` lines) with its secrets masked, still valid YAML
        with the same structure: only scalars change, never keys.

        Masked, on the parsed objects (:meth:`mask_object`): a Secret's ``data`` and ``stringData`` values,
        every text the values rule masks in ``values`` (the release's values, wherever the chart put them),
        every remembered value that came from a Secret, PEM private keys, URL passwords, and in a
        ConfigMap's ``data`` the entries whose name is secret-looking. Kubernetes' own fields (``key``,
        ``topologyKey``, ``secretKeyRef``, annotations) are never masked for their name. A document with
        nothing to mask is kept as Helm stored it; one with something is dumped again (its leading
        ``# Source:`` comments kept). A document that is not YAML is masked as text.

        Parsing costs about as much as the manifest's size, so results are cached by the digest of the
        manifest, of the values' secrets and of the remembered set (the app masks on every view).
        """
        leaves = self.secret_texts(values)
        key = (hashlib.sha256(manifest.encode()).digest(), hash(leaves), leaves, self._generation)
        with self._lock:
            cached = self._manifests.get(key)
            if cached is not None:
                self._manifests.move_to_end(key)
                return cached
        masked = "".join(text for text, _ in self._masked_parts(manifest, leaves))
        with self._lock:
            self._manifests[key] = masked
            while len(self._manifests) > _MANIFEST_CACHE:
                self._manifests.popitem(last=False)
        return masked

    def mask_pair(self, before: str, after: str, values: Any = None) -> tuple[str, str]:
        """``before`` and ``after`` (two manifests about to be diffed) masked as :meth:`mask_manifest` masks
        each, except that an object masked on one side is dumped again on the other side too (objects matched
        by kind, namespace and name): a secret added to a ConfigMap showed its whole unchanged layout as
        changed, Helm's text on one side against the dump on the other."""
        leaves = self.secret_texts(values)
        sides = [self._masked_parts(before, leaves), self._masked_parts(after, leaves)]
        dumped = {ident for side in sides for _, (ident, was_dumped) in side if ident is not None and was_dumped}
        out: list[str] = []
        for manifest, side in zip((before, after), sides, strict=True):
            raws = self._parts(manifest)
            out.append("".join(self._mask_document(raw, leaves, dump=True)[0]
                               if ident in dumped and not was_dumped else text
                               for raw, (text, (ident, was_dumped)) in zip(raws, side, strict=True)))
        return out[0], out[1]

    @staticmethod
    def _parts(manifest: str) -> list[str]:
        """``manifest`` cut into its documents and the ``---`` lines between them, in order (joined: itself)."""
        parts: list[str] = []
        pos = 0
        for sep in [*_DOC_SPLIT.finditer(manifest), None]:
            parts.append(manifest[pos:sep.start() if sep else len(manifest)])
            if sep:
                parts.append(sep.group(0))
                pos = sep.end()
        return parts

    def _masked_parts(self, manifest: str, leaves: frozenset[str]) -> list[tuple[str, tuple[_Ident, bool]]]:
        """Each part of :meth:`_parts` masked, with its object's identity and whether it was dumped again
        (separators: themselves, no identity)."""
        return [self._mask_document(part, leaves) if i % 2 == 0 else (part, (None, False))
                for i, part in enumerate(self._parts(manifest))]

    def _mask_document(self, doc: str, leaves: frozenset[str], *, dump: bool = False
                       ) -> tuple[str, tuple[_Ident, bool]]:
        """``doc`` masked, with its object's identity (kind, namespace, name; None when it is no object) and
        whether it was dumped again: something in it was masked, or ``dump``."""
        if not doc.strip():
            return doc, (None, False)
        try:
            parsed = parse_text(doc, Path("manifest"), manifest_limits()).data
        except (YamlLimitError, yaml.YAMLError):
            # Not YAML: Helm would refuse it; mask what text rules can.
            return self._mask_string(doc, leaves), (None, False)
        ident = _ident(parsed)
        masked = self.mask_object(parsed, leaves)
        if masked == parsed and not dump:
            return doc, (ident, False)
        head = list(itertools.takewhile(lambda ln: not ln.strip() or ln.lstrip().startswith("#"),
                                        doc.split("\n")))
        body = yaml.dump(masked, Dumper=Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False,
                         width=_WIDTH)
        tail = "\n" if doc.endswith("\n") else ""
        return "\n".join([*head, body.rstrip("\n")]) + tail, (ident, True)

    def mask_object(self, obj: Any, leaves: Collection[str] = ()) -> Any:
        """A copy of one Kubernetes object (or ``*List``) with its secrets masked, as :meth:`mask_manifest`
        says; ``leaves`` are texts to mask wherever they appear (:meth:`secret_texts` of the values)."""
        if not isinstance(obj, dict):
            return self._scalars(obj, leaves)
        kind = obj.get("kind")
        out: dict[Any, Any] = {}
        for k, v in obj.items():
            if kind == "Secret" and k in ("data", "stringData"):
                out[k] = self.mask_values(v, under_secret=True)  # every scalar, whatever its depth
            elif kind == "ConfigMap" and k == "data" and isinstance(v, dict):
                out[k] = {name: self.mask_values(value, under_secret=True) if is_secret_key(str(name))
                          else self._config_entry(value, leaves) for name, value in v.items()}
            elif isinstance(kind, str) and kind.endswith("List") and k == "items" and isinstance(v, list):
                out[k] = [self.mask_object(item, leaves) for item in v]
            else:
                out[k] = self._scalars(v, leaves)
        return out

    def _config_entry(self, value: Any, leaves: Collection[str]) -> Any:
        """A ConfigMap entry: a multi-line one is often a config file, whose ``password: x`` lines are masked."""
        if isinstance(value, str) and "\n" in value:
            value = _mask_secret_lines(self, value)
        return self._scalars(value, leaves)

    def _scalars(self, value: Any, leaves: Collection[str]) -> Any:
        if isinstance(value, dict):
            return {k: self._scalars(v, leaves) for k, v in value.items()}
        if isinstance(value, list):
            return [self._scalars(v, leaves) for v in value]
        if isinstance(value, str):
            return self._mask_string(value, leaves)
        if _maskable(value) and isinstance(value, int | float) and (str(value) in leaves or self._known_text(value)):
            return self.mask(value)
        return value

    def _mask_string(self, text: str, leaves: Collection[str]) -> str:
        if text in leaves or text in self._known or _PEM_PRIVATE.search(text):
            return self.mask(text)
        for secret in sorted((s for s in leaves if s in text), key=len, reverse=True):
            text = text.replace(secret, self.mask(secret))
        text = _PEM_BLOCK.sub(lambda m: self.mask(m.group(0)), text)
        return self.scrub(self.mask_url_passwords(text))


def _mask_secret_lines(masker: Masker, text: str) -> str:
    """``key: value`` lines of an embedded config file whose key is secret-looking, value masked."""
    out = []
    for line in text.split("\n"):
        m = _CONFIG_LINE.match(line)
        if m is not None:
            value = m.group(4).strip()
            if value and value not in ("|", ">", "|-", ">-", "{}", "[]") and not value.startswith(("&", "{", "[")) \
                    and is_secret_key(m.group(2).strip().strip("\"'")) \
                    and value.lower() not in ("true", "false", "null", "~"):
                line = f"{m.group(1)}{m.group(2)}:{m.group(3) or ' '}{masker.mask(value.strip(chr(34) + chr(39)))}"
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
