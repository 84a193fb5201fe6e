"""Cross-client memorization (Udsa et al. 2025): does a client's prefix make the model write another
client's text?

Each client j's sentences are split into a prefix (the first `prefix_tokens` tokens) and a suffix. The
model continues each of j's sampled prefixes greedily; the continuation "memorizes" client k's data when
it holds `ngram` consecutive tokens of one of k's suffixes verbatim. P_{j,k} is the set of j's prefixes
that do so, and (paper Eq. 1-5, App. D)

    MR_{j→k} = |P_{j,k}| / |P_j|
    MR_intra = Σ_j w_j MR_{j→j}                       (harm-exposed: a client's own text)
    MR_inter = Σ_j w_j MR_inter(j),  MR_inter(j) = 1/(L−1) Σ_{k≠j} MR_{j→k}   (harmful: another's)
    MR_total = |∪_{j,k} P_{j,k}| / |∪_j P_j|

with w_j = |D_j| / Σ_i |D_i| in the paper. The paper's detector (PAN2014 over Elasticsearch) is not
available offline: this is the *verbatim* category only, by n-gram matching.

Release. The ratios are computed on the simulated devices (the matching needs every client's text) and
leave only as one DP sum of the records (MR_{j→j}, MR_inter(j)) ∈ [0, 1]² over users, so the means are
over users (w_j = 1/L: the weights |D_j| would publish each client's size).

Sensitivity, replace-one user (the L user ids are public and fixed; user u's data is replaced by any
other, including none). It holds because nothing of user j ≠ u depends on u's data: j's prefixes come
from j's own draw and j's continuations from a model call whose shape and other rows do not depend on u
(`cross_client_lm.user_contributions`), and L, the normalizer, counts every user whether or not it has a
prefix. So of the sets P_{j,k} only P_{u,k} (u's generations) and P_{j,u} (u's suffixes) change, and
  - Σ_j MR_{j→j} changes in u's term only: by at most 1;
  - Σ_j MR_inter(j) changes in u's term, by at most 1, and in each other user's through MR_{j→u} ∈ [0, 1]
    alone, by at most 1/(L−1), (L−1)/(L−1) = 1 in all: by at most 2.
L2 sensitivity √(1² + 2²) = √5, noise σ = z·√5. MR_total is not released: one user's text can turn every
other client's prefix into a match, so its sensitivity grows with L and no useful noise covers it;
`memorization_ratios` computes it for simulations on public data.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np

RECORD_SENSITIVITY = math.sqrt(5.0)   # see the module docstring
NOISE_MULTIPLIER = 2.0                # σ / Δ of the release: ε ≈ 1.8 at δ = 0.01/300 (PLD)


def ngrams(tokens: Sequence[str], n: int) -> set[tuple[str, ...]]:
    """The n-grams of `tokens`; a sequence shorter than n is its own (only) n-gram."""
    if n < 1:
        raise ValueError(f"n must be >= 1. Found {n}.")
    tokens = tuple(tokens)
    if len(tokens) <= n:
        return {tokens} if tokens else set()
    return {tokens[i: i + n] for i in range(len(tokens) - n + 1)}


def verbatim_match(generated: Sequence[str], suffix: Sequence[str], n: int) -> bool:
    """`generated` holds min(n, len(suffix)) consecutive tokens of `suffix` verbatim."""
    width = min(n, len(suffix))
    return width > 0 and bool(ngrams(generated, width) & ngrams(suffix, width))


def pairwise_hits(generations: Mapping[str, Sequence[Sequence[str]]], suffixes: Mapping[str, Sequence[Sequence[str]]],
                  n: int) -> dict[tuple[str, str], frozenset[int]]:
    """P_{j,k} for every pair: the indices of j's generations that match one of k's suffixes. One index of
    every suffix n-gram (n, or the whole suffix when shorter), so the cost is linear in the text."""
    index: dict[tuple[str, ...], set[str]] = {}
    for k, client_suffixes in suffixes.items():
        for suffix in client_suffixes:
            for gram in ngrams(suffix, min(n, len(suffix))) if suffix else ():
                index.setdefault(gram, set()).add(k)
    # Over every client's suffixes, but a width that none of k's suffixes has finds none of k's n-grams:
    # whether j's generation matches k depends on j's generation and k's suffixes only.
    widths = sorted({len(g) for g in index})
    hits: dict[tuple[str, str], set[int]] = {}
    for j, client_generations in generations.items():
        for i, generated in enumerate(client_generations):
            matched = set()
            for width in widths:
                for gram in ngrams(generated, width) if len(generated) >= width else ():
                    matched |= index.get(gram, set())
            for k in matched:
                hits.setdefault((j, k), set()).add(i)
    return {pair: frozenset(indices) for pair, indices in hits.items()}


@dataclasses.dataclass(frozen=True)
class Ratios:
    intra: float
    inter: float
    total: float
    per_client: dict  # client -> (MR_{j→j}, MR_inter(j), |∪_k P_{j,k}| / |P_j|)


def memorization_ratios(hits: Mapping[tuple[str, str], frozenset[int]], num_prefixes: Mapping[str, int],
                        weights: Mapping[str, float] | None = None) -> Ratios:
    """Eq. 1-5 over the clients of `num_prefixes`. A client without a prefix (no sentence longer than the
    prefix) takes part with ratios 0, so L, the normalizer of MR_inter(j), is every client: a fixed,
    public number, as the release's sensitivity needs. No prefix at all is ratios 0, not an error: one
    user's data can make it so, and an error after the release's charge would tell. `weights` w_j,
    normalized here (the paper's: |D_j|); None: uniform, as released."""
    clients = sorted(num_prefixes)
    if len(clients) < 2:
        raise ValueError(f"cross-client memorization needs at least 2 clients. Found {len(clients)}.")
    if any(num_prefixes[j] < 0 for j in clients):
        raise ValueError("prefix counts must be >= 0.")
    raw = {j: 1.0 for j in clients} if weights is None else {j: float(weights[j]) for j in clients}
    total_weight = sum(raw.values())
    if not total_weight > 0 or any(w < 0 for w in raw.values()):
        raise ValueError("weights must be >= 0 with a positive sum.")
    per_client = {}
    for j in clients:
        if not num_prefixes[j]:
            per_client[j] = (0.0, 0.0, 0.0)
            continue
        mr = {k: len(hits.get((j, k), ())) / num_prefixes[j] for k in clients}
        union = set().union(*(hits.get((j, k), frozenset()) for k in clients))
        per_client[j] = (mr[j], sum(mr[k] for k in clients if k != j) / (len(clients) - 1),
                         len(union) / num_prefixes[j])
    w = {j: raw[j] / total_weight for j in clients}
    matched = sum(per_client[j][2] * num_prefixes[j] for j in clients)
    prefixes = sum(num_prefixes.values())
    return Ratios(intra=sum(w[j] * per_client[j][0] for j in clients),
                  inter=sum(w[j] * per_client[j][1] for j in clients),
                  total=matched / prefixes if prefixes else 0.0, per_client=per_client)


def dp_release(per_client: Mapping[str, tuple], noise_seed, noise_multiplier: float = NOISE_MULTIPLIER) -> dict:
    """The DP means over users of MR_{j→j} and MR_inter(j) (module docstring: sensitivity √5). Charge
    `release_record` first."""
    from fedgen_debug.privacy.aggregates import noised_sum

    records = np.array([[v[0], v[1]] for v in per_client.values()], np.float64)
    stddev = noise_multiplier * RECORD_SENSITIVITY
    # Records lie in [0, 1]², norm ≤ √2: the clip never binds; the sensitivity is the cross-client one.
    total, _ = noised_sum(records, math.sqrt(2.0), stddev, RECORD_SENSITIVITY, noise_seed)
    users = len(records)
    return {"mr_intra": float(total[0]) / users, "mr_inter": float(total[1]) / users, "stddev": stddev / users,
            "users": users, "dp": True}


def release_record(population: str, users: int, release_id: str, source: str = "",
                   noise_multiplier: float = NOISE_MULTIPLIER):
    """The ledger record of one `dp_release` (replace-one; the event is σ/Δ = z)."""
    import dp_accounting

    from fedgen_debug.privacy.accounting import REPLACE_ONE
    from fedgen_debug.privacy.ledger import PrivacyRecord

    return PrivacyRecord(population, users, REPLACE_ONE, (dp_accounting.GaussianDpEvent(noise_multiplier),),
                         "cross-client memorization ratios (DP)", release_id, source=source)
