"""User-level privacy accounting for DP-FedAvg runs, the paper's realistic-scale scenarios, and the
per-population privacy ledger."""
