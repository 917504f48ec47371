"""``--kustomize DIR`` without a cluster: the real kustomize builds tests/data/flux-repo, Flux's post-build
substitution (kustomize-controller's docs, "Post build variable substitution") is applied to each object, and
the objects are read by the package loader; bad YAML, bomb inputs and missing variables are clear errors."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from engine.base.fields import PackageError
from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.package.kustomize import BuiltObject, build, generated_resources, object_file, objects, write_objects
from engine.package.load import said_of
from engine.package.substitute import (
    NO_VARIABLES,
    SubstitutionError,
    Variables,
    disabled,
    parse_var,
    read_vars_file,
    substitute,
    variables,
)
from engine.resolve.release import resolve
from engine.runtime.assemble import build_engine
from engine.runtime.drive.kustomized import KustomizeInput, KustomizeSource
from engine.sources.pin import PinError
from engine.storage.observer import Observer
from tests.engine.runtime.test_folder import Watching
from tui.chart_origin import origin_line

REPO = Path(__file__).resolve().parents[2] / "data" / "flux-repo"
VARS = {"namespace": "shop", "http_url": "http://127.0.0.1:1/charts", "oci_base": "127.0.0.1:2/t",
        "cluster_name": "staging"}


# -- Flux's substitution rules, as fluxcd/pkg/envsubst does them (checked against Flux's code in
# tests/engine/package/test_flux_oracle.py::test_substitution_is_flux_post_build) ---------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    ("a: ${x}", "a: 1"),
    ("a: ${unset:=d}", "a: d"),  # "${var:=default}": the default when unset
    ("a: ${empty:=d}", "a: d"),  # ... or empty
    ("a: ${empty:-d}", "a: d"),
    ("a: ${empty=d}", "a: d"),  # envsubst's "=" is its ":=" (parse.go parseDefaultFunc, funcs.go toDefault)
    ("a: ${unset=${x}2}", "a: 12"),  # a default may hold references
    ("a: ${x:=d}", "a: 1"),
    ("a: $${x}", "a: ${x}"),  # "$${var}" escapes: left as the literal ${var}
    ("a: $x $$ $$$", "a: $x $ $$"),  # "$$" is one "$" anywhere; "$x" is no reference
    ("a: ${x}${x}-${_y2}", "a: 11-z"),
])
def test_substitution_follows_flux(text: str, expected: str) -> None:
    assert substitute(text, {"x": "1", "empty": "", "_y2": "z"}) == expected


@pytest.mark.parametrize(("text", "problem"), [
    ("a: ${ x}", "a name must follow '${'"),  # envsubst: unable to parse variable name
    ("a: ${}", "a name must follow '${'"),
    ("a: ${x", "not closed"),  # missing closing brace
    ("a: ${unset-d}", "not closed"),  # "-" without ":" is not envsubst's
    ("a: ${unset:=d", "a default is not closed"),  # unable to parse substitution within function
    ("a: ${1}", "1 is not set"),  # any name is a reference; only the variables' names are checked
])
def test_references_flux_refuses_are_refused(text: str, problem: str) -> None:
    with pytest.raises(SubstitutionError, match=re.escape(problem)):
        substitute(text, {"x": "1"})


def test_no_variables_substitute_nothing() -> None:
    # fluxcd/pkg/kustomize kustomize_varsub.go SubstituteVariables: only with variables (or substituteStrategy Always)
    assert substitute("a: ${x:=d} $$", {}) == "a: ${x:=d} $$"


def test_a_missing_variable_names_every_one_missing() -> None:
    with pytest.raises(SubstitutionError) as err:
        substitute("a: ${b}\nc: ${d}\ne: ${b}", {"other": "1"})
    assert str(err.value) == "variables b, d are not set and have no default"
    assert err.value.names == ("b", "d")


def test_unimplemented_operators_are_named() -> None:
    with pytest.raises(SubstitutionError, match=r"\$\{x:1:2\} is a substitution helmdeck does not implement"):
        substitute("a: ${x:1:2}", {"x": "abc"})


def test_variable_values_lose_their_newlines_as_in_flux() -> None:
    # fluxcd/pkg/kustomize kustomize_varsub.go: strings.ReplaceAll(v, "\n", "") on every variable's value
    assert variables([("a", "x\ny\n")], "--var").values == {"a": "xy"}


@pytest.mark.parametrize("name", ["1abc", "a-b", "ä", "a b", "", "a\n"])
def test_variable_names_are_checked_as_flux_does(name: str) -> None:
    with pytest.raises(SubstitutionError, match=r"must match \^\[_\[:alpha:\]\]"):
        variables([(name, "v")], "--var")
    assert parse_var("good_1=a=b") == ("good_1", "a=b")


def test_the_disable_annotation_or_label() -> None:
    key = "kustomize.toolkit.fluxcd.io/substitute"
    assert disabled({"metadata": {"annotations": {key: "disabled"}}})
    assert disabled({"metadata": {"labels": {key: "disabled"}}})
    assert not disabled({"metadata": {"annotations": {key: "enabled"}}})


def test_later_sources_override_earlier_ones_and_secret_values_are_known() -> None:
    low = variables([("a", "1"), ("s", "hunter22")], "ConfigMap x", secret=True)
    high = variables([("a", "2")], "--var")
    merged = high.over(low)
    assert dict(merged.values) == {"a": "2", "s": "hunter22"}
    assert merged.secret_texts() == {"hunter22"}
    assert merged.origins["a"] == "--var"


def test_vars_files_yaml_configmap_secret_and_env(tmp_path: Path) -> None:
    plain = tmp_path / "vars.yaml"
    plain.write_text("cluster_name: prod\nreplicas: 3\nflag: true\n")
    assert dict(read_vars_file(plain).values) == {"cluster_name": "prod", "replicas": "3", "flag": "true"}
    objs = tmp_path / "objs.yaml"
    objs.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {region: eu, token: x}\n---\n"
                    "apiVersion: v1\nkind: Secret\nmetadata: {name: b}\ndata: {token: aHVudGVyMjI=}\n")
    read = read_vars_file(objs)
    assert dict(read.values) == {"region": "eu", "token": "hunter22"} and read.secret == {"token"}
    env = tmp_path / "vars.env"
    env.write_text("# comment\n\ncluster_name=prod\nurl=http://x/?a=b\n")
    assert dict(read_vars_file(env).values) == {"cluster_name": "prod", "url": "http://x/?a=b"}
    env.write_text("password hunter22\n")
    with pytest.raises(PackageError) as err:
        read_vars_file(env)
    assert "hunter22" not in str(err.value) and ":1:" in str(err.value)
    bad = tmp_path / "bad.yaml"
    bad.write_text("a-b: 1\n")
    with pytest.raises(PackageError, match="variable name 'a-b' is invalid"):
        read_vars_file(bad)
    nested = tmp_path / "nested.yaml"
    nested.write_text("a: {b: 1}\n")
    with pytest.raises(PackageError, match="a variable's value must be a string or number"):
        read_vars_file(nested)


# -- the real kustomize over the test repository -------------------------------------------------------------
def _variables(**more: str) -> Variables:
    return variables({**VARS, **more}.items(), "--var")


@pytest.mark.parametrize(("cluster", "web_values"), [
    ("staging", {"replicas": 1, "image": {"tag": "1.27-staging"}, "cluster": "staging",
                 "script": "echo ${not_a_variable}"}),
    ("prod", {"replicas": 3, "image": {"tag": "1.27"}, "cluster": "prod", "script": "echo ${not_a_variable}"}),
])
def test_each_overlay_builds_with_its_values_patch_and_substitution(
        tmp_path: Path, cluster: str, web_values: dict[str, object]) -> None:
    source = KustomizeSource(REPO / "clusters" / cluster, _variables(cluster_name=cluster))
    update = KustomizeInput(source, None, lambda _: None).load()
    assert update.errors == ()
    assert set(update.specs) == {("shop", "web"), ("shop", "api")}
    web = update.specs[("shop", "web")]
    assert json.loads(web.values_json) == web_values
    assert web.kind == "HelmRelease" and web.file.name == "shop.HelmRelease.web.yaml"
    assert web.chart_request is not None and web.chart_request.source.url == VARS["http_url"]
    api = update.specs[("shop", "api")]
    assert api.chart_request is not None and api.chart_request.source.url == "oci://127.0.0.1:2/t/web"
    assert update.skipped == "skipped 2 objects helmdeck does not read: Kustomization (1), Namespace (1)"


def test_no_variables_given_leaves_references_and_says_so() -> None:
    update = KustomizeInput(KustomizeSource(REPO / "clusters" / "prod"), None, lambda _: None).load()
    assert any("hold ${...} references left as written: no --var or --vars-from was given" in w
               for w in update.left_out)


def test_a_missing_variable_is_an_error_naming_it_and_the_object() -> None:
    given = variables([(k, v) for k, v in VARS.items() if k != "cluster_name"], "--var")
    update = KustomizeInput(KustomizeSource(REPO / "clusters" / "staging", given), None, lambda _: None).load()
    [err] = update.errors
    # Named where the repository declares the object (the checkout's path: tests/data/flux-repo/...).
    assert str(err) == ("tests/data/flux-repo/apps/base/web.yaml: HelmRelease shop/web: variable cluster_name is not "
                        "set and has no default (pass --var cluster_name=VALUE or --vars-from FILE, or give the "
                        "reference a default: ${cluster_name:=default} (set: http_url, namespace, oci_base))")
    assert set(update.specs) == {("shop", "api")}  # the other objects still count


def test_a_value_that_breaks_the_yaml_is_named(tmp_path: Path) -> None:
    update = KustomizeInput(KustomizeSource(REPO / "clusters" / "staging", _variables(cluster_name="a: [b")),
                            None, lambda _: None).load()
    [err] = update.errors
    assert ("HelmRelease shop/web: after substitution: object 3 of the build, line 17: YAML error: mapping values"
            in str(err))


def test_a_change_rewrites_only_the_objects_it_touched(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)
    source = KustomizeSource(repo / "clusters" / "prod", _variables())
    kin = KustomizeInput(source, None, lambda _: None)
    first = kin.load()
    patch = repo / "clusters" / "prod" / "web-values.yaml"
    patch.write_text(patch.read_text().replace("replicas: 3", "replicas: 4"))
    second = kin.load(set())
    assert second.changed == {("shop", "web")} and first.specs[("shop", "api")] == second.specs[("shop", "api")]
    # A build that fails keeps the last good packages and says why (kustomize names the file).
    patch.write_text("spec: [unclosed\n")
    third = kin.load(set())
    assert set(third.specs) == {("shop", "web"), ("shop", "api")} and third.changed == frozenset()
    assert "kustomize build failed" in str(third.errors[0]) and "web-values.yaml" in str(third.errors[0])


def test_a_path_without_kustomization_is_read_recursively_as_flux_generates_one(tmp_path: Path) -> None:
    infra = REPO / "infrastructure"
    assert [p.relative_to(infra) for p in generated_resources(infra)] == [
        Path("monitoring/alerts/rules.yaml"), Path("monitoring/namespace.yaml")]
    built = objects(build(infra).text, infra, None)
    assert sorted(o.file for o in built.objects) == ["_cluster.Namespace.monitoring.yaml",
                                                     "monitoring.ConfigMap.alert-rules.yaml"]
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)
    (repo / "notes.yaml").write_text("just: values\n")  # not an object: left out, as Flux's generator does
    assert [p.relative_to(repo) for p in generated_resources(repo)] == [
        Path("apps/base"), Path("clusters/prod"), Path("clusters/staging"),  # taken whole: their own kustomization
        Path("infrastructure/monitoring/alerts/rules.yaml"), Path("infrastructure/monitoring/namespace.yaml")]


def test_bad_yaml_and_bombs_are_clear_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "p"
    path.mkdir()
    (path / "kustomization.yaml").write_text("resources: [a.yaml]\n")
    (path / "a.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a\n")
    with pytest.raises(PackageError, match=r"kustomize build failed: .*a\.yaml"):
        build(path)
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(8))
    (path / "a.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n"
                                 + "".join(f"  {line}\n" for line in laughs.splitlines()))
    with pytest.raises(PackageError) as err:  # refused before kustomize reads it: kustomize expands it for minutes
        build(path)
    assert str(err.value) == (f"{path / 'a.yaml'}:10: aliases expand past 1000000 nodes (write the values out or "
                              "use fewer nested aliases)")
    # More objects than the limit (HELMDECK_MAX_DOCUMENTS), more output than HELMDECK_MAX_KUSTOMIZE_BYTES,
    # deeper than HELMDECK_MAX_YAML_DEPTH: each names its limit and variable.
    (path / "a.yaml").write_text("".join(f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}}}\n"
                                         for i in range(30)))
    monkeypatch.setenv("HELMDECK_MAX_DOCUMENTS", "20")
    with pytest.raises(PackageError, match=r"more than 20 documents \(split the file, or set HELMDECK_MAX_DOCUMENTS"):
        objects(build(path).text, path, None)
    monkeypatch.setenv("HELMDECK_MAX_KUSTOMIZE_BYTES", "1000")
    with pytest.raises(PackageError, match=r"printed more than 1000 bytes.*HELMDECK_MAX_KUSTOMIZE_BYTES"):
        build(path)
    monkeypatch.delenv("HELMDECK_MAX_KUSTOMIZE_BYTES")
    deep = "x: " + "[" * 80 + "]" * 80
    (path / "a.yaml").write_text(f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: a}}\ndata: {{}}\n{deep}\n")
    with pytest.raises(PackageError) as err:
        objects(build(path).text, path, None)
    assert "nesting deeper than 64 levels" in str(err.value) or "kustomize build failed" in str(err.value)


def test_a_substituted_value_cannot_blow_an_object_past_the_limit(tmp_path: Path) -> None:
    big = "x" * 300_000
    update = KustomizeInput(KustomizeSource(REPO / "clusters" / "staging", _variables(cluster_name=big)),
                            None, lambda _: None).load()
    assert update.errors == ()  # one reference: 300 kB is within 1 MiB
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {a: '${v}${v}${v}${v}'}\n"
    built = objects(text, tmp_path, variables([("v", big)], "--var"))
    [err] = built.errors
    assert "over the limit of 1048576 bytes" in str(err) and built.kept == {"_cluster.ConfigMap.a.yaml"}


def test_an_object_with_only_an_escape_is_substituted(tmp_path: Path) -> None:
    # envsubst reads $$ as one $ wherever it is (fluxcd/pkg/envsubst), so an object holding no ${ changes too
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {a: 'cost: $$5'}\n"
    [built] = objects(text, tmp_path, variables([("v", "1")], "--var")).objects
    assert "cost: $5" in built.text and "$$" not in built.text


def test_object_files_are_stable_and_safe(tmp_path: Path) -> None:
    assert object_file("HelmRelease", "apps", "web") == "apps.HelmRelease.web.yaml"
    assert object_file("Namespace", "", "apps") == "_cluster.Namespace.apps.yaml"
    odd = object_file("ConfigMap", "a", "../../etc/passwd")
    assert odd.startswith("object-") and "/" not in odd
    built = objects("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", tmp_path, NO_VARIABLES)
    (tmp_path / "old.yaml").write_text("x")
    written = write_objects(tmp_path, built.objects)
    assert written == {tmp_path / "old.yaml", tmp_path / "_cluster.ConfigMap.a.yaml"}
    assert (tmp_path / "_cluster.ConfigMap.a.yaml").stat().st_mode & 0o077 == 0
    assert write_objects(tmp_path, built.objects) == set()  # unchanged: nothing rewritten


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The test repository in a git checkout of its own."""
    repo = tmp_path / "checkout"
    shutil.copytree(REPO, repo)
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    return repo


