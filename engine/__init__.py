"""helmdeck's reconcile engine: Helm release storage, actions and runtime.

Never imports Textual: usable headless and from tests.
"""

from engine.kube.deferred import defer

defer()  # before any module of the engine imports the kubernetes package (engine.kube.deferred says why)
