"""On-device data preparation for the LM scenario (paper §5).

Each device tokenizes its own sentences (with the tokenization bug, if its app has it) and builds:
- word-LM examples: bos + token ids (+ eos), fixed length;
- char-LM examples: its out-of-vocabulary tokens, selected with T3 (`OutOfVocabulary`), as bytes.
The vocabulary is the production one: built from correctly tokenized text before the bug shipped.
"""

from __future__ import annotations

import json
import os

import numpy as np

from fedgen_debug.bugs.tokenization import TokenizationBug, tokenize_client
from fedgen_debug.data import client_data as cd
from fedgen_debug.data.atomic import write_json
from fedgen_debug.data.text import Vocabulary
from fedgen_debug.selectors.criteria import OutOfVocabulary

VOCAB_FILE = "vocab.json"


def device_tokens(client_data, client_id: str, bug: TokenizationBug | None) -> list[list[str]]:
    sentences = [t.decode("utf-8") for t in cd.client_numpy(client_data, client_id)["text"]]
    return tokenize_client(client_id, sentences, bug)


def production_vocabulary(client_data, size: int) -> Vocabulary:
    """The word-LM's vocabulary: the `size` most frequent words of correctly tokenized text."""
    return Vocabulary.from_sentences(
        (t for cid in client_data.client_ids for t in device_tokens(client_data, cid, None)), size)


def device_oov_words(tokens: list[list[str]], vocab: Vocabulary, client_id: str) -> list[str]:
    """T3 on the device: one example per token; keep those outside the vocabulary."""
    flat = np.array([t for sentence in tokens for t in sentence], dtype=object)
    mask = OutOfVocabulary()(client_id, {"token": flat}, {"oov": np.array([t not in vocab for t in flat], bool)})
    return [] if mask is None else list(flat[mask])


def save_vocabulary(vocab: Vocabulary, run_dir: str) -> None:
    os.makedirs(run_dir, exist_ok=True)
    write_json(os.path.join(run_dir, VOCAB_FILE), {"words": list(vocab.words)})


def load_vocabulary(run_dir: str) -> Vocabulary:
    with open(os.path.join(run_dir, VOCAB_FILE)) as f:
        return Vocabulary(tuple(json.load(f)["words"]))