async def test_long_running_modes_rebuild_when_the_checkout_changes(tmp_path: Path, checkout: Path) -> None:
    repo = checkout
    vars_file = tmp_path / "vars" / "cluster.env"
    vars_file.parent.mkdir()
    vars_file.write_text("cluster_name=staging\n")
    given = variables([(k, v) for k, v in VARS.items() if k != "cluster_name"], "--var")
    kin = KustomizeInput(KustomizeSource(repo / "clusters" / "staging", given, (vars_file,)), None, lambda _: None,
                         debounce_ms=300, step_ms=50)
    assert kin.watch_roots() == [repo, vars_file.parent]
    assert kin.load().errors == ()
    async with Watching(kin) as watching:
        api = repo / "apps" / "base" / "api.yaml"  # outside the overlay's folder, read through ../../apps/base
        api.write_text(api.read_text().replace("port: 8080", "port: 8081"))
        update = await watching.next()
        assert update.changed == {("shop", "api")}
        (repo / "README.md").write_text("not read by kustomize\n")
        assert await watching.collect_for(1.0) == []
        vars_file.write_text("cluster_name=qa\n")
        update = await watching.next()
        assert update.changed == {("shop", "web")}
        assert json.loads(update.specs[("shop", "web")].values_json)["cluster"] == "qa"


