"""Talking to the API server: clients (kubectl's kubeconfig rules), REST calls, watch streams, discovery."""
