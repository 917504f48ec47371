"""A real local Kubernetes control plane for helmdeck's demo and tests.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (fake
nodes), an OCI registry (distribution's ``registry``, :mod:`localcluster.registry`),
plus the helm 3 and helm 4 CLIs, all built from their Go modules with the
machine's Go toolchain (:mod:`localcluster.build`) and run as plain
processes on 127.0.0.1 (:mod:`localcluster.cluster`).
"""
