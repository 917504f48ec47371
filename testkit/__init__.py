"""What the tests (tests/) and the benchmarks (bench/) share: fixed engine state, chart sources (repositories,
registries, signers), the controller as a subprocess, the churn of replicas and the release audit.

Not part of the product: no module of engine/, tui/, helmdeck/ or localcluster/ imports it (an import-linter
contract), and the wheel leaves it out. It imports nothing from tests/.
"""
