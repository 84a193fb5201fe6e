"""Canaries in the LM scenario (`train-lm --canaries SPEC`): their alphabet, their record in the run
store, and the devices they reach. The checker (`memorization.check`) reads them back.

Alphabets: a word-LM canary is made of vocabulary words (those the tokenizer keeps whole, so the canary
reaches the model as five ids); a char-LM canary of the letters a–z, never a vocabulary word (the
char-LM only learns out-of-vocabulary words). Ramaswamy's synthetic devices are filled with public
text: the run's public vocabulary source, or else synthetic sentences of a public generator seed.
"""

from __future__ import annotations

import numpy as np

from fedgen_debug import rng_streams
from fedgen_debug.data import spec as data_spec
from fedgen_debug.data.text import Vocabulary, tokenize
from fedgen_debug.device import canaries as device_canaries
from fedgen_debug.device.canaries import ThakkarInsertion, ramaswamy_devices
from fedgen_debug.device.canary_specs import CHAR_ALPHABET, Canary, generate_canaries, parse_canaries, space_size
from fedgen_debug.runs import store
from fedgen_debug.device import lm_data

# Public filler for synthetic devices when the run's vocabulary is not from public text.
PUBLIC_FILLER = "synthetic-text:users=200,seed=4242"


def alphabet(kind: str, vocab: Vocabulary) -> tuple[str, ...]:
    if kind == "char":
        return tuple(CHAR_ALPHABET)
    return tuple(w for w in vocab.words if tokenize(w) == [w])


def canaries_for_run(spec: str, kind: str, vocab: Vocabulary, seed: int, out_dir: str) -> tuple[Canary, ...]:
    """The run's canaries: generated from the public `seed` once and released; read back on resume."""
    path = store.released(out_dir, store.CANARIES)
    try:
        return tuple(Canary.from_json(c) for c in store.read_json(path)["canaries"])
    except FileNotFoundError:
        pass
    symbols = alphabet(kind, vocab)
    forbidden = frozenset(vocab.words) if kind == "char" else frozenset()
    canaries = generate_canaries(parse_canaries(spec), kind, symbols, seed, forbidden=forbidden)
    store.write_json(path, {"spec": spec, "kind": kind, "alphabet_size": len(symbols),
                            "space_size": space_size(len(symbols), len(canaries[0].suffix)),
                            "canaries": [c.to_json() for c in canaries]})
    return canaries


def public_filler(vocab_source: str) -> list[str]:
    source = vocab_source[len(lm_data.PUBLIC_PREFIX):] if vocab_source.startswith(lm_data.PUBLIC_PREFIX) \
        else PUBLIC_FILLER
    public = data_spec.load_client_data(source)
    return [s for cid in sorted(public.client_ids) for s in lm_data.device_sentences(public, cid)]


def device_sentences(canaries, secret, vocab_source: str, seed: int, client_data) -> dict[str, list[str]]:
    """Every device's sentences after insertion: the real devices (Thakkar's sharers changed on the
    device) and Ramaswamy's synthetic devices."""
    insertion = ThakkarInsertion(canaries, secret)
    sentences = {cid: insertion.device_examples(cid, lm_data.device_sentences(client_data, cid))
                 for cid in sorted(client_data.client_ids)}
    if device_canaries.ramaswamy_canaries(canaries):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(rng_streams.LM_CANARY_DEVICES,)))
        sentences.update(ramaswamy_devices(canaries, public_filler(vocab_source), rng))
    return sentences
