"""Differential tests: helmdeck's functions against Flux's own code, on inputs hypothesis generates.

The oracle (tests/oracle/main.go, :mod:`tests.flux_oracle`) runs Flux's modules: fluxcd/pkg/chartutil
``ChartValuesFromReferences`` over controller-runtime's fake client, fluxcd/pkg/version ``ParseVersion`` with
source-controller's choice of a version, fluxcd/pkg/kustomize ``SubstituteVariables``, and the getters of
helm-controller/api/v2. Each test feeds the same generated input to helmdeck's function and to the oracle and
compares; a difference fails, and hypothesis prints the smallest input it found that differs. The runs are
derandomized (the same inputs on every run) so ``make test`` is reproducible.

Where helmdeck differs on purpose, the test says so and asserts the difference is the one documented.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.flux_oracle import Oracle

pytestmark = pytest.mark.binaries("oracle")


def _settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def canonical(value: Any) -> str:
    """``value`` as JSON in one form for comparing: a float with an integral value as the integer (Go's
    float64 1 and YAML's 1.0 are one number to helm), keys sorted, and true never equal to 1."""
    def walk(v: Any) -> Any:
        if isinstance(v, float) and math.isfinite(v) and v.is_integer():
            return int(v)
        if isinstance(v, dict):
            return {str(k): walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v
    return json.dumps(walk(value), sort_keys=True)


def test_the_oracle_answers_from_fluxs_code(flux_oracle_process: Oracle) -> None:
    """The oracle is Flux's code: the answers of Flux's own tests and docs (DigestValues of no values is the
    digest of nothing, chartutil/digest_test.go; ParseVersion wants three parts, version/version_test.go)."""
    empty = flux_oracle_process.ask({"op": "digest", "values": {}})
    assert empty["digest"] == "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    parsed = flux_oracle_process.ask({"op": "parseVersion", "versions": ["1.2", "v2025.02.03-rc.1"]})["versions"]
    assert [p["ok"] for p in parsed] == [False, True]
    missing = flux_oracle_process.ask({"op": "values", "namespace": "demo", "objects": [], "values": {},
                                       "refs": [{"kind": "Secret", "name": "gone"}]})
    assert missing["reason"] == "ResourceNotFound"
