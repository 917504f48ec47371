"""Package objects of the API server go through the package files' loader: the same checks and wording, the
object's API path where a file's name would be, and what cannot move into the cluster refused by field."""

from __future__ import annotations

from typing import Any

from engine.package.load import load_objects, object_origin
from testkit.packages import package_doc


def _package(name: str, **spec: Any) -> dict[str, Any]:
    return package_doc(name, "apps", metadata={"uid": "u", "generation": 3, "managedFields": [{"manager": "kubectl"}]},
                       **{"chartRef": {"kind": "OCIRepository", "name": "web"}, **spec})


SOURCE = {"apiVersion": "helmdeck.dev/v1alpha1", "kind": "OCIRepository",
          "metadata": {"name": "web", "namespace": "apps", "resourceVersion": "7"},
          "spec": {"url": "oci://registry.example.com/charts/web", "ref": {"semver": "^1.0"}}}


def test_objects_become_packages_linked_to_their_sources() -> None:
    specs, errors = load_objects([_package("web", values={"a": 1}, timeout="90s")], [SOURCE])
    assert errors == []
    [spec] = specs
    assert spec.key == ("apps", "web") and spec.timeout == 90 and spec.values == {"a": 1}
    assert spec.file == object_origin("packages", "apps", "web")
    assert spec.chart_request is not None and spec.chart_request.source.url == "oci://registry.example.com/charts/web"


def test_what_cannot_move_into_the_cluster_is_refused_naming_the_field_and_the_others_carry_on() -> None:
    specs, errors = load_objects([
        _package("local", chart="../charts/web", chartRef=None),
        _package("files", valuesFiles=["prod.yaml"]),
        _package("missing", chartRef={"kind": "OCIRepository", "name": "nope"}),
        _package("bad", interval="soon"),
        _package("good"),
    ], [SOURCE])
    assert [s.name for s in specs] == ["good"]
    said = {e.file.name: (e.field, e.problem) for e in errors}
    assert said["local"] == ("spec.chart", "a chart folder on disk cannot move into the cluster")
    assert said["files"] == ("spec.valuesFiles", "values files on disk cannot move into the cluster")
    assert said["missing"][0] == "spec.chartRef" and "OCIRepository apps/nope does not exist" in said["missing"][1]
    assert said["bad"] == ("spec.interval", "'soon' is not a duration")
    assert str(errors[0]).startswith("/apis/helmdeck.dev/v1alpha1/namespaces/apps/packages/local: spec.chart: ")


def test_dependency_checks_are_the_folders() -> None:
    specs, errors = load_objects([_package("a", dependsOn=[{"name": "b"}]), _package("b", dependsOn=[{"name": "a"}]),
                                  _package("c", dependsOn=[{"name": "zzz"}])], [SOURCE])
    # the cycle refused; c waits for zzz (DependencyNotReady), as Flux's checkDependencies waits
    assert [s.name for s in specs] == ["c"]
    assert {e.file.name for e in errors} == {"a", "b"}
    assert all("dependency cycle" in e.problem for e in errors)


def test_a_package_naming_no_service_account_acts_as_the_default_one() -> None:
    # helmdeck controller --default-service-account, as Flux's: only where spec.serviceAccountName is absent.
    specs, errors = load_objects([_package("plain"), _package("named", serviceAccountName="deployer")], [SOURCE],
                                 "tenant")
    assert errors == []
    assert {s.name: s.service_account_name for s in specs} == {"plain": "tenant", "named": "deployer"}
    specs, _ = load_objects([_package("plain")], [SOURCE])
    assert specs[0].service_account_name == ""


def test_observed_is_true_only_when_the_status_caught_up_with_the_spec() -> None:
    """A takeover queues the Package objects not observed at their generation first (engine.Engine._take)."""
    from engine.runtime.cluster.objects import observed

    obj: dict[str, Any] = {"metadata": {"generation": 3}, "status": {"observedGeneration": 3}}
    assert observed(obj)
    assert not observed({"metadata": {"generation": 4}, "status": {"observedGeneration": 3}})  # edited since
    assert not observed({"metadata": {"generation": 1}})  # never reconciled
    assert not observed({"metadata": {}, "status": {}})
