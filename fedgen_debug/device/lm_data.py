"""On-device data preparation for the LM scenario (paper §5), and the vocabulary.

Each device tokenizes its own sentences (with the tokenization bug, if its app has it) and builds:
- word-LM examples: bos + token ids (+ eos), fixed length;
- char-LM examples: its out-of-vocabulary tokens, selected with T3 (`OutOfVocabulary`), as bytes; a
  device without any trains on nothing (strict selection: it still sends its zero update).
- its OOV rate (OOV tokens / tokens), released only as a DP mean over users (`oov_rate_spec`).

The vocabulary is the production one, fixed before the bug shipped, and never the top-K of the
private text (which would publish words a single user typed). It comes from the modeler's own
vocabulary file (`file:PATH`, one word a line, most frequent first: the tokenizer's), from public
text (`public:SPEC`, the default for synthetic text: another seed's users, the public stand-in), or
from the private users' correctly tokenized text as DP heavy hitters (`dp`, `privacy.heavy_hitters`).
A DP vocabulary from a few hundred users holds only the words dozens of them use most (26-28 words
for Tiny Shakespeare's 298 speakers): ordinary words are then OOV and glued pairs a small share of the
char-LM's data, so its top 20 shows few of them; the production vocabulary is the one to pass.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re

import numpy as np

from fedgen_debug.device.tokenization import TokenizationBug, tokenize_client
from fedgen_debug.data import client_data as cd
from fedgen_debug.data import spec as data_spec
from fedgen_debug.data.text import Vocabulary, tokenize
from fedgen_debug.privacy.aggregates import BoundedSum, scaled_noise
from fedgen_debug.privacy.heavy_hitters import HeavyHittersConfig, dp_heavy_hitters, user_top_words
from fedgen_debug.runs import store
from fedgen_debug.selectors.criteria import OutOfVocabulary

logger = logging.getLogger(__name__)

DP_VOCABULARY = "dp"
PUBLIC_PREFIX = data_spec.PUBLIC_PREFIX
FILE_PREFIX = "file:"
PUBLIC_STAND_IN_USERS = 1000
# One DP mean of the users' OOV rates: σ/Δ = 2 up to the demo's 300 users (ε ≈ 2.4 at δ = 1e-5, error
# ±2/N), then the error of 300 users' (±0.0067; `aggregates.scaled_noise`): at 5,000 users ε 0.14, not 2.3.
OOV_RATE_NOISE = 4.0
TEXT_REFERENCE_USERS = 300


def oov_rate_spec(users: int) -> BoundedSum:
    """The DP mean OOV rate's release over `users` devices."""
    return BoundedSum("oov_rate", (1.0,), scaled_noise(OOV_RATE_NOISE, users, TEXT_REFERENCE_USERS))


def default_vocabulary_source(data: str) -> str:
    """Synthetic text: the public stand-in (other users of the same generator); anything else: DP."""
    spec = data_spec.parse_data_spec(data)
    if spec.source == "synthetic-text":
        seed = spec.option("seed") + 1000
        return f"{PUBLIC_PREFIX}synthetic-text:users={PUBLIC_STAND_IN_USERS},seed={seed}"
    return DP_VOCABULARY


def check_vocabulary_source(source: str, data: str) -> None:
    if source == DP_VOCABULARY:
        return
    if source.startswith(FILE_PREFIX):
        if not source[len(FILE_PREFIX):]:
            raise ValueError("vocabulary file: the path is empty (file:PATH).")
        return  # read when a run builds its vocabulary (`check_vocabulary_file`); a finished run has its copy
    if not source.startswith(PUBLIC_PREFIX):
        raise ValueError(f"vocabulary must be 'dp', 'file:PATH' or 'public:DATA_SPEC'. Found {source!r}.")
    public = data_spec.parse_data_spec(source[len(PUBLIC_PREFIX):])
    if public.modality != "text":
        raise ValueError(f"the public vocabulary needs text data. Found {public}.")
    same_users = data_spec.user_namespace(public) == data_spec.user_namespace(data) and \
        set(data_spec.client_ids(public)) == set(data_spec.client_ids(data))
    if same_users:
        raise ValueError(f"{public} holds the same users as the private data; a public vocabulary must come "
                         "from other text (or use --vocab dp).")


def device_sentences(client_data, client_id: str) -> list[str]:
    return [t.decode("utf-8") for t in cd.client_numpy(client_data, client_id)["text"]]


