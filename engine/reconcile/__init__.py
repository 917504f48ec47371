"""Flux-style release reconciliation: action reconcilers and the atomic release loop.

After Flux helm-controller's ``internal/reconcile`` design: each action
reconciler runs one helm action and judges it from what the storage observer
saw written during the action; ``state`` decides where a release stands;
``next_action`` picks what to run; ``atomic`` loops until in sync, a
remediation ran, or the engine must stop.
"""
