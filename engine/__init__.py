"""helmdeck's reconcile engine: Helm release storage, actions and runtime.

Never imports Textual: usable headless and from tests.
"""
