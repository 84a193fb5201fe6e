"""End-to-end scenarios: data → selector → DP-FedAvg auxiliary → analysis."""