def test_an_object_that_opts_out_is_left_as_built(tmp_path: Path) -> None:
    text = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n"
            "    kustomize.toolkit.fluxcd.io/substitute: disabled\ndata: {script: 'echo ${HOME}'}\n---\n"
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\ndata: {x: '${v}'}\n")
    built = objects(text, tmp_path, variables([("v", "1")], "--var"))
    assert built.errors == ()
    a, b = built.objects
    assert "echo ${HOME}" in a.text and "x: '1'" in b.text


def test_unchanged_objects_are_not_parsed_again(tmp_path: Path) -> None:
    text = "".join(f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c{i}}}\ndata: {{x: '${{v}}'}}\n"
                   for i in range(3))
    memo: dict[str, BuiltObject] = {}
    given = variables([("v", "1")], "--var")
    first = objects(text, tmp_path, given, memo)
    second = objects(text.replace("c2}", "c9}"), tmp_path, given, memo)
    assert [a is b for a, b in zip(first.objects, second.objects, strict=True)] == [True, True, False]
    assert len(memo) == 3  # only the last build's objects are kept


def test_the_version_picker_does_not_pin_into_the_built_files() -> None:
    source = KustomizeSource(REPO / "clusters" / "prod", _variables(cluster_name="prod"))
    engine = build_engine(KubeTarget(), Helm("helm"), source.path, observer=Observer(None), online=False,
                    watch_packages=False, monitors=False, kustomize=source.path, kustomize_variables=source.variables)
    assert set(engine.packages) == {("shop", "web"), ("shop", "api")}
    with pytest.raises(PinError, match=r"shop/web is built by --kustomize from .*clusters/prod: pin the chart "
                                       "version in the repository"):
        engine.plan_pin(("shop", "web"), "1.2.0")