def device_tokens(client_data, client_id: str, bug: TokenizationBug | None) -> list[list[str]]:
    return tokenize_client(client_id, device_sentences(client_data, client_id), bug)


@functools.lru_cache(maxsize=4)
def public_vocabulary(source: str, size: int) -> Vocabulary:
    """The `size` most frequent words of public text, correctly tokenized. Cached: public, a pure
    function of its arguments, and several seconds to build (the demo's four LMs share one)."""
    public = data_spec.load_client_data(source[len(PUBLIC_PREFIX):])
    return Vocabulary.from_sentences(
        (t for cid in public.client_ids for t in device_tokens(public, cid, None)), size)


def check_vocabulary_file(source: str) -> None:
    """A `file:PATH` vocabulary reads without error (every check of `file_vocabulary`): before a run
    charges anything."""
    if source.startswith(FILE_PREFIX):
        file_vocabulary(source, 1)


# Reserved entries of tokenizers' vocabulary files ("<unk>", "<s>", "[PAD]", "[unused0]"): ids, not words.
_SPECIAL_TOKEN = re.compile(r"^(<[^<>\s]+>|\[[^\[\]\s]+\])$")


def _vocabulary_lines(path: str) -> list[tuple[int, str]]:
    """(line number, entry) of a vocabulary file: one word a line, optionally followed by one number (a count,
    score or id, as word-count and SentencePiece files hold it); or a JSON list of words, or a JSON object
    from word to id (Keras' `word_index`, a Hugging Face `vocab.json`), ordered by id."""
    with open(path, encoding="utf-8-sig") as f:   # -sig: a byte-order mark is no part of the first word
        text = f.read()
    if path.endswith(".json"):
        try:
            entries = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not JSON ({error}).") from None
        if isinstance(entries, dict) and all(_is_number(str(v)) and not isinstance(v, bool) for v in entries.values()):
            entries = _json_object_words(path, entries)
        if not isinstance(entries, list) or not all(isinstance(w, str) for w in entries):
            raise ValueError(f"{path}: a JSON vocabulary is a list of words or an object from word to id.")
        return [(n, word) for n, word in enumerate(entries, 1)]
    rows = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    csv = [(n, row.rpartition(",")) for n, row in rows]   # word,count (a spreadsheet's export), after a header
    if len(csv) > 1 and all(sep and _is_number(count) for _, (_, sep, count) in csv[1:]):
        header = not _is_number(csv[0][1][2])
        return [(n, word.strip()) for n, (word, _, _) in csv[1 if header else 0:]]
    lines = [(n, row.split()) for n, row in rows]
    numbered = bool(lines) and all(len(fields) >= 2 and _is_number(fields[-1]) for _, fields in lines)
    return [(n, " ".join(fields[:-1] if numbered else fields)) for n, fields in lines]


def _json_object_words(path: str, entries: dict) -> list[str]:
    """The words of a JSON object from word to a number, most frequent first. The number is an id (Keras'
    `word_index`, a Hugging Face `vocab.json`: unique, read in ascending order) or a count (repeated, or listed
    from the largest down: read in descending order, ties in the file's order)."""
    values = list(entries.values())
    counts = len(set(values)) < len(values) or (values == sorted(values, reverse=True) and values != sorted(values))
    logger.info("%s: read as word to %s.", path, "count (largest first)" if counts else "id (smallest first)")
    return sorted(entries, key=(lambda w: -entries[w]) if counts else entries.get)


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def file_vocabulary(source: str, size: int) -> Vocabulary:
    """The first `size` words of the modeler's vocabulary file (`file:PATH`: UTF-8, one word a line, most
    frequent first, each optionally followed by its count; or JSON: `_vocabulary_lines`). Blank lines and a
    tokenizer's reserved entries (`<unk>`, `[PAD]`) are skipped. Words are tokens without whitespace, lower-cased
    as the devices' text is (`data.text.tokenize`)."""
    path = source[len(FILE_PREFIX):]
    words, kept, listed, merged = [], set(), {}, 0
    try:
        entries = _vocabulary_lines(path)
    except FileNotFoundError:
        where = "" if os.path.isabs(path) else f" (relative paths are read from {os.getcwd()})"
        raise ValueError(f"vocabulary file: no such file {path!r}{where}.") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start}).") from None
    for n, entry in entries:
        if _SPECIAL_TOKEN.match(entry):
            continue
        if len(entry.split()) != 1:
            raise ValueError(f"{path}:{n}: a vocabulary word is one token, without spaces. Found {entry!r}.")
        if entry in listed:
            raise ValueError(f"{path}:{n}: {entry!r} is listed twice (first on line {listed[entry]}"
                             + ("; is line 1 a header?)." if listed[entry] == 1 else ")."))
        listed[entry] = n
        # The tool lower-cases text before it tokenizes, so a cased tokenizer's "The" is the word "the",
        # counted where its most frequent casing stands; a later casing adds nothing.
        word = entry.lower()
        if word in kept:
            merged += 1
            continue
        kept.add(word)
        words.append(word)
    if not words:
        raise ValueError(f"{path}: the vocabulary file holds no word.")
    # A word the devices' tokenizer splits (a subword piece "##ing", "don't") never matches a token; a file
    # where most words do is in another format than read (a CSV line "the,6285" is three tokens).
    split = [w for w in words if tokenize(w) != [w]]
    if len(split) > len(words) / 2:
        raise ValueError(f"{path}: {len(split)} of its {len(words)} words are not one token to the devices' tokenizer "
                         f"(e.g. {split[0]!r} is {tokenize(split[0])}), so they could never match; a vocabulary "
                         "file is one word a line, optionally followed by its count ('the 6285', 'the,6285').")
    if split:
        logger.info("%s: %d words are not one token to the devices' tokenizer and never match (e.g. %r).", path,
                    len(split), split[0])
    if merged:
        logger.info("%s: %d cased entries merged into their lower-case words.", path, merged)
    return Vocabulary(tuple(words[:size]))


