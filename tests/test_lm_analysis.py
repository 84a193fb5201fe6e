"""The char-LM analysis on hand-built samples: what the OOV table lists and the masses it reports."""

import math

import pytest

from fedgen_debug.data.text import Vocabulary
from fedgen_debug.analysis import lm_analysis

# 20 Monte-Carlo samples of a "model": in-vocabulary words it ends early on, glued pairs, OOV words.
SAMPLES = ["a"] * 6 + ["in"] * 4 + ["i have"] * 3 + ["regex"] * 2 + ["i hve"] + ["xcode"] + [""] * 3
LOG_PROBS = {"a": -1.0, "in": -1.5, "i have": -2.0, "regex": -2.5, "i hve": -3.0, "xcode": -3.5, "": -0.5}


@pytest.fixture
def fake_model(monkeypatch):
    scored = []

    def joint_log_prob(model, words):
        scored.append(list(words))
        return [LOG_PROBS[w] for w in words]

    monkeypatch.setattr(lm_analysis, "sample_words", lambda model, count, max_length, seed: SAMPLES[:count])
    monkeypatch.setattr(lm_analysis, "joint_log_prob", joint_log_prob)
    return scored


class _Run:
    max_length = 16


def test_the_table_lists_generated_oov_words_only(fake_model):
    vocab = Vocabulary(("a", "in", "i", "have"))
    report = lm_analysis.analyze_char(None, vocab, _Run(), samples=20, top_k=3, seed=0)
    # `a` and `in` are in the vocabulary: no OOV token, however often the model ends a word there.
    assert [t["word"] for t in report["top_k"]] == ["i have", "regex", "i hve"]
    assert report["top_k"][0] == {"word": "i have", "probability": pytest.approx(math.exp(-2.0)), "sampled": 3}
    assert report["top_k_with_space"] == 2
    # The words with a space on their own, most probable first (top_k of them).
    assert [(t["word"], t["sampled"]) for t in report["space_top_k"]] == [("i have", 3), ("i hve", 1)]
    # The masses count every sample: 10 in-vocabulary, 4 with a space (3 of them split into vocabulary words).
    assert report["in_vocabulary_mass"] == pytest.approx(10 / 20)
    assert report["space_count"] == 4 and report["space_mass"] == pytest.approx(4 / 20)
    assert report["split_into_vocabulary_mass"] == pytest.approx(3 / 20)
    # Only the listed candidates are scored (the empty word and vocabulary words are not).
    assert sorted(w for batch in fake_model for w in batch) == ["i have", "i hve", "regex", "xcode"]


def test_a_model_that_only_generates_vocabulary_words_lists_nothing(fake_model):
    vocab = Vocabulary(("a", "in", "i have", "regex", "i hve", "xcode"))
    report = lm_analysis.analyze_char(None, vocab, _Run(), samples=20, top_k=20, seed=0)
    assert report["top_k"] == report["space_top_k"] == [] and report["top_k_with_space"] == 0
    assert report["in_vocabulary_mass"] == pytest.approx(17 / 20)


def _word_body(oov_by_position):
    return {"oov_by_position": [{"position": p + 1, "tokens": 1000, "oov": k} for p, k in enumerate(oov_by_position)]}


def test_the_word_verdict_compares_position_one_shares_not_overall_oov_rates():
    from fedgen_debug.stats import z_two_proportions

    # The bug's run: 30 of its 150 sampled OOV tokens at position 1 (20%); the baseline: 10 of 200 (5%).
    current = _word_body([30, 20, 20, 20, 20, 20, 10, 10])
    baseline = _word_body([10, 30, 30, 30, 30, 30, 20, 20])
    evidence = lm_analysis.verdict("word", current, baseline)
    assert evidence["statistic"] == "position_1_share_of_oov"
    assert math.isclose(evidence["z"], z_two_proportions(30, 150, 10, 200)) and evidence["z"] > 3
    assert evidence["suspected"] is True
    # A baseline sampling twice as much OOV everywhere, position 1 included, is no bug: the same share.
    doubled = _word_body([60, 40, 40, 40, 40, 40, 20, 20])
    assert lm_analysis.verdict("word", current, doubled)["z"] == 0.0
    assert lm_analysis.verdict("word", current, doubled)["suspected"] is False


