"""Which clients take part in a round: a pure function of (seed, round), so resume is exact."""

from __future__ import annotations

import numpy as np

from fedgen_debug.privacy.accounting import POISSON


def sample_clients(client_ids, clients_per_round: int, seed: int, round_num: int,
                   sampling: str = "without-replacement") -> list[str]:
    """qN distinct clients drawn without replacement (or each with probability q for Poisson)."""
    ids = sorted(client_ids)
    if not 1 <= clients_per_round <= len(ids):
        raise ValueError(f"clients_per_round must be in [1, {len(ids)}] (the population). Found {clients_per_round}.")
    rng = np.random.default_rng([seed, round_num, 0x5A])
    if sampling == POISSON:
        return [ids[i] for i in np.flatnonzero(rng.random(len(ids)) < clients_per_round / len(ids))]
    return [ids[i] for i in sorted(rng.choice(len(ids), size=clients_per_round, replace=False))]
