"""Analysis of LM runs (paper App. B.3) and the automatic tokenization-bug verdict.

char-LM: Monte-Carlo samples, deduplicated, the OOV ones (not in the run's vocabulary) ranked by joint
probability (Eq. 1) → top-k table (Tables 2/8), and the top k of those with a space (the glued-token
candidates); the sampled probability mass of "words" with a space, and of those that split into
in-vocabulary words. word-LM: sampled phrases → OOV rate by position 1..8 (Fig. 1/4) and phrases
with UNK (Table 7). The verdict tests, with a one-sided two-proportion z-test, whether the current
run's space mass (char) or position 1's share of its sampled OOV tokens (word) exceeds the baseline's;
without a baseline, the char-LM's space mass is tested against a 1% noise floor (correctly tokenized
OOV words never contain a space) and the word-LM's position-1 OOV rate against its positions 2-8.
"""

from __future__ import annotations

import collections
import csv
import hashlib
import os

import numpy as np

from fedgen_debug.data.atomic import atomic_path
from fedgen_debug.analysis.visible_text import any_written_out, drawable, visible_all
from fedgen_debug.stats import Z_THRESHOLD, z_one_proportion, z_two_proportions
from fedgen_debug.models.char_lm import joint_log_prob, sample_words
from fedgen_debug.models.word_lm import sample_sentences
from fedgen_debug.runs import store
from fedgen_debug.privacy.run_ledger import run_privacy
from fedgen_debug.training.lm_run import load_lm

SPACE_NOISE_FLOOR = 0.01
# The word verdict against a baseline needs OOV tokens to compare: position 1 holds about a fifth of those
# sampled at positions 1-8, so under 25 a side leaves under 5 expected there, where the z-test says
# nothing (a model pretrained on public text at large noise sampled 8 in 40,000 positions: z = 0, no bug
# seen, and none could be). The verdict is then inconclusive, not "no".
MIN_OOV_TOKENS = 25
UNKNOWN_WORD = "UNK"   # how a sampled out-of-vocabulary id reads in every report


def phrase_text(vocab, ids) -> str:
    """A sampled word-LM phrase as text: its words, out-of-vocabulary ids as `UNKNOWN_WORD`."""
    return " ".join(vocab.words[t - 1] if 1 <= t <= vocab.size else UNKNOWN_WORD for t in ids)


def draw(model, vocab, run, samples: int, seed: int) -> list:
    """The Monte-Carlo samples an analysis reads: char-LM words (str), word-LM phrases (lists of ids)."""
    if run.kind == "char":
        return sample_words(model, samples, run.max_length, seed)
    return sample_sentences(model, vocab, samples, run.max_length, seed)


def as_texts(vocab, run, drawn: list) -> list[str]:
    """`draw`'s samples as text: the char-LM's words as they are, the word-LM's phrases by `phrase_text`."""
    return list(drawn) if run.kind == "char" else [phrase_text(vocab, ids) for ids in drawn]


def analyze_char(model, vocab, run, samples: int, top_k: int, seed: int, drawn: list | None = None) -> dict:
    """`drawn`: the `samples` words `draw` gave for this model and seed, if already drawn."""
    words = sample_words(model, samples, run.max_length, seed) if drawn is None else drawn
    counts = collections.Counter(words)
    unique = sorted(counts)
    # The table lists generated OOV words (paper Tables 2/8): an immediate end-of-word is no word, and a
    # string the vocabulary holds is no OOV token (an under-trained model ends words early: `a`, `in`).
    # Both count in the sampled mass, not in the table.
    listed = [w for w in unique if w.strip() and w not in vocab]
    log_probs = joint_log_prob(model, listed)
    ranked = sorted(zip(listed, log_probs), key=lambda x: -x[1])
    with_space = sum(c for w, c in counts.items() if " " in w.strip())
    splits = sum(c for w, c in counts.items() if " " in w.strip() and all(p in vocab for p in w.split()))
    in_vocabulary = sum(c for w, c in counts.items() if w in vocab)
    def rows(words):
        return [{"word": w, "probability": float(np.exp(lp)), "sampled": counts[w]} for w, lp in words[:top_k]]

    top = rows(ranked)
    # The glued-token candidates on their own: on varied text (plays, articles) the most probable OOV
    # words are names and rare words, and a perfect model's top 20 holds no glued pair even at 10%
    # (docs/lm.md: the data's own top 20), while the words with a space still say what the tokenizer did.
    spaced = rows([(w, lp) for w, lp in ranked if " " in w.strip()])
    return {"samples": samples, "space_count": with_space, "space_mass": with_space / samples,
            "split_into_vocabulary_mass": splits / samples, "in_vocabulary_mass": in_vocabulary / samples,
            "top_k_with_space": sum(" " in t["word"] for t in top), "top_k": top, "space_top_k": spaced}


