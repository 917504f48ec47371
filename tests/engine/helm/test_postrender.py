"""The post-renderer: text edits (pure), kustomize steps with the real kustomize, and real helm 3 and 4 runs."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client

from engine.base import wire
from engine.helm import Helm, UpgradeOptions, postrender
from engine.helm.kustomize import KustomizeMissing, find_kustomize
from engine.helm.postrender import StampError, parse_labels, render, stamp
from engine.helm.postrender_client import ANSWER_WITHIN, SOCKET_FLAG
from engine.helm.postrender_plugin import CONFIG_MAX_AGE, CONFIG_MAX_FILES, PLUGIN_NAME, install, prune_configs
from tests.conftest import EXAMPLES, helm_binary

OURS = {wire.ORIGIN_NAME: "web", wire.ORIGIN_NAMESPACE: "demo"}


def objects(text: str) -> list[Any]:
    return list(yaml.safe_load_all(text))


def test_block_labels_get_entries_and_everything_else_stays() -> None:
    text = (
        "---\n# Source: web/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
        "  labels:\n    app: web   # keep me\ndata:\n  enabled: 'yes'\n  octal: \"0777\"\n"
    )
    out = stamp(text, OURS)
    assert out == (
        "---\n# Source: web/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n"
        '  labels:\n    "helmdeck.dev/package-name": "web"\n    "helmdeck.dev/package-namespace": "demo"\n'
        "    app: web   # keep me\ndata:\n  enabled: 'yes'\n  octal: \"0777\"\n"
    )


def test_existing_label_is_overwritten_and_stamping_is_idempotent() -> None:
    text = "kind: ConfigMap\nmetadata:\n  labels:\n    helmdeck.dev/package-name: other\n  name: a\n"
    once = stamp(text, OURS)
    assert objects(once)[0]["metadata"]["labels"] == OURS
    assert stamp(once, OURS) == once


@pytest.mark.parametrize("meta", [
    "metadata:\n  name: a\n",                       # no labels
    "metadata:\n  labels:\n  name: a\n",            # null labels
    "metadata:\n  labels: {}\n  name: a\n",         # empty flow mapping
    "metadata:\n  labels: {app: web}\n  name: a\n", # flow mapping
    "metadata: {name: a}\n",                         # flow metadata
    "metadata: &m\n  name: a\n",                     # anchored
    "metadata:\n",                                   # null metadata
    "",                                              # no metadata at all
])
def test_every_metadata_shape_gets_the_labels(meta: str) -> None:
    text = f"apiVersion: v1\nkind: ConfigMap\n{meta}data:\n  x: '1'\n"
    before = objects(text)[0]
    after = objects(stamp(text, OURS))[0]
    expected = dict(((before.get("metadata") or {}).get("labels") or {}), **OURS)
    assert after["metadata"]["labels"] == expected
    assert after["data"] == {"x": "1"}
    assert {k: v for k, v in after["metadata"].items() if k != "labels"} == {
        k: v for k, v in (before.get("metadata") or {}).items() if k != "labels"}


def test_lists_empty_documents_and_comments() -> None:
    text = (
        "# only a comment\n---\n---\n\n---\napiVersion: v1\nkind: List\nitems:\n"
        "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n"
        "- {apiVersion: v1, kind: Secret, metadata: {name: b, labels: {x: y}}}\n"
        "---\nkind: ServiceList\nitems: []\n---\njust a scalar\n"
    )
    out = stamp(text, OURS)
    docs = objects(out)
    assert len(docs) == 5 and docs[:2] == [None, None] and docs[-1] == "just a scalar"
    items = docs[2]["items"]
    assert "labels" not in (docs[2].get("metadata") or {})
    assert items[0]["metadata"]["labels"] == OURS
    assert items[1]["metadata"]["labels"] == {"x": "y", **OURS}
    assert docs[3] == {"kind": "ServiceList", "items": []}
    assert out.startswith("# only a comment\n---\n---\n\n---\n")


def test_aliased_labels_are_edited_once() -> None:
    text = ("kind: List\nitems:\n- kind: A\n  metadata:\n    name: a\n    labels: &l\n      x: y\n"
            "- kind: B\n  metadata:\n    name: b\n    labels: *l\n")
    out = stamp(text, OURS)
    assert out.count(f"\"{wire.ORIGIN_NAME}\":") == 1  # YAML loaders accept duplicate keys; helm's does not
    a, b = objects(out)[0]["items"]
    assert a["metadata"]["labels"] == b["metadata"]["labels"] == {"x": "y", **OURS}


def test_values_that_look_like_other_types_stay_strings() -> None:
    out = stamp("kind: A\nmetadata:\n  name: a\n", {"example.com/flag": "true", "example.com/num": "1.0"})
    assert objects(out)[0]["metadata"]["labels"] == {"example.com/flag": "true", "example.com/num": "1.0"}


def test_bad_input_and_arguments_raise() -> None:
    with pytest.raises(StampError, match="not valid YAML"):
        stamp("{a: b\n", OURS)
    with pytest.raises(StampError, match="labels is not a mapping"):
        stamp("kind: A\nmetadata:\n  labels: [a]\n", OURS)
    with pytest.raises(StampError):
        parse_labels(["no-equals"])
    with pytest.raises(StampError):
        parse_labels(["a=" + "x" * 64])
    assert parse_labels(["helmdeck.dev/maintenance=true", "a="]) == {"helmdeck.dev/maintenance": "true", "a": ""}
    assert postrender.run(["bad key=1"], b"")[0] == 2  # bad arguments: the manifests are not looked at


_names = st.text("abcdefghij-", min_size=1, max_size=8).map(lambda s: "a" + s + "z")
_scalars = st.one_of(st.text(max_size=12), st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False))


@settings(max_examples=150, deadline=None)
@given(
    docs=st.lists(st.fixed_dictionaries(
        {"apiVersion": st.just("v1"), "kind": st.sampled_from(["ConfigMap", "Secret", "Service"]),
         "metadata": st.fixed_dictionaries({"name": _names},
                                           optional={"labels": st.dictionaries(_names, _names, max_size=3),
                                                     "annotations": st.dictionaries(_names, st.text(max_size=8))}),
         "data": st.dictionaries(_names, _scalars, max_size=4)}), min_size=1, max_size=4),
    flow=st.booleans(),
)
def test_stamped_objects_equal_the_input_plus_labels(docs: list[dict[str, Any]], flow: bool) -> None:
    text = yaml.safe_dump_all(docs, default_flow_style=flow, sort_keys=False)
    out = objects(stamp(text, OURS))
    want = []
    for doc in docs:
        meta = dict(doc["metadata"], labels={**doc["metadata"].get("labels", {}), **OURS})
        want.append(dict(doc, metadata=meta))
    assert out == want


def test_annotations_go_beside_labels_in_every_shape() -> None:
    text = ("kind: A\n---\nkind: B\nmetadata:\n---\nkind: C\nmetadata:\n  name: c\n  labels: {x: y}\n"
            "---\nkind: D\nmetadata:\n  annotations:\n    old: v\n    note: before\n")
    out = objects(stamp(text, {"a": "b"}, {"note": "after: colon", "n": "1"}))
    want_ann = {"note": "after: colon", "n": "1"}
    assert out[0]["metadata"] == {"labels": {"a": "b"}, "annotations": want_ann}
    assert out[1]["metadata"] == {"labels": {"a": "b"}, "annotations": want_ann}
    assert out[2]["metadata"] == {"name": "c", "labels": {"x": "y", "a": "b"}, "annotations": want_ann}
    assert out[3]["metadata"] == {"annotations": {"old": "v", **want_ann}, "labels": {"a": "b"}}
    assert stamp(text, {}, {}) == text


def test_kustomize_steps_then_common_metadata_then_our_labels(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the kustomization directories go
    kustomize = str(helm_binary("kustomize"))
    text = ("# Source: flaky/templates/deployment.yaml\napiVersion: apps/v1\nkind: Deployment\n"
            "metadata:\n  name: app\nspec:\n  replicas: 1\n  template:\n    metadata:\n"
            "      labels: {app: web}\n    spec:\n      containers:\n        - name: app\n"
            "          image: busybox:1.36\n")
    config = {
        "kustomize": kustomize,
        "postRenderers": [
            {"kustomize": {"patches": [{"patch": "- {op: replace, path: /spec/replicas, value: 4}",
                                        "target": {"kind": "Deployment", "name": "ap+"}}]}},
            {"kustomize": {"images": [{"name": "busybox", "newTag": "1.37"}]}},
        ],
        "commonMetadata": {"labels": {"team": "web", wire.ORIGIN_NAME: "theirs"}, "annotations": {"o": "ops"}},
    }
    (deploy,) = objects(render(text, OURS, config))
    assert deploy["spec"]["replicas"] == 4
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1.37"
    assert deploy["metadata"]["labels"] == {"team": "web", **OURS}  # helmdeck's own label wins
    assert deploy["metadata"]["annotations"] == {"o": "ops"}
    assert "team" not in deploy["spec"]["template"]["metadata"]["labels"]  # metadata only, as Flux's
    assert render("# nothing rendered\n", OURS, config) == "# nothing rendered\n"
    hook = "---\napiVersion: batch/v1\nkind: Job\nmetadata: {generateName: hook-}\nspec: {}\n"
    deploy2, job = objects(render(text + hook, OURS, config))  # kustomize would refuse the unnamed Job
    assert deploy2 == deploy and job["metadata"] == {"generateName": "hook-", "labels": {"team": "web", **OURS},
                                                     "annotations": {"o": "ops"}}
    assert objects(render(hook, OURS, config))[0]["metadata"]["generateName"] == "hook-"
    bad = {"kustomize": kustomize, "postRenderers": [{"kustomize": {"patches": [
        {"patch": "- {op: replace, path: /spec/nothing/here, value: 1}", "target": {"kind": "Deployment"}}]}}]}
    with pytest.raises(StampError, match="kustomize build failed"):
        render(text, OURS, bad)
    assert not list(Path(tmp_path).glob("helmdeck-kustomize-*"))


# -- real helm ------------------------------------------------------------------------------------


@pytest.mark.cluster
async def test_helm_template_and_install_stamp_every_resource(
    any_helm: Helm, namespace: str, core_api: client.CoreV1Api, tmp_path: Path,
) -> None:
    layout = install(tmp_path / "cache")
    assert (layout.plugins_dir / PLUGIN_NAME / "plugin.yaml").is_file()
    assert install(tmp_path / "cache") == layout  # idempotent, content-addressed
    stamped = {**OURS, wire.RESOURCE_MAINTENANCE: "true"}
    renderer = layout.renderer(stamped)

    rendered = await any_helm.template("web", namespace, EXAMPLES / "charts" / "web", {}, post_renderer=renderer)
    await any_helm.upgrade("web", namespace, EXAMPLES / "charts" / "web", {"replicas": 1},
                           UpgradeOptions(install=True, timeout=60, wait=False, post_renderer=renderer))
    kinds = {d["kind"]: d["metadata"]["labels"] for d in objects(rendered) if d}
    assert set(kinds) == {"Deployment", "Service", "Job"}  # Job: the test hook
    assert stamped.items() <= kinds["Deployment"].items() and stamped.items() <= kinds["Service"].items()
    # helm 3 post-renders the release manifest only; helm 4 post-renders hooks too.
    assert (stamped.items() <= kinds["Job"].items()) == ((await any_helm.version()).major >= 4)
    svc = core_api.read_namespaced_service("web", namespace).metadata
    deploy = client.AppsV1Api(core_api.api_client).read_namespaced_deployment("web", namespace).metadata
    assert svc is not None and stamped.items() <= (svc.labels or {}).items()
    assert deploy is not None and stamped.items() <= (deploy.labels or {}).items()
    # helm 4 finds the plugin in helmdeck's directory, never the user's.
    assert renderer.env(4) == {"HELM_PLUGINS": str(layout.plugins_dir)} and renderer.env(3) == {}


def test_wrapper_runs_standalone(tmp_path: Path) -> None:
    layout = install(tmp_path)
    proc = subprocess.run([str(layout.executable), "a=b"], input=b"kind: A\n", capture_output=True,
                          timeout=30, check=True, env={"PATH": "/usr/bin:/bin"})
    assert objects(proc.stdout.decode()) == [{"kind": "A", "metadata": {"labels": {"a": "b"}}}]


def test_the_executable_hands_the_render_to_this_process_and_renders_alone_without_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 36: a helm run's post-renderer costs a client start (python -S -E, built-in modules only), not a
    Python start with PyYAML: the render runs in the process that runs helm (its socket in the arguments).
    Without an answer there it renders alone, the same bytes, codes and messages."""
    layout = install(tmp_path)
    args = layout.renderer({"a": "b"}).args
    assert args[-1].startswith(SOCKET_FLAG)
    text = b"# Source: x\nkind: A\nmetadata: {name: a}\n"
    env = {"PATH": "/usr/bin:/bin"}

    def run(*argv: str, data: bytes = text) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([str(layout.executable), *argv], input=data, capture_output=True, timeout=30,
                              check=False, env=env)

    served, alone = run(*args), run(*args[:-1])
    assert served.returncode == alone.returncode == 0 and served.stdout == alone.stdout == stamp(
        text.decode(), {"a": "b"}).encode()
    dead = run(*args[:-1], f"{SOCKET_FLAG}{tmp_path / 'gone'}")  # helmdeck gone: rendered alone
    assert dead.returncode == 0 and dead.stdout == alone.stdout
    # helmdeck stopped (SIGSTOP: a paused replica): its socket takes the connection and never answers; the
    # render goes on alone after ANSWER_WITHIN, so helm's run ends as it would without the socket.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.bind(str(tmp_path / "silent"))
        silent.listen(1)
        started = time.monotonic()
        stuck = run(*args[:-1], f"{SOCKET_FLAG}{tmp_path / 'silent'}")
        waited = time.monotonic() - started
    assert stuck.returncode == 0 and stuck.stdout == alone.stdout
    assert ANSWER_WITHIN <= waited < ANSWER_WITHIN + 20, waited
    for bad, code in (("{a: b\n", 1), ("kind: A\n", 2)):
        extra = ("bad key=1",) if code == 2 else ()
        served, alone = run(*args, *extra, data=bad.encode()), run(*args[:-1], *extra, data=bad.encode())
        assert served.returncode == alone.returncode == code and served.stderr == alone.stderr != b""
    # The served render is this process's own.
    monkeypatch.setattr(postrender, "run", lambda _args, _data: (0, b"from the server\n", ""))
    assert run(*args).stdout == b"from the server\n"


