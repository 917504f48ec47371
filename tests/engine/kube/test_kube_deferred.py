"""engine.kube.deferred: the kubernetes package's own loaders work as published, without its eager imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# Run in a fresh interpreter: the test process has imported the whole package already.
_CHECK = r"""
import importlib.metadata, json, sys
import engine  # registers the kubernetes package with its __init__ unrun
import engine.kube.client, engine.kube.rest
eager = ("kubernetes.dynamic", "kubernetes.stream", "kubernetes.watch", "kubernetes.informer",
         "kubernetes.leaderelection", "websocket")
before = sorted(m for m in eager if m in sys.modules)
tmp = sys.argv[1]

from kubernetes import client, config
cfg = client.Configuration()
config.load_kube_config(config_file=tmp + "/kubeconfig", context="token", client_configuration=cfg)
token = (cfg.host, cfg.api_key.get("BearerToken"), cfg.ssl_ca_cert is not None)
cfg = client.Configuration()
config.load_kube_config(config_file=tmp + "/kubeconfig", context="exec", client_configuration=cfg)
exec_auth = cfg.api_key.get("BearerToken")
contexts = [c["name"] for c in config.list_kube_config_contexts(config_file=tmp + "/kubeconfig")[0]]

from kubernetes.config import incluster_config
cfg = client.Configuration()
incluster_config.InClusterConfigLoader(
    token_filename=tmp + "/sa/token", cert_filename=tmp + "/sa/ca.crt",
    environ={"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}).load_and_set(cfg)
in_cluster = (cfg.host, cfg.api_key.get("BearerToken"))

import kubernetes
version = kubernetes.__version__  # the package's own __init__ runs now
whole = all(m in sys.modules for m in ("kubernetes.stream", "kubernetes.watch", "kubernetes.dynamic"))
api = client.CoreV1Api(client.ApiClient(client.Configuration()))
print(json.dumps({"before": before, "token": token, "exec": exec_auth, "contexts": contexts,
                  "in_cluster": in_cluster, "version": version, "installed": importlib.metadata.version("kubernetes"),
                  "whole": whole, "generated": type(api).__name__, "watch": kubernetes.watch.Watch.__name__,
                  "create_from_yaml": callable(kubernetes.utils.create_from_yaml)}))
"""


def _files(tmp: Path) -> None:
    (tmp / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    plugin = tmp / "plugin.py"  # an exec credential plugin, as client-go runs them
    plugin.write_text("import json\nprint(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1beta1', "
                      "'kind': 'ExecCredential', 'status': {'token': 'from-exec'}}))\n")
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config", "current-context": "token",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443",
                                               "certificate-authority": str(tmp / "ca.crt")}}],
        "users": [{"name": "t", "user": {"token": "static-token"}},
                  {"name": "e", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1",
                                                  "command": sys.executable, "args": [str(plugin)]}}}],
        "contexts": [{"name": "token", "context": {"cluster": "c", "user": "t"}},
                     {"name": "exec", "context": {"cluster": "c", "user": "e"}}],
    }
    (tmp / "kubeconfig").write_text(json.dumps(kubeconfig))  # JSON is YAML
    (tmp / "sa").mkdir()
    (tmp / "sa" / "token").write_text("sa-token")
    (tmp / "sa" / "ca.crt").write_text((tmp / "ca.crt").read_text())


def test_the_packages_loaders_work_as_published_without_its_eager_imports(tmp_path: Path) -> None:
    _files(tmp_path)
    proc = subprocess.run([sys.executable, "-c", _CHECK, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, check=False, cwd=Path(__file__).parents[3])
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["before"] == []  # the engine's client and transport need none of the eager parts
    assert out["token"] == ["https://127.0.0.1:6443", "Bearer static-token", True]
    assert out["exec"] == "Bearer from-exec"  # the exec plugin ran through the package's ExecProvider
    assert out["contexts"] == ["token", "exec"]
    assert out["in_cluster"] == ["https://10.0.0.1:443", "bearer sa-token"]  # as the package writes it
    assert out["version"] == out["installed"] and out["whole"]  # then the package is whole
    assert out["generated"] == "CoreV1Api" and out["watch"] == "Watch" and out["create_from_yaml"]