def _repository(root: Path) -> Path:
    """A repository: ``apps/base`` holds a Package whose chart is ``../chart`` (relative to its file), one whose
    chart folder is missing, and a HelmRelease with a Flux field helmdeck leaves out; ``apps/staging`` is an
    overlay of it with a patch. Returns the overlay."""
    examples = Path(__file__).resolve().parents[3] / "examples" / "charts"
    shutil.copytree(examples / "web", root / "apps" / "chart")
    base, staging = root / "apps" / "base", root / "apps" / "staging"
    base.mkdir()
    staging.mkdir()
    package = ("apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata: {{name: {name}, namespace: shop}}\n"
               "spec:\n  chart: {chart}\n  valuesFiles: [values/{name}.yaml]\n")
    (base / "values").mkdir()
    (base / "values" / "p.yaml").write_text("replicas: 2\n")
    (base / "values" / "bad.yaml").write_text("replicas: 1\n")
    (base / "p.yaml").write_text(package.format(name="p", chart="../chart"))
    (base / "bad.yaml").write_text(package.format(name="bad", chart="../no-chart"))
    (base / "hr.yaml").write_text(
        "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: hr, namespace: shop}\n"
        "spec:\n  interval: 5m\n  kubeConfig: {secretRef: {name: remote}}\n  chart:\n    spec:\n      chart: web\n"
        "      sourceRef: {kind: HelmRepository, name: charts}\n---\n"
        "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {name: charts, namespace: shop}\n"
        "spec: {url: 'https://charts.example.com'}\n")
    (base / "kustomization.yaml").write_text("resources: [p.yaml, bad.yaml, hr.yaml]\n")
    (staging / "kustomization.yaml").write_text(
        "resources: [../base]\npatches:\n- target: {kind: Package, name: p}\n"
        "  patch: '[{\"op\": \"add\", \"path\": \"/spec/timeout\", \"value\": \"7m\"}]'\n")
    return staging