def analyze_word(model, vocab, run, samples: int, seed: int, positions: int = 8, drawn: list | None = None) -> dict:
    """`drawn`: the `samples` phrases `draw` gave for this model and seed, if already drawn."""
    phrases = sample_sentences(model, vocab, samples, run.max_length, seed) if drawn is None else drawn
    by_position = []
    for p in range(positions):
        present = [s[p] for s in phrases if len(s) > p]
        by_position.append({"position": p + 1, "tokens": len(present),
                            "oov": sum(t == vocab.oov_id for t in present)})
    with_unk = [phrase_text(vocab, s) for s in phrases if vocab.oov_id in s][:10]
    return {"samples": samples, "oov_by_position": by_position, "phrases_with_unk": with_unk}


def _char_verdict(current: dict, baseline: dict | None) -> dict:
    if baseline is None:
        z = z_one_proportion(current["space_count"], current["samples"], SPACE_NOISE_FLOOR)
        test = f"space mass vs a {SPACE_NOISE_FLOOR:.0%} noise floor"
    else:
        z = z_two_proportions(current["space_count"], current["samples"], baseline["space_count"], baseline["samples"])
        test = "space mass vs baseline"
    return {"statistic": "space_mass", "test": test, "z": z, "z_threshold": Z_THRESHOLD, "suspected": z > Z_THRESHOLD}


def position_one_share(body: dict) -> tuple[int, int]:
    """(OOV tokens sampled at position 1, OOV tokens sampled at positions 1-8) of an `analyze_word` body:
    the word-LM's statistic, their ratio (the verdict's against a baseline, the monitor's signal)."""
    counts = [p["oov"] for p in body["oov_by_position"]]
    return counts[0], sum(counts)


def _word_verdict(current: dict, baseline: dict | None) -> dict:
    first = current["oov_by_position"][0]
    if baseline is None:
        rest = current["oov_by_position"][1:]
        k2, n2 = sum(r["oov"] for r in rest), sum(r["tokens"] for r in rest)
        test = "position-1 OOV rate vs positions 2-8"
        z = z_two_proportions(first["oov"], max(first["tokens"], 1), k2, max(n2, 1))
    else:
        # Position 1's share of the OOV tokens sampled at positions 1-8, vs the baseline's. Independently
        # trained runs differ in how much OOV they sample overall (measured: 3% vs 9% at positions 3-8
        # for two 0% runs, so raw position-1 rates gave z = 8.2); glued first tokens raise position 1 alone.
        # z counts the noise of the two models' samples, not the spread between trainings of the same
        # settings: how often 0% runs differ by more is measured by evaluation/lm_replicates.py.
        (k1, n1), (k2, n2) = position_one_share(current), position_one_share(baseline)
        test = "position 1's share of sampled OOV tokens vs baseline"
        z = z_two_proportions(k1, max(n1, 1), k2, max(n2, 1))
        if min(n1, n2) < MIN_OOV_TOKENS:
            return {"statistic": "position_1_share_of_oov", "test": test, "z": z, "z_threshold": Z_THRESHOLD,
                    "suspected": False, "inconclusive": True, "oov_sampled": [n1, n2],
                    "why": f"the models sampled {n1} and {n2} OOV tokens at positions 1-8: under {MIN_OOV_TOKENS} "
                           "a side the share at position 1 cannot be compared"}
    statistic = "position_1_oov_rate" if baseline is None else "position_1_share_of_oov"
    return {"statistic": statistic, "test": test, "z": z, "z_threshold": Z_THRESHOLD, "suspected": z > Z_THRESHOLD}


