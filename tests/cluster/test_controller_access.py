"""Where `helmdeck controller` finds its cluster: controller-runtime's order (pkg/client/config/config.go,
loadConfig): --kubeconfig, else $KUBECONFIG, else in-cluster config, else ~/.kube/config (pure: no cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.kube.client import KubeConfigError, KubeTarget, controller_target


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A ServiceAccount mount, a home with ~/.kube/config and a private folder; no $KUBECONFIG, no pod env."""
    mount, home = tmp_path / "sa", tmp_path / "home"
    mount.mkdir()
    (mount / "token").write_text("sa-token")
    (mount / "ca.crt").write_text("not checked here")
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text("apiVersion: v1\nkind: Config\n")
    monkeypatch.setenv("HOME", str(home))
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    return {"mount": mount, "home": home, "private": tmp_path / "private"}


def _in_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")


def test_the_flag_wins_over_everything(places: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    _in_pod(monkeypatch)
    monkeypatch.setenv("KUBECONFIG", "/elsewhere/config")
    target, source = controller_target(Path("/given/kc"), "staging", places["private"], places["mount"])
    assert target == KubeTarget(Path("/given/kc"), "staging") and source == "--kubeconfig /given/kc"


def test_kubeconfig_env_wins_over_in_cluster_config(places: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    _in_pod(monkeypatch)
    monkeypatch.setenv("KUBECONFIG", "/a/config:/b/config")  # a path list: the client and helm merge it
    target, source = controller_target(None, "staging", places["private"], places["mount"])
    assert target == KubeTarget(None, "staging") and source == "$KUBECONFIG (/a/config:/b/config)"


def test_in_cluster_config_wins_over_the_home_kubeconfig(places: dict[str, Path],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _in_pod(monkeypatch)
    target, source = controller_target(None, None, places["private"], places["mount"])
    assert target.kubeconfig == places["private"] / "kubeconfig" and source == f"in-cluster config ({places['mount']})"
    assert "https://10.0.0.1:443" in target.kubeconfig.read_text()
    # A context means nothing to in-cluster config: left out, and the log line says so.
    assert controller_target(None, "x", places["private"], places["mount"])[1].endswith("; --context x left out")


def test_outside_a_pod_the_home_kubeconfig_serves(places: dict[str, Path]) -> None:
    home = places["home"] / ".kube" / "config"
    target, source = controller_target(None, "dev", places["private"], places["mount"])
    assert target == KubeTarget(home, "dev")
    assert source.startswith(f"~/.kube/config ({home}; no in-cluster config")


def test_with_none_of_them_the_error_names_each(places: dict[str, Path]) -> None:
    (places["home"] / ".kube" / "config").unlink()
    with pytest.raises(KubeConfigError) as caught:
        controller_target(None, None, places["private"], places["mount"])
    text = str(caught.value)
    assert text.startswith("no cluster to talk to: no --kubeconfig, $KUBECONFIG is not set, no in-cluster config")
    assert text.endswith(f"and no {places['home'] / '.kube' / 'config'}")
