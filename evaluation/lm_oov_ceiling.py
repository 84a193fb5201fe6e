"""What a char-LM's top 20 can show at best: the users' own OOV words with the tokenization bug applied
(the simulation's ground truth, read from the devices' data; no model, nothing released).

Two rankings. By token count (every OOV token of the population counted once), and by user weight (the
mean over users of each user's OOV-word distribution): DP-FedAvg clips and averages one update a
user, so a user who writes a rare name 50 times moves the model no more than one who writes it once,
and the user-weighted ranking is the one a well-fit char-LM's samples approach.

  .venv/bin/python evaluation/lm_oov_ceiling.py --data jsonl:runs/articles/private.jsonl \\
      --vocab file:runs/articles/vocab.txt --fraction 0.1

`--vocab` takes `file:PATH` or `public:DATA_SPEC`, as `lm_tokenization_bug.py` does (the DP vocabulary
is a release and is not rebuilt here). `--analysis RUN/released/analysis.json` (a char-LM run trained
with the same `--fraction` and `--seed`) adds which of its top words with a space are glued pairs the
users typed, and which the model composed. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import collections
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from fedgen_debug.device.tokenization import TokenizationBug  # noqa: E402
from fedgen_debug.data import spec as data_spec  # noqa: E402
from fedgen_debug.device import lm_data  # noqa: E402


def oov_rankings(tokens_by_user: dict[str, list[list[str]]], vocab) -> tuple[collections.Counter, dict]:
    """(OOV token counts over the population, the mean over users of each user's OOV-word shares)."""
    counts, weights = collections.Counter(), collections.defaultdict(float)
    for tokens in tokens_by_user.values():
        user = collections.Counter(t for sentence in tokens for t in sentence if t not in vocab)
        counts.update(user)
        total = sum(user.values())
        for word, n in user.items():
            weights[word] += n / total / len(tokens_by_user)
    return counts, dict(weights)


def top(ranking, k: int) -> list[tuple[str, float]]:
    return sorted(ranking.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def glued_pairs_typed(top_words: list[str], counts: collections.Counter) -> dict:
    """Of a model's top words, those with a space: the glued pairs the users' bugged tokens contain
    (with their token counts), and the ones the model composed (no user typed them)."""
    spaced = [w for w in top_words if " " in w]
    return {"with_space": len(spaced), "typed": [(w, counts[w]) for w in spaced if counts.get(w, 0) > 0],
            "composed": [w for w in spaced if counts.get(w, 0) == 0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--vocab", required=True, help="file:PATH or public:DATA_SPEC")
    parser.add_argument("--vocab-size", type=int, default=10_000)
    parser.add_argument("--fraction", type=float, default=0.1, help="share of sentences glued")
    parser.add_argument("--seed", type=int, default=1, help="the bug's seed (a run's seed)")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--analysis", help="a char-LM run's released/analysis.json (same --fraction and --seed)")
    args = parser.parse_args()
    try:
        vocab = lm_data.named_vocabulary(args.vocab, args.vocab_size)
    except ValueError as e:
        parser.error(f"--vocab: {e}")
    client_data = data_spec.load_client_data(args.data)
    bug = TokenizationBug(args.fraction, seed=args.seed)
    tokens = {cid: lm_data.device_tokens(client_data, cid, bug) for cid in client_data.client_ids}
    counts, weights = oov_rankings(tokens, vocab)
    all_tokens = sum(len(s) for t in tokens.values() for s in t)
    oov = sum(counts.values())
    report = {"data": args.data, "vocab": args.vocab, "fraction": args.fraction, "users": len(tokens),
              "oov_share_of_tokens": round(oov / all_tokens, 4),
              "glued_share_of_oov": round(sum(n for w, n in counts.items() if " " in w) / oov, 4)}
    for name, ranking in (("by_tokens", counts), ("by_user", weights)):
        head = top(ranking, args.top)
        glued = top({w: v for w, v in ranking.items() if " " in w}, 10)
        report[name] = {f"glued_in_top_{args.top}": sum(" " in w for w, _ in head),
                        "top": [(w, round(v, 4)) for w, v in head],
                        "top_glued": [(w, round(v, 4)) for w, v in glued]}
    if args.analysis:
        with open(args.analysis, encoding="utf-8") as f:
            model_top = [t["word"] for t in json.load(f)["current"]["top_k"][:args.top]]
        report["model_top"] = {"analysis": args.analysis, **glued_pairs_typed(model_top, counts)}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
