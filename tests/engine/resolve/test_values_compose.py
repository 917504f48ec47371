"""Unit tests of spec.valuesFrom: parsing (engine.package.values_from) and composition (engine.resolve.values),
with objects given in memory (the cluster tests are tests/engine/resolve/test_values_from.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.base.fields import PackageError
from engine.package.load import load_package
from engine.package.model import PackageSpec
from engine.resolve.release import ResolveCache
from engine.resolve.values import ObjectData, ValuesError, ValuesLayer, compose, leaf_paths

CHART = Path(__file__).resolve().parents[3] / "examples" / "charts" / "settings"


def write(tmp_path: Path, values_from: str, values: str = "{}") -> Path:
    file = tmp_path / "pkg.yaml"
    file.write_text(f"apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata: {{name: app, namespace: demo}}\n"
                    f"spec:\n  chart: {CHART}\n  values: {values}\n  valuesFrom:\n{values_from}")
    return file


def test_parses_entries_with_flux_defaults(tmp_path: Path) -> None:
    spec = load_package(write(tmp_path, "    - {kind: ConfigMap, name: base}\n"
                                        "    - kind: Secret\n      name: db.creds\n      valuesKey: password\n"
                                        "      targetPath: settings.db\\.password\n      optional: true\n"))
    first, second = spec.values_from
    assert (first.kind, first.name, first.values_key, first.target_path, first.optional) == \
        ("ConfigMap", "base", "values.yaml", "", False)
    assert (second.kind, second.values_key, second.target_path, second.optional) == \
        ("Secret", "password", "settings.db\\.password", True)
    assert second.line == 9 and second.field == "spec.valuesFrom[1]"


@pytest.mark.parametrize(("entry", "field", "problem"), [
    ("    - {kind: Deployment, name: x}\n", "spec.valuesFrom[0].kind", "unknown kind 'Deployment'"),
    ("    - {kind: Secret}\n", "spec.valuesFrom[0].name", "is required"),
    ("    - {kind: Secret, name: Bad_Name}\n", "spec.valuesFrom[0].name", "not a valid object name"),
    ("    - {kind: Secret, name: x, valuesKey: 'a b'}\n", "spec.valuesFrom[0].valuesKey", "not a valid data key"),
    ("    - {kind: Secret, name: x, targetPath: 'a..b'}\n", "spec.valuesFrom[0].targetPath", "empty key"),
    ("    - {kind: Secret, name: x, targetPath: 'a b'}\n", "spec.valuesFrom[0].targetPath", "not a target path"),
    ("    - {kind: Secret, name: x, targetPath: 'a[999999999]'}\n", "spec.valuesFrom[0].targetPath",
     "list index 999999999 is over the maximum of 65536"),
    ("    - {kind: Secret, name: x, targetPath: 'ключ'}\n", "spec.valuesFrom[0].targetPath", "only ASCII letters"),
    ("    - {kind: Secret, name: x, optional: 'yes'}\n", "spec.valuesFrom[0].optional", "true or false"),
    ("    - {kind: Secret, name: x, key: y}\n", "spec.valuesFrom[0].key", "unknown field"),
    ("    - just-a-name\n", "spec.valuesFrom[0]", "must be a mapping"),
])
def test_bad_entries_name_file_line_field_and_fix(tmp_path: Path, entry: str, field: str, problem: str) -> None:
    file = write(tmp_path, entry)
    with pytest.raises(PackageError) as err:
        load_package(file)
    assert err.value.field == field and problem in err.value.problem and err.value.fix
    assert err.value.line == 8 and str(err.value).startswith(f"{file}:8: {field}: ")


def objects(spec: PackageSpec, **data: dict[str, bytes] | None) -> dict[tuple[str, str, str], ObjectData]:
    out = {}
    for ref in spec.values_from:
        got = data.get(ref.name.replace("-", "_"))
        out[(ref.kind, "demo", ref.name)] = ObjectData(ref.kind, "demo", ref.name, got)
    return out


def test_composes_in_order_with_target_paths_and_remembers_secret_paths(tmp_path: Path) -> None:
    spec = load_package(write(tmp_path, "    - {kind: ConfigMap, name: base}\n"
                                        "    - {kind: Secret, name: creds}\n"
                                        "    - {kind: Secret, name: token, valuesKey: t, targetPath: 'api.tokens[1]'}\n"
                                        "    - {kind: ConfigMap, name: replicas, valuesKey: n, targetPath: replicas}\n"
                                        "    - {kind: Secret, name: gone, optional: true}\n",
                              values="{replicas: 9}"))
    got = compose(spec, objects(spec, base={"values.yaml": b"a: {x: 1, z: 1}\nreplicas: 1\n"},
                                creds={"values.yaml": b"a: {z: 2}\ndb: {user: u, password: hunter22}\n"},
                                token={"t": b"tok-123"}, replicas={"n": b"3"}, gone=None))
    assert got.values == {"a": {"x": 1, "z": 2}, "replicas": 1, "db": {"user": "u", "password": "hunter22"}}
    assert [t.assignments for t in got.targets] == [((("api", "tokens", 1), "tok-123"),), ((("replicas",), 3),)]
    assert got.secret_paths == (("a", "z"), ("db", "user"), ("db", "password"), ("api", "tokens", 1))
    # Through resolve: after valuesFiles, before inline values, which win over a targetPath value at their own
    # top-level key too (fluxcd/pkg/chartutil v1.27.1 values.go ChartValuesFromReferences, as helm-controller
    # v1.6.3 runs it: spec.values merged again at each targetPath entry and at the end; the oracle agrees).
    layer = ValuesLayer(got.entries, "spec.valuesFrom", secret_paths=got.secret_paths, digest=got.digest)
    resolved = ResolveCache().resolve(spec, lambda s: [layer])
    assert resolved.values["replicas"] == 9 and resolved.values["db"]["password"] == "hunter22"
    assert resolved.values["api"] == {"tokens": [None, "tok-123"]}
    assert resolved.secret_paths == got.secret_paths
    again = compose(spec, objects(spec, base={"values.yaml": b"a: {x: 1, z: 1}\nreplicas: 1\n"},
                                  creds={"values.yaml": b"a: {z: 2}\ndb: {user: u, password: other}\n"},
                                  token={"t": b"tok-123"}, replicas={"n": b"3"}, gone=None))
    assert again.digest != got.digest
    changed = ResolveCache().resolve(spec, lambda s: [ValuesLayer(again.entries, "v", digest=again.digest)])
    assert changed.spec_digest != resolved.spec_digest


def test_missing_objects_and_keys_fail_unless_optional_other_errors_always(tmp_path: Path) -> None:
    spec = load_package(write(tmp_path, "    - {kind: Secret, name: creds}\n"))
    with pytest.raises(ValuesError, match="Secret demo/creds not found") as err:
        compose(spec, objects(spec, creds=None))
    assert err.value.reason == "ValuesError" and err.value.field == "spec.valuesFrom[0]" and err.value.line == 8
    with pytest.raises(ValuesError, match=r"Secret demo/creds has no key 'values\.yaml'"):
        compose(spec, objects(spec, creds={"other": b"x"}))
    optional = load_package(write(tmp_path, "    - {kind: Secret, name: creds, optional: true}\n"))
    assert compose(optional, objects(optional, creds=None)).values == {}
    assert compose(optional, objects(optional, creds={"other": b"x"})).values == {}
    forbidden = {("Secret", "demo", "creds"): ObjectData("Secret", "demo", "creds", None, "Forbidden (403)")}
    with pytest.raises(ValuesError, match="cannot read Secret demo/creds: Forbidden"):
        compose(optional, forbidden)
    with pytest.raises(ValuesError, match="must hold a mapping, not a list"):
        compose(spec, objects(spec, creds={"values.yaml": b"- a\n- b\n"}))
    with pytest.raises(ValuesError, match="line 2: YAML error") as bad:
        compose(spec, objects(spec, creds={"values.yaml": b"a: [unclosed\n"}))
    assert "unclosed" not in bad.value.problem  # the message names the object, never its content
    with pytest.raises(ValuesError, match="not UTF-8"):
        compose(spec, objects(spec, creds={"values.yaml": b"\xff\xfe"}))
    with pytest.raises(ValuesError, match="were not read"):
        ResolveCache().resolve(spec)


def test_size_limit_and_alias_bombs_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = load_package(write(tmp_path, "    - {kind: ConfigMap, name: big}\n"))
    monkeypatch.setenv("HELMDECK_MAX_VALUES_BYTES", "64")
    with pytest.raises(ValuesError, match="over the limit of 64 bytes") as err:
        compose(spec, objects(spec, big={"values.yaml": b"a: " + b"x" * 100}))
    assert "HELMDECK_MAX_VALUES_BYTES" in err.value.fix
    monkeypatch.delenv("HELMDECK_MAX_VALUES_BYTES")
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefg", "bcdefgh", strict=True))
    with pytest.raises(ValuesError, match="aliases expand past"):
        compose(spec, objects(spec, big={"values.yaml": bomb.encode()}))


def test_masker_masks_secret_sourced_values_by_path_and_remembered_text() -> None:
    from engine.base.masking import Masker

    masker = Masker(b"k" * 32)
    values = {"settings": {"greeting": "hi", "motd": "open-sesame", "color": "blue"}, "l": ["a", "b"]}
    shown = masker.mask_values(values, secret_paths=[("settings", "greeting"), ("l",), ("absent", "x")])
    assert shown["settings"]["greeting"] == masker.mask("hi")  # short: masked by its path
    assert shown["l"] == [masker.mask("a"), masker.mask("b")] and shown["settings"]["color"] == "blue"
    assert shown["settings"]["motd"] == "open-sesame"
    masker.remember(["open-sesame", "ab"])
    assert masker.mask_values(values)["settings"]["motd"] == masker.mask("open-sesame")
    manifest = "kind: ConfigMap\ndata:\n  motd: \"say open-sesame\"\n  b64: b3Blbi1zZXNhbWU=\n  short: ab\n"
    masked = masker.mask_manifest(manifest)
    assert "open-sesame" not in masked and "b3Blbi1zZXNhbWU=" not in masked and "short: ab" in masked
    assert masker.mask("open-sesame") in masked
    assert "open-sesame" not in masker.mask_text("NOTES: open-sesame", {})
    assert masker.scrub("no secret here") == "no secret here"


def test_masking_by_path_is_one_walk_whatever_the_number_of_paths() -> None:
    """A ~1 MB Secret of 16,500 keys gives 49,500 secret paths: masking them path by path copied the whole
    tree once per path (about 30 s, the app frozen on the Values tab); one walk takes about a second."""
    from engine.base.masking import Masker

    masker = Masker(b"k" * 32)
    values = {f"k{i}": {"name": f"value-{i}", "list": [1, 2, True], "nested": {"x": None, "y": "z"}}
              for i in range(16_500)}
    values["plain"] = {"kept": "visible", "apiToken": "t0ken-by-key"}
    paths = [p for p in leaf_paths(values) if p[0] != "plain"]
    assert len(paths) == 66_000
    start = time.perf_counter()
    shown = masker.mask_values(values, secret_paths=[*paths, ("k7", "list", 9), ("plain", "kept", "deeper")])
    assert time.perf_counter() - start < 10, "masking must not copy the values once per path"
    assert shown["k7"] == {"name": masker.mask("value-7"), "list": [masker.mask(1), masker.mask(2), True],
                           "nested": {"x": None, "y": masker.mask("z")}}  # booleans and nulls carry no secret
    assert shown["plain"] == {"kept": "visible", "apiToken": masker.mask("t0ken-by-key")}
    assert values["k7"]["name"] == "value-7"  # a copy: the values are not changed


def test_values_are_written_by_libyaml_and_read_back_the_same(tmp_path: Path) -> None:
    """The Values tab and helm's values file use libyaml's emitter (the pure-Python one took about 5 s
    for 1 MB); what it writes reads back equal, awkward strings included."""
    import yaml

    from engine.base.masking import Masker
    from engine.helm.cli import _values_file

    values = {"s": ["yes", "0123", "null", "~", "1e3", "é ü 日本", "a: b", "- x", "#c", "multi\nline\n", "", " pad "],
              "n": {"i": 1, "f": 1.5, "b": False, "z": None}, "k": {f"k{i}": f"value-{i}" for i in range(2000)}}
    with _values_file(values) as path:
        assert yaml.safe_load(path.read_text()) == values and path.stat().st_mode & 0o777 == 0o600
    assert yaml.safe_load(Masker(b"k" * 32).values_yaml(values, reveal=True)) == values


def test_every_remembered_secret_stays_masked_and_scrubbing_stays_fast() -> None:
    """20,000 remembered values (a large Secret) are all masked, the first as well as the last (a cap of
    4,096 let the oldest show again), overlapping ones whole, and one scrub of 100 kB stays well under a
    second here (an alternation of that many texts took about 45 s); the bound is loose, a guard on the
    complexity, not a speed target."""
    from engine.base.masking import Masker

    masker = Masker(b"k" * 32)
    secrets = [f"s3cret-{i:05d}-{'x' * (i % 7)}" for i in range(20_000)]
    masker.remember(secrets)
    masker.remember(["s3cret-00001-x-and-more", "L" * 500 + "-long-one"])
    text = ("filler text " * 8_000) + secrets[0] + " " + secrets[-1] + " s3cret-00001-x-and-more " + "L" * 500
    text += "-long-one"
    start = time.perf_counter()
    scrubbed = masker.scrub(text)
    elapsed = time.perf_counter() - start
    assert secrets[0] not in scrubbed and secrets[-1] not in scrubbed and "-long-one" not in scrubbed
    assert masker.mask("s3cret-00001-x-and-more") in scrubbed  # the longer secret masked whole
    assert masker.mask(secrets[0]) in scrubbed and scrubbed.startswith("filler text ")
    assert elapsed < 5.0, f"scrub must not try every secret at each position ({elapsed:.1f} s)"


def test_target_path_values_inside_inline_values_stay_and_are_parsed_as_flux(tmp_path: Path) -> None:
    # Flux's own case "target path precedence over all" (fluxcd/pkg chartutil v1.27.1 values_test.go): the list
    # item set by targetPath survives the inline list, since helm's --set parser sets it in the very list the
    # inline values hold (ChartValuesFromReferences merges them first, sharing it; the oracle agrees).
    spec = load_package(write(tmp_path, "    - {kind: Secret, name: key, valuesKey: k,"
                                        " targetPath: 'nested.configuration[0]'}\n"
                                        "    - {kind: ConfigMap, name: values}\n"
                                        "    - {kind: ConfigMap, name: flags, valuesKey: f, targetPath: flags}\n",
                              values="{nested: {configuration: [list, item, option]}}"))
    got = compose(spec, objects(spec, key={"k": b"value"}, flags={"f": b"{a\\,b,on}"},
                                values={"values.yaml": b"flat: value\nnested: {configuration: [one, two, three]}\n"}))
    resolved = ResolveCache().resolve(spec, lambda s: [ValuesLayer(got.entries, "v", digest=got.digest)])
    assert resolved.values["nested"] == {"configuration": ["value", "item", "option"]}
    assert resolved.values["flat"] == "value" and resolved.values["flags"] == ["a,b", "on"]
    with pytest.raises(ValuesError, match="Secret demo/key key 'k' is not a value") as err:
        compose(spec, objects(spec, key={"k": b"x,hidden"}, flags={"f": b"1"}, values={"values.yaml": b"{}"}))
    assert "hidden" not in str(err.value) and err.value.field == "spec.valuesFrom[0]" and "\\," in err.value.fix
    with pytest.raises(ValuesError, match=r"key 'oops' has no value"):  # a ConfigMap's text may be shown
        compose(spec, objects(spec, key={"k": b"1"}, flags={"f": b"1,oops"}, values={"values.yaml": b"{}"}))
    through = compose(spec, objects(spec, key={"k": b"1"}, flags={"f": b"1,flat.x=2"},
                                    values={"values.yaml": b"flat: value\n"}))
    with pytest.raises(ValuesError, match="flat holds a str, not a map") as err:
        ResolveCache().resolve(spec, lambda s: [ValuesLayer(through.entries, "v", digest=through.digest)])
    assert err.value.field == "spec.valuesFrom[2]"


def test_a_key_is_read_as_helm_reads_values(tmp_path: Path) -> None:
    # helm's ReadValues (sigs.k8s.io/yaml, go-yaml v2 rules), as Flux's ChartValuesFromReferences reads the key:
    # y is true (a key too), 0o17 is 15, 1e3 a number, a quoted "y" stays a string; the differential test
    # against Flux's code is tests/engine/package/test_flux_oracle.py::
    # test_values_from_content_is_read_as_helm_reads_values.
    spec = load_package(write(tmp_path, "    - {kind: ConfigMap, name: base}\n"))
    got = compose(spec, objects(spec, base={"values.yaml": b"a: y\nb: 0o17\nc: 1e3\nd: 'y'\ny: on\n"}))
    assert got.values == {"a": True, "b": 15, "c": 1000.0, "d": "y", "true": True}
    with pytest.raises(ValuesError, match="an infinite number cannot be a value"):
        compose(spec, objects(spec, base={"values.yaml": b"a: .inf\n"}))
