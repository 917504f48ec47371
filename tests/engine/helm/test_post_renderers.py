"""spec.postRenderers, spec.commonMetadata and spec.driftDetection.ignore on the real local cluster, real helm
and the real kustomize."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from engine.base import wire
from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.package.drift import IgnoreRule
from engine.package.selector import Selector
from engine.reconcile import state as st
from engine.runtime.plan import plan_package
from tests.reconcile_harness import Scenario

pytestmark = pytest.mark.cluster


def post_renderers(tag: str) -> str:
    """A JSON 6902 patch on the Deployment, a strategic merge patch on the ConfigMap, an image override,
    a patch setting helmdeck's own label (helmdeck's wins; commonMetadata may not name it), and
    commonMetadata."""
    return f"""\
  postRenderers:
    - kustomize:
        patches:
          - target: {{group: apps, kind: Deployment, name: "ap+"}}
            patch: |
              - op: add
                path: /metadata/annotations
                value: {{patched-by: kustomize}}
          - patch: |
              apiVersion: v1
              kind: ConfigMap
              metadata: {{name: app, labels: {{{wire.ORIGIN_NAME}: not-the-package}}}}
              data: {{extra: from-a-patch}}
    - kustomize:
        images: [{{name: busybox, newTag: "{tag}"}}]
  commonMetadata:
    labels: {{team: web}}
    annotations: {{owner: ops}}
"""


@pytest.fixture
async def any_sc(any_helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path) -> AsyncIterator[Scenario]:
    scenario = Scenario(any_helm, kube_target, namespace, tmp_path)
    yield scenario
    await scenario.stop()


@pytest.fixture
async def sc(helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path) -> AsyncIterator[Scenario]:
    scenario = Scenario(helm, kube_target, namespace, tmp_path)
    yield scenario
    await scenario.stop()


def _image(deploy: client.V1Deployment) -> str:
    assert deploy.spec is not None and deploy.spec.template.spec is not None
    return str(deploy.spec.template.spec.containers[0].image)


async def test_patches_images_and_common_metadata_reach_the_cluster(any_sc: Scenario,
                                                                    core_api: client.CoreV1Api) -> None:
    sc = any_sc
    apps = client.AppsV1Api(core_api.api_client)
    sc.write("{message: hi}", post_renderers("1.37"))
    await sc.start()
    assert sc.engine is not None
    rendered = await sc.engine.render(sc.key)  # render (and so diff and plan) runs the same pipeline
    assert "image: busybox:1.37" in rendered and "patched-by: kustomize" in rendered
    result = await sc.run()
    assert [o.action for o in result.outcomes] == ["install"] and result.state == st.IN_SYNC
    latest = sc.latest()
    assert latest is not None and latest.label_map[wire.POST_RENDER_DIGEST] == sc.engine.book.spec(
        sc.key).rendering.digest != ""
    deploy = apps.read_namespaced_deployment("app", sc.namespace)
    cm = core_api.read_namespaced_config_map("app", sc.namespace)
    assert _image(deploy) == "busybox:1.37"
    assert deploy.metadata is not None and cm.metadata is not None
    assert (deploy.metadata.annotations or {}).get("patched-by") == "kustomize"
    assert cm.data == {"message": "hi", "extra": "from-a-patch"}
    for meta in (deploy.metadata, cm.metadata):
        assert (meta.labels or {}).get("team") == "web" and (meta.annotations or {}).get("owner") == "ops"
        assert (meta.labels or {})[wire.ORIGIN_NAME] == "app"  # helmdeck's own label wins over the patch
    # commonMetadata is for the objects' metadata, not their pod templates (as Flux's).
    assert deploy.spec is not None and deploy.spec.template.metadata is not None
    assert "team" not in (deploy.spec.template.metadata.labels or {})

    # A changed post-renderer is a spec change: plan sees it, then one upgrade, then at rest.
    sc.write("{message: hi}", post_renderers("1.38"))
    planned = await plan_package(sc.engine, sc.engine.book.spec(sc.key))
    # helm 4 post-renders hooks too (helm 3 only the manifest): there the test hook's image is patched as well.
    hooks = ("Job hook flaky/templates/tests/test.yaml",) if (await sc.helm.version()).major >= 4 else ()
    assert planned.action == "upgrade" and planned.changed == ("Deployment/app", *hooks)
    assert planned.reasons == ("post-renderers or commonMetadata changed",)
    assert "busybox:1.38" in await sc.engine.diff(sc.key)
    result = await sc.run()
    assert [o.action for o in result.outcomes] == ["upgrade"] and sc.revisions()[0] == (2, "deployed")
    assert _image(apps.read_namespaced_deployment("app", sc.namespace)) == "busybox:1.38"
    again = await sc.run()
    assert again.outcomes == () and again.state == st.IN_SYNC


async def test_a_failing_patch_is_reported_and_leaves_the_release(any_sc: Scenario,
                                                                  core_api: client.CoreV1Api) -> None:
    sc = any_sc
    sc.write("{message: hi}")
    await sc.start()
    await sc.run()
    sc.write("{message: hi}", "  postRenderers:\n    - kustomize:\n        patches:\n"
             "          - {target: {kind: Deployment}, patch: '- {op: replace, path: /spec/no/such, value: 1}'}\n")
    result = await sc.run()
    # helm 4 drops the plugin's own message; helmdeck brings it back (engine.helm.cli._post_rendering).
    assert "kustomize build failed" in result.message and "/spec/no/such" in result.message
    assert sc.revisions() == [(1, "deployed")]  # nothing rendered, nothing stored
    assert core_api.read_namespaced_config_map("app", sc.namespace).data == {"message": "hi"}


IGNORE_REPLICAS = """\
  driftDetection:
    mode: enabled
    ignore:
      - paths: ["/spec/replicas"]
        target: {kind: Deployment}
