"""The client and operator writes: runtime, signals, grants, approvals, deployments, invariants (private)."""