def analyze_model(model, vocab, run, samples: int, top_k: int, seed: int, drawn: list | None = None) -> dict:
    """One model's analysis body (`analyze_char` or `analyze_word`, by the run's kind): what `verdict`
    compares. `drawn`: `draw(model, vocab, run, samples, seed)`, if the caller has drawn it already."""
    if run.kind == "char":
        return analyze_char(model, vocab, run, samples, top_k, seed, drawn)
    return analyze_word(model, vocab, run, samples, seed, drawn=drawn)


# ---- the samples, released for `diagnose` ---------------------------------------------------------------
def _model_digest(run_dir: str) -> str:
    """Which released model drew the samples: a retrained or resumed run's samples are not reused."""
    with open(store.released(run_dir, store.MODEL_WEIGHTS), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def release_texts(run_dir: str, texts: list[str], samples: int, seed: int) -> None:
    """The samples an analysis drew from the run, as text (`as_texts`), with what drew them: `diagnose` reads
    them instead of drawing the same samples again (as it reads `analyze_gan`'s samples.npz)."""
    store.write_json(store.released(run_dir, store.SAMPLES_JSON),
                     {"samples": samples, "seed": seed, "model_sha256": _model_digest(run_dir), "texts": texts})


def released_texts(run_dir: str, samples: int, seed: int) -> list[str] | None:
    """The run's released samples (`release_texts`) if they are `samples` samples drawn with `seed` from the
    model the run releases now, else None."""
    path = store.released(run_dir, store.SAMPLES_JSON)
    if not os.path.exists(path):
        return None
    released = store.read_json(path)
    if (released.get("samples"), released.get("seed")) != (samples, seed):
        return None
    return released["texts"] if released.get("model_sha256") == _model_digest(run_dir) else None


def sample_texts(model, vocab, run, samples: int, seed: int) -> list[str]:
    """`samples` samples of the model as text, drawn as an analysis draws them (`draw`, `as_texts`)."""
    return as_texts(vocab, run, draw(model, vocab, run, samples, seed))


def verdict(kind: str, current: dict, baseline: dict | None) -> dict:
    """The verdict's evidence for one model's analysis body (`analyze_char` / `analyze_word`), against a
    baseline's or alone."""
    return (_char_verdict if kind == "char" else _word_verdict)(current, baseline)


def char_bars(report: dict) -> tuple[list[str], dict[str, list[float]]]:
    """What the char-LM plot draws: the current run's top-k words and, per model, each word's own joint
    probability under that model (the baseline's bars are the same words scored by the baseline model,
    never the baseline's own top-k under the current run's labels)."""
    words = [t["word"] for t in report["current"]["top_k"]]
    bars = {"current": [t["probability"] for t in report["current"]["top_k"]]}
    if "baseline" in report:
        bars["baseline"] = [t["baseline_probability"] for t in report["current"]["top_k"]]
    return words, bars


def chart_glyphs():
    """Whether matplotlib's fonts for text (the default family and its fallbacks) hold a character's glyph."""
    from matplotlib import font_manager, ft2font, rcParams

    codes = set()
    for family in rcParams["font.family"]:
        for name in rcParams.get(f"font.{family}", [family]):   # a generic family ("sans-serif") lists its fonts
            try:
                path = font_manager.findfont(font_manager.FontProperties(family=name), fallback_to_default=False)
            except ValueError:
                continue
            codes.update(ft2font.FT2Font(path).get_charmap())
    return lambda character: ord(character) in codes


def chart_labels(words, has_glyph) -> list[str]:
    """The char-LM chart's labels: `visible` with spaces as "␣", and characters its fonts cannot draw written out."""
    return [drawable(word, has_glyph) for word in visible_all(words, space="␣")]


def _plot(report: dict, path: str) -> None:
    """char: the current top-k words' joint probabilities under each model; word: OOV rate by position
    (paper Fig. 4)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [(n, report[n]) for n in ("current", "baseline") if n in report]
    fig, ax = plt.subplots(figsize=(8, 4))
    if report["current"]["kind"] == "char":
        words, bars = char_bars(report)
        for offset, (name, probabilities) in enumerate(bars.items()):
            ax.barh([i + 0.4 * offset for i in range(len(words))], probabilities, height=0.4,
                    label=f"{name} model")
        labels = chart_labels(words, chart_glyphs())
        ax.set_yticks(range(len(words)), labels)
        ax.invert_yaxis()
        ax.set_xscale("symlog", linthresh=1e-6)
        ax.set_xlabel("joint probability (Eq. 1) of the current run's top words, under each model"
                      + ("\n⟨U+XXXX⟩: a character that prints as nothing, as a letter it is not, or not in this "
                         "chart's font" if any_written_out(labels) else ""))
    else:
        for name, r in runs:
            positions = r["oov_by_position"]
            ax.plot([p["position"] for p in positions], [p["oov"] / max(p["tokens"], 1) for p in positions],
                    marker="o", label=name)
        ax.set_xlabel("position in sampled phrase")
        ax.set_ylabel("OOV rate")
    ax.set_title(f"tokenization bug suspected: {report['tokenization_bug_suspected']}")
    ax.legend(loc="lower right")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=90)
    plt.close(fig)


def analyze_lm(run_dir: str, baseline_dir: str | None = None, samples: int = 2000, top_k: int = 20,
               seed: int = 0) -> dict:
    """Writes analysis.json (and a top-k CSV for char runs) into run_dir, and each model's samples as text
    (`release_texts`) into its run; returns the report."""
    if samples < 1 or top_k < 1:
        raise ValueError(f"samples and top_k must be >= 1. Found samples {samples}, top_k {top_k}.")
    reports, models = {}, {}
    for name, directory in (("current", run_dir), ("baseline", baseline_dir)):
        if directory is None:
            continue
        model, vocab, run = load_lm(directory)
        models[name] = model
        if name == "baseline" and run.kind != reports["current"]["kind"]:
            raise ValueError(f"baseline {directory} is a {run.kind}-LM; {run_dir} is a {reports['current']['kind']}-LM.")
        drawn = draw(model, vocab, run, samples, seed)
        body = analyze_model(model, vocab, run, samples, top_k, seed, drawn)
        release_texts(directory, as_texts(vocab, run, drawn), samples, seed)
        oov = store.read_json(store.released(directory, store.DEVICE_METRICS))["oov_rate"]
        privacy = run_privacy(directory)
        (training,) = [r for k, r in privacy["releases"].items() if k.endswith("/training")]
        reports[name] = {"run_dir": directory, "kind": run.kind, "device_reported_oov_rate": oov["mean"],
                         "device_reported_oov_rate_stddev": oov["stddev"],
                         "privacy": {"run": training, "population_total": privacy["population_total"]}, **body}
    current, baseline = reports["current"], reports.get("baseline")
    if baseline is not None and current["kind"] == "char" and current["top_k"]:
        # The same words under the baseline model: what "this word was rarer before" means.
        scored = joint_log_prob(models["baseline"], [t["word"] for t in current["top_k"]])
        for t, log_prob in zip(current["top_k"], scored):
            t["baseline_probability"] = float(np.exp(log_prob))
    evidence = verdict(current["kind"], current, baseline)
    report = {"tokenization_bug_suspected": bool(evidence["suspected"]),
              "inconclusive": bool(evidence.get("inconclusive")), "evidence": evidence, **reports}
    store.write_json(store.released(run_dir, store.ANALYSIS), report)
    _plot(report, store.released(run_dir, store.ANALYSIS_PNG))
    if current["kind"] == "char":
        with atomic_path(store.released(run_dir, store.TOP_OOV_WORDS)) as tmp, open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["word", "probability", "sampled", "baseline_probability"])
            writer.writeheader()
            writer.writerows(current["top_k"])
    return report