"""


async def test_ignored_paths_do_not_drift_and_others_are_corrected(sc: Scenario, core_api: client.CoreV1Api) -> None:
    apps = client.AppsV1Api(core_api.api_client)
    sc.write("{message: original}", IGNORE_REPLICAS)
    await sc.start()
    await sc.run()
    # An autoscaler (here: a hand) scales the Deployment through its scale subresource.
    apps.patch_namespaced_deployment_scale("app", sc.namespace, {"spec": {"replicas": 3}})
    assert sc.engine is not None and sc.engine.controller.detector is not None
    detector = sc.engine.controller.detector
    manifest = await sc.engine.manifest(sc.key, 1)
    unruled = detector.detect(manifest, sc.namespace)
    assert [(i.kind, i.fields) for i in unruled] == [("Deployment", ("spec.replicas",))]  # drift without the rule
    rules = (IgnoreRule(("/spec/replicas",), Selector(kind="Deployment")),)
    assert detector.detect(manifest, sc.namespace, rules) == []
    planned = await plan_package(sc.engine, sc.engine.book.spec(sc.key))
    assert planned.drifted == () and planned.action is None
    at_rest = await sc.run()
    assert at_rest.outcomes == () and at_rest.state == st.IN_SYNC

    # An unignored change on the same Deployment is drift; correcting it keeps the scaled replicas.
    apps.patch_namespaced_deployment("app", sc.namespace, _container_image("busybox:edited"))
    core_api.patch_namespaced_config_map("app", sc.namespace, {"data": {"message": "edited by hand"}})
    corrected = await sc.run()
    assert [o.action for o in corrected.outcomes] == ["correct-drift"]
    deploy = apps.read_namespaced_deployment("app", sc.namespace)
    assert _image(deploy) == "busybox:1.36" and deploy.spec is not None and deploy.spec.replicas == 3
    assert core_api.read_namespaced_config_map("app", sc.namespace).data == {"message": "original"}
    assert (await sc.run()).state == st.IN_SYNC


async def test_an_object_annotated_disabled_is_skipped(sc: Scenario, core_api: client.CoreV1Api) -> None:
    sc.write("{message: original}", "  driftDetection: {mode: enabled}\n")
    await sc.start()
    await sc.run()
    core_api.patch_namespaced_config_map("app", sc.namespace, {
        "metadata": {"annotations": {"helmdeck.dev/driftDetection": "disabled"}},
        "data": {"message": "edited by hand"}})
    result = await sc.run()
    assert result.outcomes == () and result.state == st.IN_SYNC
    assert core_api.read_namespaced_config_map("app", sc.namespace).data == {"message": "edited by hand"}


def _container_image(image: str) -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}}