def test_alias_bombs_and_deep_nesting_are_refused_visibly(tmp_path: Path) -> None:
    lines = ["kind: A", "metadata: {name: bomb}", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    bomb = "kind: B\n---\n" + "\n".join(lines) + "\n"
    deep = "kind: C\ndata: " + "[" * 10_000 + "]" * 10_000 + "\n"
    with pytest.raises(StampError, match=r"rendered manifests:\d+: aliases expand past 2000000 nodes"):
        stamp(bomb, OURS)
    with pytest.raises(StampError, match=r"rendered manifests:2: .*nesting"):
        stamp(deep, OURS)
    # The plugin (a copy of the script and the loader, outside helmdeck's tree) says it on stderr, exit 1.
    layout = install(tmp_path)
    proc = subprocess.run([str(layout.executable), "a=b"], input=bomb.encode(), capture_output=True, timeout=30,
                          check=False, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 1 and b"aliases expand past 2000000 nodes" in proc.stderr and not proc.stdout
    # A normal stream (comments, an anchor, a List) still gets its labels and nothing else.
    text = "# Source: a\nkind: A\nmetadata: {name: a}\nx: &x [1]\ny: *x\n---\nkind: List\nitems:\n- {kind: B}\n"
    assert objects(stamp(text, {"a": "b"})) == [
        {"kind": "A", "metadata": {"name": "a", "labels": {"a": "b"}}, "x": [1], "y": [1]},
        {"kind": "List", "items": [{"kind": "B", "metadata": {"labels": {"a": "b"}}}]},
    ]


def test_which_kustomize_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    own = helm_binary("kustomize")  # helmdeck's pinned build, in the real cache
    on_path = tmp_path / "bin" / "kustomize"
    on_path.parent.mkdir()
    on_path.write_text("#!/bin/sh\n")
    on_path.chmod(0o755)
    assert find_kustomize({"HELMDECK_KUSTOMIZE": str(on_path)}) == on_path  # explicit first
    assert find_kustomize({"PATH": str(on_path.parent)}) == own  # then the pinned build, before PATH
    monkeypatch.setenv("HELMDECK_CACHE", str(tmp_path / "empty-cache"))
    assert find_kustomize({"PATH": str(on_path.parent)}) == on_path
    with pytest.raises(KustomizeMissing, match="make build"):
        find_kustomize({"PATH": ""})
    with pytest.raises(KustomizeMissing, match="HELMDECK_KUSTOMIZE"):
        find_kustomize({"HELMDECK_KUSTOMIZE": "/nowhere/kustomize", "PATH": str(on_path.parent)})


def test_config_files_are_bounded_by_last_use_and_count(tmp_path: Path) -> None:
    layout = install(tmp_path)
    common = {"commonMetadata": {"labels": {"team": "web"}}}
    first = Path(layout.renderer(OURS, common).args[0].split("=", 1)[1])
    folder = first.parent
    now = time.time()
    stale = folder / ("a" * 32 + ".json")  # unused for longer than the age cap
    stale.write_text("{}")
    os.utime(stale, (now - CONFIG_MAX_AGE - 60,) * 2)
    crash = folder / ".config-left"  # a temporary file a crashed writer left
    crash.write_text("")
    os.utime(crash, (now - CONFIG_MAX_AGE - 60,) * 2)
    old = []
    for i in range(CONFIG_MAX_FILES + 5):  # more than the count cap, idle for two hours
        f = folder / f"{i:032x}.json"
        f.write_text("{}")
        os.utime(f, (now - 7200 - i,) * 2)
        old.append(f)
    os.utime(first, (now - 7200 + 10,) * 2)
    # Reusing a config touches it: it is the most recently used one now.
    assert layout.renderer(OURS, common).args[0] == f"--config={first}"
    assert first.stat().st_mtime > now - 5
    new = Path(layout.renderer(OURS, {"commonMetadata": {"labels": {"team": "db"}}}).args[0].split("=", 1)[1])
    left = {p.name for p in folder.iterdir()}
    assert new.name in left and first.name in left
    assert stale.name not in left and crash.name not in left
    assert len(left) == CONFIG_MAX_FILES
    assert old[0].name in left and old[-1].name not in left  # the least recently used went
    assert prune_configs(folder) == []  # nothing more to prune
    for i in range(10):  # over the count, but all used a minute ago: a render may be reading any of them
        (folder / f"{i:031x}z.json").write_text("{}")
    for f in folder.iterdir():
        os.utime(f, (now - 60,) * 2)
    assert len(list(folder.iterdir())) > CONFIG_MAX_FILES and prune_configs(folder) == []
