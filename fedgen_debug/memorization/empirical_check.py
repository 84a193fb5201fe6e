"""The empirical-ε part of `check-memorization`: cosines of a run's released model delta with its update
canaries' directions (`training.update_canaries`), turned into ε by `privacy.empirical`, next to the
accountant's ε of the same training release.

Inputs: the initial weights (public: the model family at the run's `--seed`), the released final
weights and the public canary seed, so the section is post-processing of DP outputs like the rest of
the report. The unseen directions (`count..2·count`, never inserted) check the null N(0, 1/d).
"""

from __future__ import annotations

import numpy as np

from fedgen_debug.privacy.empirical import empirical_epsilon
from fedgen_debug.runs import store
from fedgen_debug.training import update_canaries


def empirical_privacy(initial_weights, final_weights, count: int, seed: int, privacy: dict,
                      alpha: float = 0.05) -> dict:
    """`initial_weights` / `final_weights`: the DP-trained variables (lists of arrays) before round 1
    and as released; `count`: the run's update canaries; `privacy`: its released privacy.json."""
    # initial − final: the clients' update convention (TFF's pseudo-gradient), so a canary that sent c
    # moved the model along −c and shows a positive cosine.
    delta = [np.asarray(a, np.float32) - np.asarray(b, np.float32) for a, b in zip(initial_weights, final_weights)]
    dimension = int(sum(d.size for d in delta))
    seen = update_canaries.cosines(delta, seed, range(count))
    unseen = update_canaries.cosines(delta, seed, range(count, 2 * count))
    release = store.training_release(privacy)
    result = empirical_epsilon(seen, dimension, release["delta"], alpha)
    return {**result.to_json(), "accountant_epsilon": release["epsilon"],
            "unseen_mean": float(unseen.mean()), "unseen_std": float(unseen.std(ddof=1)),
            "threat_model": "final model only: the adversary sees the released weights",
            "seen_cosines": [float(c) for c in seen]}