def named_vocabulary(source: str, size: int) -> Vocabulary:
    """A vocabulary named by its source, `file:PATH` or `public:DATA_SPEC` (the DP one is built from the
    run's users: `dp_vocabulary`)."""
    if source.startswith(FILE_PREFIX):
        return file_vocabulary(source, size)
    if source.startswith(PUBLIC_PREFIX):
        return public_vocabulary(source, size)
    raise ValueError(f"vocabulary must be 'file:PATH' or 'public:DATA_SPEC' here. Found {source!r}.")


def heavy_hitters_config(size: int, population_size: int) -> HeavyHittersConfig:
    """k = 16 words a user, σ = 2, the threshold's δ a tenth of the default 0.01/N."""
    return HeavyHittersConfig(size=size, max_words_per_user=16, noise_multiplier=2.0,
                              threshold_delta=0.001 / population_size)


def dp_vocabulary(client_data, config: HeavyHittersConfig, noise_seed) -> Vocabulary:
    """DP heavy hitters of the users' correctly tokenized text (the tokenizer before the update)."""
    top = {cid: user_top_words((t for s in device_tokens(client_data, cid, None) for t in s), config.max_words_per_user)
           for cid in client_data.client_ids}
    words = tuple(dp_heavy_hitters(top, config, noise_seed))
    if not words:
        raise ValueError(
            f"the DP vocabulary came out empty: no word is among the top {config.max_words_per_user} of enough of "
            f"the {len(top)} users to pass the heavy hitters' noisy threshold (its ε is spent). A word is a run of "
            "letters and digits between spaces and punctuation, so text written without spaces (Chinese, Japanese, "
            "Thai) is one word a sentence unless segmented first. Pass your model's vocabulary instead: "
            "--vocab file:PATH.")
    return Vocabulary(words)


def device_oov_words(tokens: list[list[str]], vocab: Vocabulary, client_id: str) -> list[str]:
    """T3 on the device: one example per token; keep those outside the vocabulary."""
    flat = np.array([t for sentence in tokens for t in sentence], dtype=object)
    mask = OutOfVocabulary()(client_id, {"token": flat}, {"oov": np.array([t not in vocab for t in flat], bool)})
    return [] if mask is None else list(flat[mask])


def device_oov_rate(tokens: list[list[str]], vocab: Vocabulary) -> float:
    """The device's share of OOV tokens (0 without tokens): its record for `oov_rate_spec`."""
    flat = [t for sentence in tokens for t in sentence]
    return sum(t not in vocab for t in flat) / len(flat) if flat else 0.0


def save_vocabulary(vocab: Vocabulary, run_dir: str, source: str) -> None:
    store.write_json(store.released(run_dir, store.VOCAB), {"words": list(vocab.words), "source": source})


def load_vocabulary(run_dir: str) -> Vocabulary:
    return Vocabulary(tuple(store.read_json(store.released(run_dir, store.VOCAB))["words"]))