def test_a_sampled_phrase_reads_its_words_and_unk_for_out_of_vocabulary_ids():
    vocab = Vocabulary(("a", "in", "i"))
    assert lm_analysis.phrase_text(vocab, [3, vocab.oov_id, 1, 2]) == "i UNK a in"


def test_the_char_verdict_by_hand_against_a_baseline_and_against_the_noise_floor():
    """z computed here from the formulas: two proportions with the pooled standard error; one proportion
    against the 1% floor of a model's slips."""
    def body(spaced: int, samples: int = 1000) -> dict:
        return {"space_count": spaced, "samples": samples, "space_mass": spaced / samples}

    # 30 of 1,000 sampled OOV words hold a space against the baseline's 5: pooled p = 0.0175,
    # se = √(0.0175 · 0.9825 · 2/1000) = 0.0058641, z = 0.025 / se = 4.2632.
    flagged = lm_analysis.verdict("char", body(30), body(5))
    assert flagged["z"] == pytest.approx(4.2632, abs=1e-4) and flagged["suspected"] is True
    assert flagged["test"] == "space mass vs baseline"
    # 8 against 5: z = 0.003 / √(0.0065 · 0.9935 · 0.002) = 0.8348: the noise of two sample sets.
    quiet = lm_analysis.verdict("char", body(8), body(5))
    assert quiet["z"] == pytest.approx(0.8348, abs=1e-4) and quiet["suspected"] is False
    # Without a baseline: 25 of 1,000 against 1%: z = 0.015 / √(0.01 · 0.99 / 1000) = 4.7673.
    alone = lm_analysis.verdict("char", body(25), None)
    assert alone["z"] == pytest.approx(4.7673, abs=1e-4) and alone["suspected"] is True
    assert lm_analysis.verdict("char", body(12), None)["suspected"] is False   # z = 0.64


def test_the_word_verdict_is_inconclusive_when_a_model_samples_too_few_oov_tokens():
    """5 of 6 OOV tokens at position 1 against 1 of 30 is z = 4.5 by the formula, but six tokens say
    nothing: under `MIN_OOV_TOKENS` a side the verdict is inconclusive and not suspected."""
    from fedgen_debug.stats import z_two_proportions

    few = _word_body([5, 1, 0, 0, 0, 0, 0, 0])
    baseline = _word_body([1, 5, 4, 4, 4, 4, 4, 4])
    evidence = lm_analysis.verdict("word", few, baseline)
    assert z_two_proportions(5, 6, 1, 30) > 3 and evidence["z"] == pytest.approx(z_two_proportions(5, 6, 1, 30))
    assert evidence["inconclusive"] is True and evidence["suspected"] is False and evidence["oov_sampled"] == [6, 30]
    enough = _word_body([20, 1, 1, 1, 1, 1, 0, 0])   # 25 tokens: judged
    judged = lm_analysis.verdict("word", enough, baseline)
    assert "inconclusive" not in judged and judged["suspected"] is True


def test_the_chart_writes_out_what_its_font_cannot_draw_and_matplotlib_then_misses_no_glyph(tmp_path):
    """A char-LM samples bytes of any script; DejaVu Sans (matplotlib's font) has no CJK, so 東京 and 大阪 would be
    two rows of the same empty boxes. They are written out as code points, as invisible characters are."""
    import warnings

    has_glyph = lm_analysis.chart_glyphs()
    assert has_glyph("a") and has_glyph("ф") and has_glyph("⟨") and has_glyph("␣") and not has_glyph("東")
    words = ["東京", "大阪", "i have", "the\u200b", "naïve"]
    assert lm_analysis.chart_labels(words, has_glyph) == [
        "⟨U+6771⟩⟨U+4EAC⟩", "⟨U+5927⟩⟨U+962A⟩", "i␣have", "the⟨U+200B⟩", "naïve"]
    assert lm_analysis.chart_labels(words, lambda c: True)[:2] == ["東京", "大阪"]
    report = {"current": {"kind": "char", "top_k": [{"word": w, "probability": 1e-3} for w in words]},
              "tokenization_bug_suspected": False}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lm_analysis._plot(report, str(tmp_path / "chart.png"))
    assert not [w for w in caught if "missing from" in str(w.message)], [str(w.message) for w in caught]
    assert (tmp_path / "chart.png").stat().st_size > 0
