# helmdeck: `make demo` opens the app on the local cluster, `make test` runs every check.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint build venv cluster-down clean crds image

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# Go-built etcd, kube-apiserver/-controller-manager/-scheduler, kwok, the OCI registry, helm 3 and 4, kustomize;
# cached in ~/.cache/helmdeck by version (a warm run takes seconds). cosign (OCIRepository spec.verify) is built
# on first need: by `make test`, or `python -m localcluster.build cosign`.
build: $(STAMP)
	$(BIN)/python -m localcluster.build

# The controller's image, localhost/helmdeck:<version>, with podman from the Containerfile (localcluster/image.py):
# a Debian base by mmdebstrap, the wheels, helm/kustomize/cosign from the cache above; rebuilt only when they change.
# Installs podman, buildah, runc and mmdebstrap with apt-get when root on Debian, else names them.
image: build
	$(BIN)/python -m localcluster.image

demo: build
	$(BIN)/helmdeck demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# pytest includes tests/cli/test_wheel.py: the wheel, built offline, runs `helmdeck --version` and
# `helmdeck demo --help` from a fresh venv outside the source tree (themes and examples shipped).
# TEST_WORKERS pytest-xdist workers run the tests side by side on one local cluster (tests/shared_session.py:
# the cluster started once, tests marked serial alone); TEST_WORKERS=0 runs them in one process.
TEST_WORKERS ?= 2
test: build lint
	$(BIN)/python -m localcluster.build cosign
	$(BIN)/python -m localcluster.image
	$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal --durations=25 $(PYTEST_ARGS)

# helmdeck's CRDs, generated from the loaders' field tables (a test checks the committed files are current).
crds: $(STAMP)
	$(BIN)/python -m engine.package.crd deploy/chart/crds

cluster-down: $(STAMP)
	$(BIN)/helmdeck cluster down

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
