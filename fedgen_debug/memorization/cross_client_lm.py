"""Cross-client memorization of a word-LM run (`check-memorization --cross-client`), on its simulated
devices: each real user's sentences, tokenized as its device does, split into prefix and suffix; a
sample of prefixes continued greedily by the released model; verbatim n-gram matches against every
user's suffixes (`cross_client`). The server side of the run (its secret) draws each user's prefixes and
noises the release, which is charged to the ledger before anything is computed. `user_contributions`
says what one user's data can change, which the release's sensitivity rests on."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np

from fedgen_debug.data.text import OOV
from fedgen_debug.memorization import cross_client
from fedgen_debug.privacy.ledger import population_key
from fedgen_debug.runs import secret as secret_lib
from fedgen_debug.runs import store
from fedgen_debug.privacy.run_ledger import charge
from fedgen_debug.validation import check_at_least


@dataclasses.dataclass(frozen=True)
class CrossClientConfig:
    prefix_tokens: int = 3
    ngram: int = 4
    prefixes_per_client: int = 10
    continuation_tokens: int = 10
    seed: int = 0       # which draw of the prefixes (from the run secret): another seed is another release

    def __post_init__(self):
        for name in ("prefix_tokens", "ngram", "prefixes_per_client", "continuation_tokens"):
            check_at_least(name, getattr(self, name), 1)
        check_at_least("seed", self.seed, 0)

    @property
    def key(self) -> str:
        """Names the release: other settings are another release, charged and noised anew."""
        return (f"cross-client-mr/p{self.prefix_tokens}-n{self.ngram}-k{self.prefixes_per_client}"
                f"-c{self.continuation_tokens}-s{self.seed}")


def client_splits(sentences: list[list[str]], config: CrossClientConfig, rng: np.random.Generator):
    """(sampled prefixes, every suffix) of one client's tokenized sentences longer than the prefix; `rng`:
    that client's own (`prefix_rng`)."""
    long_enough = [s for s in sentences if len(s) > config.prefix_tokens]
    suffixes = [tuple(s[config.prefix_tokens:]) for s in long_enough]
    chosen = rng.permutation(len(long_enough))[: config.prefixes_per_client]
    return [tuple(long_enough[i][: config.prefix_tokens]) for i in sorted(chosen)], suffixes


def continue_prefixes(model, vocab, prefixes: list[tuple[str, ...]], length: int) -> list[list[str]]:
    """Greedy continuations as tokens, cut at end-of-sentence; out-of-vocabulary ids read '<oov>'."""
    from fedgen_debug.data.text import OOV
    from fedgen_debug.memorization.extraction import greedy_continuations

    ids = np.array([[vocab.bos_id] + vocab.ids(list(p)) for p in prefixes], np.int32)
    words = {i + 1: w for i, w in enumerate(vocab.words)}
    out = []
    for row in greedy_continuations(model, ids, length, banned_ids=[vocab.pad_id, vocab.bos_id]):
        tokens = []
        for i in row:
            if int(i) == vocab.eos_id:
                break
            tokens.append(words.get(int(i), OOV))
        out.append(tokens)
    return out


Continuation = Callable[[list[tuple[str, ...]]], list[list[str]]]


@dataclasses.dataclass(frozen=True)
class Contributions:
    """What each user adds to the release, and what it is computed from (the server side's, never released)."""
    prefixes: dict      # user -> its sampled prefixes
    generations: dict   # user -> the continuations of its prefixes
    hits: dict          # (j, k) -> the indices of j's generations that match one of k's suffixes
    records: dict       # user -> (MR_{j→j}, MR_inter(j)): the record the DP sum adds


def prefix_rng(secret: secret_lib.RunSecret, config: CrossClientConfig, client_id: str) -> np.random.Generator:
    """User `client_id`'s own draw of its prefixes: a function of the run secret, `config.seed` and the id
    only, so no other user's data, and not the order users are visited in, can change it (a generator
    shared across users would re-draw every later user's prefixes when one user's sentence count changes)."""
    return secret.rng("cross-client-prefixes", config.seed, client_id)


def user_contributions(user_sentences: Mapping[str, list[list[str]]], continue_fn: Continuation,
                       config: CrossClientConfig, secret: secret_lib.RunSecret) -> Contributions:
    """Each user's record of the release from every user's tokenized sentences. `continue_fn`: greedy
    continuations of a batch of prefixes (the released model's; a stand-in in tests).

    What replacing user u changes (the release's sensitivity, `cross_client`, rests on it): u's own
    prefixes, continuations and suffixes, so P_{u,k} for every k and P_{j,u} for every j; nothing else.
    Every user's prefixes come from its own generator (`prefix_rng`); the model sees one batch of a fixed
    shape, `prefixes_per_client` rows for each user at the user's place in the sorted ids (a user with
    fewer prefixes fills its rows with a fixed prefix), so neither the batch's shape nor any other user's
    rows depend on u: a model whose numerics depend on the batch's shape cannot flip another user's
    greedy continuation."""
    clients = sorted(user_sentences)
    per_user = config.prefixes_per_client
    prefixes, suffixes = {}, {}
    for cid in clients:
        prefixes[cid], suffixes[cid] = client_splits(user_sentences[cid], config, prefix_rng(secret, config, cid))
    filler = (OOV,) * config.prefix_tokens
    rows = [p for cid in clients for p in prefixes[cid] + [filler] * (per_user - len(prefixes[cid]))]
    generated = continue_fn(rows)
    generations = {cid: generated[place * per_user: place * per_user + len(prefixes[cid])]
                   for place, cid in enumerate(clients)}
    hits = cross_client.pairwise_hits(generations, suffixes, config.ngram)
    ratios = cross_client.memorization_ratios(hits, {cid: len(prefixes[cid]) for cid in clients})
    return Contributions(prefixes, generations, hits, {cid: r[:2] for cid, r in ratios.per_client.items()})


def cross_client_memorization(run_dir: str, model, vocab, run, config: CrossClientConfig) -> dict:
    from fedgen_debug.data import spec as data_spec
    from fedgen_debug.device import lm_data

    if run.kind != "word":
        raise ValueError("cross-client memorization needs a word-LM run (a char-LM writes single words).")
    secret = secret_lib.load(run_dir)
    if secret is None:
        raise ValueError(f"{run_dir}: the run's server part (its secret) is missing; the cross-client ratios are a "
                         "DP release that only the server can noise.")
    client_data = data_spec.load_client_data(run.data)
    population = population_key(run.data, client_data.client_ids)
    clients = sorted(client_data.client_ids)
    release_id = f"{secret.run_id}/{config.key}"
    charge(cross_client.release_record(population, len(clients), release_id, run_dir), run_dir)

    contributions = user_contributions(
        {cid: lm_data.device_tokens(client_data, cid, None) for cid in clients},
        lambda prefixes: continue_prefixes(model, vocab, prefixes, config.continuation_tokens), config, secret)
    release = cross_client.dp_release(contributions.records, secret.tf_seed("aggregate-noise", config.key))
    privacy = store.read_json(store.released(run_dir, store.PRIVACY))["releases"][release_id]
    return {**dataclasses.asdict(config), **release, "epsilon": privacy["epsilon"], "delta": privacy["delta"],
            "above_warning": privacy["above_warning"],
            "detector": "verbatim n-gram matching only (the paper's PAN2014 paraphrase and idea levels are not "
                        "available offline)",
            "weights": "uniform over users (the paper weighs by |D_j|, which would release each client's size)"}
