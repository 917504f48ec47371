"""helmdeck: a terminal dashboard over a Helm release reconcile engine."""

__version__ = "0.1.0"
