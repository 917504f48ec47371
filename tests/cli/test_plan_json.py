"""``helmdeck plan -o json`` against its documented shape (docs/plan.schema.json, docs/plan-json.md); values from
Secrets never in a plan (text, JSON, markdown) nor in the log; "why" names each spec field that changed."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.runtime.plan import PackagePlan, Plan
from helmdeck.cli import EXIT_CHANGES, EXIT_NO_CHANGES
from tests.cli.test_cli import cluster_args, helmdeck
from tests.engine.resolve.test_values_from import GREETING, MOTD, package, secret
from tests.reconcile_harness import EXAMPLES

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "plan.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())


def check(doc: Any) -> None:
    """Raise jsonschema's ValidationError naming the first place ``doc`` leaves the documented shape."""
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    VALIDATOR.validate(doc)


def sample() -> Plan:
    upgrade = PackagePlan("shop", "web", "web", "web.yaml", "OutOfSync", "upgrade", ("chart 0.1.0 → 0.2.0",),
                          changed=("Deployment/shop/web",), rendered=True, revision=3, values_diff="--- a\n+++ b\n")
    return Plan((upgrade,
                 PackagePlan("shop", "api", "api", "api.yaml", "Absent", "wait", ("waiting for shop/db",),
                             waiting_for=("shop/db",)),
                 PackagePlan("shop", "db", "db", "db.yaml", "Unknown", None,
                             error="db.yaml: spec.chart: no Chart.yaml"),
                 PackagePlan("shop", "old", "", "", "Orphaned", "uninstall", ("no package ...",),
                             removed=("ConfigMap/shop/old",), rendered=True, revision=1),
                 PackagePlan("shop", "held", "held", "held.yaml", "Suspended", None)),
                ("bad.yaml:3: spec.bogus: unknown field",), "skipped 1 object helmdeck does not read: Namespace (1)",
                ("flux.yaml:9: spec.kubeConfig: left out",))


def test_the_schema_names_every_field_plan_writes_and_no_other() -> None:
    fields = {f.name for f in dataclasses.fields(PackagePlan)} | {"changes"}
    package_schema = SCHEMA["$defs"]["package"]
    assert set(package_schema["properties"]) == fields == set(package_schema["required"])
    assert set(SCHEMA["properties"]) == set(json.loads(sample().as_json())) == set(SCHEMA["required"])


def test_a_plan_validates_and_a_plan_off_the_shape_does_not() -> None:
    doc = json.loads(sample().as_json())
    check(doc)
    for broken in ({**doc, "extra": 1}, {**doc, "packages": [{**doc["packages"][0], "state": "Happy"}]},
                   {**doc, "packages": [{k: v for k, v in doc["packages"][0].items() if k != "reasons"}]},
                   {**doc, "packages": [{**doc["packages"][0], "revision": 0}]}):
        with pytest.raises(jsonschema.ValidationError):
            check(broken)


@pytest.mark.cluster
def test_plan_never_shows_a_secret_value_and_why_names_each_changed_spec_field(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
) -> None:
    chart = tmp_path / "settings"
    shutil.copytree(EXAMPLES / "charts" / "settings", chart)
    secret(core_api, namespace, "creds", {"values.yaml": f"settings: {{greeting: {GREETING}}}\n"})
    secret(core_api, namespace, "motd", {"text": MOTD})
    pkgs = tmp_path / "p"
    package(pkgs, namespace, "app", "    - {kind: Secret, name: creds}\n"
                                    "    - {kind: Secret, name: motd, valuesKey: text, targetPath: settings.motd}\n",
            "{settings: {color: blue}}")
    path = pkgs / "app.yaml"
    path.write_text(path.read_text().replace(str(EXAMPLES / "charts" / "settings"), str(chart)))
    log = tmp_path / "log"
    args = cluster_args(helm, kube_target, namespace, pkgs, log)

    def plans() -> dict[str, str]:
        """Every form of the plan, each checked: no Secret value in it; the JSON in its documented shape."""
        out = {}
        for form in ("text", "json", "markdown"):
            proc = helmdeck("plan", "-o", form, *args)
            assert proc.returncode in (EXIT_NO_CHANGES, EXIT_CHANGES), proc.stdout + proc.stderr
            for value in (GREETING, MOTD, "s3cr3t-next"):
                assert value not in proc.stdout + proc.stderr, (form, value)
            out[form] = proc.stdout
        check(json.loads(out["json"]))
        return out

    installing = json.loads(plans()["json"])["packages"][0]
    assert installing["action"] == "install" and "settings" in installing["values_diff"]
    assert helmdeck("reconcile", "--once", "--no-lease", *args).returncode == 0
    assert json.loads(plans()["json"])["changes"] is False
    # Three spec fields change at once: the chart's version, the values (a Secret's too), commonMetadata.
    (chart / "Chart.yaml").write_text((chart / "Chart.yaml").read_text().replace("version: 0.1.0", "version: 0.2.0"))
    secret(core_api, namespace, "creds", {"values.yaml": "settings: {greeting: s3cr3t-next}\n"}, replace=True)
    path.write_text(path.read_text().replace("color: blue", "color: green")
                    + "  commonMetadata:\n    labels: {team: shop}\n")
    forms = plans()
    [app] = json.loads(forms["json"])["packages"]
    assert (app["action"], app["revision"]) == ("upgrade", 1)
    assert app["reasons"] == ["chart 0.1.0 → 0.2.0", "values changed", "post-renderers or commonMetadata changed"]
    assert "+  color: green" in app["values_diff"] and "greeting: '••••••" in app["values_diff"]
    assert "values changed" in forms["text"] and "post-renderers or commonMetadata changed" in forms["markdown"]
    for value in (GREETING, MOTD, "s3cr3t-next"):
        assert value not in log.read_text()