def test_a_built_object_is_read_and_named_as_the_repository_declares_it(tmp_path: Path) -> None:
    """Paths in a built object resolve against the file that declared it in the repository (kustomize's origin
    annotation), as the folder reader resolves a package file's, and every message names that file (as the
    repository does) and the object, never the build's private copy: they named <tmp>/helmdeck-kustomize-*/
    shop.Package.p.yaml and looked for <tmp>/chart."""
    root = tmp_path / "repo"
    overlay = _repository(root)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    kin = KustomizeInput(KustomizeSource(overlay), None, lambda _: None, allow_unsupported=True)
    update = kin.load()
    spec = update.specs[("shop", "p")]
    assert spec.chart_path == (root / "apps" / "chart").resolve()  # ../chart from apps/base/p.yaml
    assert spec.values_files == ((root / "apps" / "base" / "values" / "p.yaml").resolve(),)
    assert spec.timeout == 420  # the overlay's patch holds: the built object is what is read
    assert (spec.declared_in, spec.declared_file) == ("apps/base/p.yaml", (root / "apps" / "base" / "p.yaml").resolve())
    assert origin_line(spec) == "local ../chart"  # the Overview's source line, as the repository file says it
    [bad] = update.errors
    assert str(bad).startswith("apps/base/bad.yaml (Package shop/bad): spec.chart: no Chart.yaml in "
                               "apps/no-chart "), bad
    [left_out] = [w for w in update.left_out if "kubeConfig" in w]
    assert left_out.startswith("apps/base/hr.yaml (HelmRelease shop/hr): spec.kubeConfig: "), left_out
    said = "\n".join([str(bad), *update.left_out, spec.declared_in])
    assert str(tmp_path) not in said and "helmdeck-kustomize" not in said
    # A problem found later, when a pass resolves the package (a values file turned bad), is said of it too.
    (root / "apps" / "base" / "values" / "p.yaml").write_text("replicas: [\n")
    with pytest.raises(PackageError) as resolving:
        resolve(spec)
    assert said_of(resolving.value, spec).startswith("apps/base/p.yaml (Package shop/p): spec.valuesFiles[0]: ")
    assert "helmdeck-kustomize" not in said_of(resolving.value, spec)
    # kustomize's own words (it names files from the folder it was run in) name them as the repository does.
    (overlay / "kustomization.yaml").write_text("resources: [../base, ../gone]\n")
    [failed] = [str(e) for e in kin.load().errors if "kustomize build failed" in str(e)]
    assert failed.startswith("apps/staging: kustomize build failed: ") and "apps/gone" in failed, failed
    assert str(tmp_path) not in failed and "pytest-of" not in failed, failed


