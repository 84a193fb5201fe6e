"""Which clients take part in a round. The generator is the run secret's sampling stream for that
round (`RunSecret.rng("sampling", round)`): resume repeats the sample exactly, and nobody who knows
only the public `--seed` can tell who took part (amplification by sampling assumes the sample is
secret)."""

from __future__ import annotations

import numpy as np

from fedgen_debug.privacy.accounting import POISSON, WITHOUT_REPLACEMENT


def sample_clients(client_ids, clients_per_round: int, rng: np.random.Generator,
                   sampling: str = WITHOUT_REPLACEMENT, accounted_size: int | None = None) -> list[str]:
    """qN distinct clients drawn without replacement (or each with probability qN/N for Poisson).
    The result does not depend on the order of `client_ids`. `accounted_size`: the N that Poisson's
    probability qN/N is accounted with when it is not the number of ids (the paper's subpopulation:
    a DP lower bound of its size, `privacy.subpopulation`)."""
    ids = sorted(client_ids)
    if not 1 <= clients_per_round <= len(ids):
        raise ValueError(f"clients_per_round must be in [1, {len(ids)}] (the population). Found {clients_per_round}.")
    if sampling == POISSON:
        size = len(ids) if accounted_size is None else accounted_size
        if not clients_per_round <= size:
            raise ValueError(f"clients_per_round must be <= the accounted population size. Found {clients_per_round} > "
                             f"{size}.")
        return [ids[i] for i in np.flatnonzero(rng.random(len(ids)) < clients_per_round / size)]
    return [ids[i] for i in sorted(rng.choice(len(ids), size=clients_per_round, replace=False))]