def test_a_repository_named_by_its_root_outside_git(tmp_path: Path) -> None:
    """plan --base reads a commit's tree out of git: its root is given (KustomizeSource.root)."""
    root = tmp_path / "tree"
    overlay = _repository(root)
    update = KustomizeInput(KustomizeSource(overlay, root=root), None, lambda _: None).load()
    assert update.specs[("shop", "p")].declared_in == "apps/base/p.yaml"
    assert any(str(e).startswith("apps/base/hr.yaml (HelmRelease shop/hr): spec.kubeConfig: ") for e in update.errors)


def test_a_subfolder_with_its_own_kustomization_builds_in_a_generated_one(tmp_path: Path) -> None:
    """A path without a kustomization lists a subfolder holding one whole, as Flux's generator does; kustomize
    refused the absolute path it was given ("new root cannot be absolute")."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "kustomization.yaml").write_text("resources: [cm.yaml]\n")
    (tmp_path / "sub" / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n")
    (tmp_path / "b.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n")
    out = build(tmp_path)
    built = objects(out.text, tmp_path, None, base=out.base)
    assert {(o.ref, o.origin) for o in built.objects} == {
        ("ConfigMap a", tmp_path / "sub" / "cm.yaml"), ("ConfigMap b", tmp_path / "b.yaml")}
    assert all("origin" not in o.text and "annotations" not in o.text for o in built.objects)
