"""`fedgen-debug diagnose` (`analysis.diagnose`): health, ranked differences, named checks, evidence."""

import json
import os

import numpy as np
import pytest

from conftest import run_cli, run_main
from fedgen_debug.analysis import calibration as calibration_module
from fedgen_debug.analysis import diagnose, diagnosis_summary, differences, gan_analysis, image_properties
from fedgen_debug.cli.diagnose_cmd import format_report
from fedgen_debug.data import client_data as cd
from fedgen_debug.data import spec as data_spec
from fedgen_debug.device.catalog import parse_bug
from fedgen_debug.runs import store


def _halves(spec="synthetic-images:writers=40,seed=4", count=300):
    """Two samples of one population: every writer's even and odd images (halves of different writers
    differ by their styles, more than `count` samples' noise: the calibration's problem, not this test's)."""
    data = data_spec.load_client_data(spec)
    pixels = [cd.client_numpy(data, c)["pixels"] for c in sorted(data.client_ids)]
    each = -(-count // len(pixels))
    return tuple(np.concatenate([p[start::2][:each] for p in pixels])[:count] for start in (0, 1))


def test_a_rotated_set_is_diagnosed_as_orientation_first():
    clean, other = _halves()
    rotated = np.rot90(other, k=1, axes=(1, 2))
    ranked, values_a, values_b = diagnose.image_differences(clean, rotated)
    assert ranked[0]["family"] == "orientation" and ranked[0]["significant"]
    score_a, score_b = diagnose.unlike_scores(ranked, values_a, values_b)
    pick_a, pick_b = diagnose.evidence_indices(score_a, score_b, count=5)
    # B's picks lie further towards B than B's average sample, A's further away than A's average.
    assert score_b[pick_b].mean() > score_b.mean() and score_a[pick_a].mean() < score_a.mean()


def test_clean_halves_differ_in_nothing():
    ranked, _, _ = diagnose.image_differences(*_halves())
    assert not [c for c in ranked if c["significant"]]


def test_unlike_scores_follow_the_direction_of_the_difference():
    ranked = [{"property": "p", "significant": True, "z": 5.0, "effect": 0.8},
              {"property": "q", "significant": False, "z": 9.0, "effect": 0.9}]
    a, b = {"p": np.array([0.0, 1.0, 2.0]), "q": np.zeros(3)}, {"p": np.array([3.0, 10.0]), "q": np.ones(2)}
    score_a, score_b = diagnose.unlike_scores(ranked, a, b)
    assert np.argmax(score_b) == 1 and np.argmin(score_a) == 0      # q is not significant: left out
    flipped = [{**ranked[0], "z": -5.0, "effect": -0.8}]
    score_a, score_b = diagnose.unlike_scores(flipped, a, b)
    assert np.argmax(score_b) == 0 and np.argmin(score_a) == 2


def test_health_flags_blank_and_empty_auxiliaries():
    blank = np.ones((50, 28, 28))
    assert not diagnose.image_health(blank)["healthy"] and "blank" in diagnose.image_health(blank)["reason"]
    assert diagnose.image_health(_halves(count=50)[0])["healthy"]
    assert not diagnose.text_health(["", " ", "a"])["healthy"] and diagnose.text_health(["ab", "c", ""])["healthy"]


def test_health_names_faint_samples_among_the_blank_ones_and_decides_as_before():
    """Thin strokes 0.3 below the paper never reach half contrast: blank, as before (an undertrained GAN draws
    such samples too), but the reason names them faint; a flat field is blank without ink."""
    faint = np.ones((50, 28, 28))
    faint[:, 8:20, 13] = 0.7
    faint[:20] = 1.0                                        # 20 of 50 with no ink at all
    health = diagnose.image_health(faint)
    assert not health["healthy"] and health["shares"]["blank"] == 1.0 and health["shares"]["faint"] == 0.6
    assert health["reason"] == ("mostly blank samples (40% without ink, 60% with faint ink only: a GAN still"
                                " learning draws faint samples, and so does one of data whose strokes are faint"
                                " or thin)")
    flat = diagnose.image_health(np.ones((50, 28, 28)))
    assert flat["shares"]["faint"] == 0.0 and flat["reason"] == "mostly blank samples"


def test_health_says_whether_a_faint_gan_was_still_changing_from_its_last_snapshots():
    """The erode T4 GAN of 2026-12-04 (81% blank after 150 rounds) darkened its ink from 0.48 to 0.62 over
    its last 30 rounds: still changing. The decision stays unhealthy either way; the reason says which."""
    faint = np.ones((50, 28, 28))
    faint[:, 8:20, 13] = 0.7
    darkening = {"rounds": [120, 130, 140, 150], "blank_share": [0.81, 0.86, 0.86, 0.81],
                 "peak_darkness": [0.48, 0.47, 0.52, 0.62], "pixel_change": [0.007, 0.006, 0.006],
                 "still_changing": True}
    health = diagnose.image_health(faint, darkening)
    assert not health["healthy"] and health["trend"] == darkening
    assert health["reason"] == (
        "mostly blank samples (0% without ink, 100% with faint ink only: the GAN was still changing over rounds"
        " 120-150 (blank share 81% to 81%, peak darkness 0.48 to 0.62, pixels changing by up to 0.007 per"
        " snapshot): train it longer; if it then settles on faint marks, its data's strokes may be faint or thin)")
    settled = {**darkening, "peak_darkness": [0.48, 0.47, 0.48, 0.47], "still_changing": False}
    assert diagnose.image_health(faint, settled)["reason"].endswith(
        "the GAN had settled over rounds 120-150 (blank share 81% to 81%, peak darkness 0.48 to 0.47, pixels"
        " changing by up to 0.007 per snapshot): faint or thin strokes in its data, or a GAN stuck on faint"
        " marks, which its samples cannot tell apart)")
    # A healthy GAN's trend is kept, not worded.
    assert diagnose.image_health(_halves(count=50)[0], settled) == {
        **diagnose.image_health(_halves(count=50)[0]), "trend": settled}


def test_the_text_report_names_spacing_for_glued_words():
    words = [f"w{i % 37}x" for i in range(400)]
    glued = [w if i % 2 else f"{w} {w}" for i, w in enumerate(words)]
    ranked, _, _ = diagnose.text_differences(words, glued)
    assert ranked[0]["family"] == "spacing" and ranked[0]["significant"]


def test_a_word_lm_pair_does_not_read_phrases_at_the_samplers_cap_as_cut_sentences():
    ended = [" ".join(["w"] * (5 + i % 9)) + " ." for i in range(600)]
    at_cap = " ".join(["w"] * 20)   # lm_run.MAX_LENGTH["word"] ids: the sampler stopped it, not the model
    more_at_cap = [at_cap if i % 4 == 0 else s for i, s in enumerate(ended)]
    by_word_lm, _, _ = diagnose.text_differences(ended, more_at_cap, kind="word")
    as_plain_text, _, _ = diagnose.text_differences(ended, more_at_cap)
    assert not next(c for c in by_word_lm if c["property"] == "unterminated")["significant"]
    assert next(c for c in as_plain_text if c["property"] == "unterminated")["significant"]


def _report(kind="char", differ=True):
    row = {"property": "has_space", "family": "spacing", "a": 0.01, "b": 0.2, "effect": 0.19, "standard_error": 0.02,
           "z": 9.5, "significant": True, "direction": "more often", "rank": 1, "z_threshold": 4.0}
    return {"schema": diagnose.SCHEMA, "kind": kind, "runs": {"a": "A", "b": "B"}, "samples": 100, "seed": 0,
            "health": {"a": {"healthy": True}, "b": {"healthy": True}}, "answer": "yes" if differ else "no",
            "answer_reason": "the named check tokenization_bug_suspected found its bug" if differ else "nothing found",
            "differ": differ, "families": ["spacing"],
            "calibration": {"calibrated": False, "against": "sampling noise of the two sample sets", "z_threshold": 4.0},
            "differences": [row],
            "checks": [{"name": "tokenization_bug_suspected", "family": "spacing", "suspected": True, "z": 12.0,
                        "z_threshold": 3.0}],
            "distinctive_terms": {"tokens": {"a": [], "b": [{"term": "i have"}]}},
            "evidence": {"a": ["x"], "b": ["i have"], "chart_png": "B/released/diagnosis.png"}}


def test_the_brief_names_the_named_check_that_decided_before_a_small_largest_property():
    from fedgen_debug.cli.diagnose_cmd import brief, brief_line, brief_lines

    report = _report()
    report["differences"][0].update(z=0.7, significant=False)
    line = brief_line(brief(report))
    assert line == ("differ YES (sampling noise only); found by the named check tokenization_bug_suspected (spacing), z = 12.0; "
                    "largest property: has_space (spacing), z = 0.7")
    assert "found by the named check tokenization_bug_suspected (spacing), z = 12.0; largest property: has_space" \
        in brief_lines(brief(report), "B = after, A = before")[1]
    quiet = _report(differ=False)
    quiet["checks"][0]["suspected"] = False
    assert brief_line(brief(quiet)) == "differ no (sampling noise only); first: has_space (spacing), z = 9.5"


def test_the_printed_report_says_what_differs_and_how_sure():
    text = "\n".join(format_report(_report()))
    assert "differ: YES" in text and "not training noise" in text
    assert "* has_space" in text and "spacing" in text and "+0.19 ± 0.04" in text
    assert "check tokenization_bug_suspected: YES (z = 12.0, threshold 3)" in text
    assert "'i have'" in text


def test_the_printed_report_writes_out_characters_that_print_as_nothing_or_as_another_letter():
    report = _report()
    report["evidence"]["b"] = ["\u200b", "l\u043eve", "\u0430"]   # the last a Cyrillic а among A's English
    report["distinctive_terms"]["tokens"]["b"] = [{"term": "\ufeff"}]
    text = "\n".join(format_report(report))
    assert "B's samples most unlike A: '⟨U+200B⟩', 'l⟨U+043E⟩ve', '⟨U+0430⟩'" in text
    assert "most distinctive of B: '⟨U+FEFF⟩'" in text


@pytest.fixture(scope="module")
def lm_pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("diagnose")
    runs = {}
    from fedgen_debug.cli.bug_arg import bug_settings
    from fedgen_debug.experiments.sweep import train_run
    from fedgen_debug.training.lm_run import LMRun

    # `train-lm --kind char --preset test --rounds 2 --vocab-size 200 [--bug concat:0.5]`, in process (as
    # gan_pair below): the CLI's train_run on the CLI's LMRun, without a TensorFlow start-up per run.
    for name, bug in (("before", None), ("after", "concat:0.5")):
        runs[name] = str(root / name)
        train_run(LMRun("char", "synthetic-text:users=12,seed=3", preset="test", rounds=2, vocab_size=200,
                        **(bug_settings(bug, "text") if bug else {})), runs[name])
    return runs


def _schema_errors(report: dict) -> list[str]:
    import jsonschema

    with open(diagnose.SCHEMA_PATH) as f:
        schema = json.load(f)
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(report)]


def test_the_schema_names_the_families_and_refuses_a_broken_report():
    with open(diagnose.SCHEMA_PATH) as f:
        schema = json.load(f)
    assert schema["$defs"]["difference"]["properties"]["family"]["enum"] == list(differences.FAMILIES)
    assert schema["properties"]["schema"]["const"] == diagnose.SCHEMA
    report = json.loads(json.dumps(_report()))
    assert _schema_errors(report)                      # the hand-built row misses the schema's newer keys
    assert any("'differences'" in e for e in _schema_errors({k: v for k, v in report.items() if k != "differences"}))


def test_diagnose_cli_on_a_char_lm_pair_writes_the_report_into_b(lm_pair):
    result = run_cli("diagnose", lm_pair["before"], lm_pair["after"], "--samples", "200", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert _schema_errors(report) == []
    broken = {**report, "differences": [{**report["differences"][0], "family": "mood"}]}
    assert any("mood" in e for e in _schema_errors(broken))
    assert report["schema"] == diagnose.SCHEMA and report["kind"] == "char"
    assert {"health", "differences", "families", "checks", "calibration", "evidence", "distinctive_terms"} <= set(report)
    assert report["calibration"]["calibrated"] is False
    (check,) = report["checks"]
    analysis = store.read_json(store.released(lm_pair["after"], store.ANALYSIS))
    assert check["suspected"] == analysis["tokenization_bug_suspected"]     # the named check, unchanged
    assert all(c["family"] in differences.TEXT_FAMILIES for c in report["differences"])
    # the char-LM's words are read against each run's released vocabulary too
    assert "glued_words" in {c["property"] for c in report["differences"]}
    assert diagnose.run_vocabulary("char", lm_pair["after"])[:3] == store.read_json(
        store.released(lm_pair["after"], store.VOCAB))["words"][:3]
    assert diagnose.run_vocabulary("word", lm_pair["after"]) is None
    assert store.read_json(store.released(lm_pair["after"], store.DIAGNOSIS))["schema"] == diagnose.SCHEMA
    assert os.path.exists(store.released(lm_pair["after"], store.DIAGNOSIS_PNG))
    # The printed report (the console script itself ran above, for the JSON one).
    printed = run_main("diagnose", lm_pair["before"], lm_pair["after"], "--samples", "100")
    assert printed.returncode == 0 and "differ:" in printed.stdout, printed.stderr
    assert "check tokenization_bug_suspected" in printed.stdout


def test_diagnose_refuses_runs_of_two_kinds(lm_pair, gan_pair, tmp_path):
    gan = gan_pair["before"]
    done = run_main("diagnose", gan, lm_pair["after"])
    assert done.returncode == 2 and "is a gan run" in done.stderr and "Traceback" not in done.stderr
    done = run_main("diagnose", gan, str(tmp_path / "nothing"))
    assert done.returncode == 2 and "not a run directory" in done.stderr


@pytest.fixture(scope="module")
def gan_pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("diagnose-gan")
    runs = {}
    from fedgen_debug.cli.bug_arg import bug_settings
    from fedgen_debug.experiments.sweep import train_run
    from fedgen_debug.training.gan_run import GANRun

    for name, bug in (("before", None), ("after", "rotate:1.0")):   # `train-gan [--bug rotate:1.0]`, in process
        runs[name] = str(root / name)
        train_run(GANRun("synthetic-images:writers=8,seed=2", "random", preset="test", rounds=2,
                         **(bug_settings(bug, "images") if bug else {})), runs[name])
    return runs


def test_a_gan_pair_with_a_fault_gets_a_full_report(gan_pair, monkeypatch):
    runs = gan_pair
    monkeypatch.setattr(gan_analysis, "TREND_SNAPSHOTS", 2)   # the test preset's 2 rounds have 2 snapshots
    assert store.read_config(runs["after"])["gan"]["fault"] == "rotate:1.0"
    report = diagnose.diagnose(runs["before"], runs["after"], samples=60)
    assert _schema_errors(json.loads(json.dumps(report))) == []
    assert report["kind"] == "gan" and report["checks"][0]["name"] == "pixel_inversion_suspected"
    assert {c["property"] for c in report["differences"]} >= {"light_ink", "predicted_class", "confidence"}
    assert os.path.exists(report["evidence"]["a_png"]) and os.path.exists(report["evidence"]["b_png"])
    # An unhealthy auxiliary's differences are no evidence about the data: `differ` needs both healthy.
    healthy = all(h["healthy"] for h in report["health"].values())
    assert (report["answer"], report["answer_reason"]) == diagnose.answer(report["checks"], report["differences"],
                                                                          healthy, report["calibration"]["calibrated"])
    assert report["differ"] == (report["answer"] == "yes")
    assert ("unhealthy" in report) == (not healthy)
    assert parse_bug("rotate:1.0", "images").fraction == 1.0
    # Each side's health carries the trend of its released snapshots.
    for side, run in (("a", runs["before"]), ("b", runs["after"])):
        assert report["health"][side]["trend"]["rounds"] == store.snapshot_rounds(run)
        assert report["health"][side]["trend"] == json.loads(json.dumps(diagnose.run_trend(run)))


def test_a_named_check_that_found_its_bug_names_its_family_first():
    ranked = [{"family": "length", "significant": True}, {"family": "spacing", "significant": False},
              {"family": "case", "significant": True}]
    found = {"family": "spacing", "suspected": True, "inconclusive": False}
    assert diagnose.report_families([found], ranked) == ["spacing", "length", "case"]
    # Not found, or found on an auxiliary that did not learn its data: the properties alone.
    assert diagnose.report_families([{**found, "suspected": False}], ranked) == ["length", "case"]
    assert diagnose.report_families([{**found, "inconclusive": True}], ranked) == ["length", "case"]
    assert diagnose.report_families([found], []) == ["spacing"]


def test_the_answer_says_cannot_tell_where_only_the_samples_noise_is_exceeded():
    """A clean pair of trainings differs beyond the samples' noise (issue 56's real-ε clean pairs both did):
    uncalibrated, such a difference is "cannot tell", never "yes"; a named check, with its own threshold,
    still answers; an unhealthy side is "cannot tell" whatever it shows."""
    significant = [{"property": "mean_length", "family": "length", "significant": True}]
    quiet = [{"property": "mean_length", "family": "length", "significant": False}]
    found = [{"name": "tokenization_bug_suspected", "suspected": True, "inconclusive": False}]
    not_found = [{**found[0], "suspected": False}]
    inconclusive = [{**found[0], "inconclusive": True}]

    def said(checks, ranked, healthy=True, calibrated=False):
        return diagnose.answer(checks, ranked, healthy, calibrated)[0]

    assert said(not_found, significant) == "cannot tell"
    assert said(inconclusive, significant) == "cannot tell"
    assert said(not_found, significant, calibrated=True) == "yes"
    assert said(found, quiet) == said(found, significant) == "yes"
    assert said(not_found, quiet) == said(not_found, quiet, calibrated=True) == "no"
    assert said(found, significant, healthy=False) == said(not_found, quiet, healthy=False) == "cannot tell"
    assert "no calibration" in diagnose.answer(not_found, significant, True, False)[1]
    # A selection pair calibrated by replicate pairs only: two selections of users differ by more without a
    # bug, so what passes the replicate noise is a candidate, as uncalibrated; a named check still answers.
    stand_in = diagnose.answer(not_found, significant, True, True, replicate_for_selection=True)
    assert stand_in[0] == "cannot tell" and "two selections of users" in stand_in[1]
    assert diagnose.answer(found, significant, True, True, replicate_for_selection=True)[0] == "yes"
    assert diagnose.answer(not_found, quiet, True, True, replicate_for_selection=True)[0] == "no"


def test_the_word_lm_check_says_what_else_raises_unk_at_position_one():
    """The word-LM's named check reads UNK at position 1, which markup at the start of each line raises too
    (docs/analysis.md): its "yes" says so; the char-LM's (space mass) answers as before."""
    quiet = [{"property": "mean_length", "family": "length", "significant": False}]
    word = [{"name": "tokenization_bug_suspected", "suspected": True, "statistic": "position_1_share_of_oov"}]
    char = [{**word[0], "statistic": "space_mass"}]
    said_word, said_char = diagnose.answer(word, quiet, True, True), diagnose.answer(char, quiet, True, True)
    assert said_word[0] == said_char[0] == "yes"
    assert "anything else new at the start of sentences" in said_word[1]
    assert said_char[1] == "the named check tokenization_bug_suspected found its bug"


# A calibration of 3 properties whose clean pairs' own threshold (4.1) is above Bonferroni's (2.39), and a named
# check that found nothing: the two answer tests below read the answer off these alone.
_RAISED_T4 = calibration_module.Calibration(
    "t4", "gan", "demo", "selection",
    {name: calibration_module.PropertyNoise(0.0, 1.0, 1.0, 20) for name in ("p", "q", "s")}, 19, 4.1, {})
_INVERSION_NOT_FOUND = [{"name": "pixel_inversion_suspected", "suspected": False, "inconclusive": False}]


def test_a_property_between_bonferroni_and_the_clean_pairs_threshold_is_a_candidate_not_a_no():
    """A calibration whose clean pairs have heavier tails than normal holds a raised threshold (4.1 here, over 3
    properties: Bonferroni 2.39). A pair at 3.0 is beyond Bonferroni but within what clean pairs reach: "cannot
    tell", naming it; at 5.0 "yes"; at 2.0 "no"."""
    raised, not_found = _RAISED_T4, _INVERSION_NOT_FOUND
    bonferroni = calibration_module.threshold_for(3)

    def said(z):
        rows = [{"property": "p", "family": "brightness", "kind": "mean", "difference": z,
                 "difference_standard_error": 0.0, "z": 0.0, "effect": 0.0, "standardized_difference": 0.0}]
        ranked = calibration_module.apply(rows, raised)
        return diagnose.answer(not_found, ranked, True, True, within_tails=diagnose._within_tails(ranked, raised))

    assert bonferroni < 3.0 < 4.1
    assert said(3.0) == ("cannot tell", "1 properties beyond Bonferroni's threshold but within the largest "
                                        "differences clean pairs of this type reach (p)")
    assert said(5.0)[0] == "yes" and said(2.0)[0] == "no"
    assert diagnose._within_tails([{"property": "p", "significant": False, "calibrated_z": 3.0}], None) == []


def test_the_answer_at_its_edges_a_lower_b_one_yes_among_candidates_and_bonferroni_by_hand():
    """Edges a mutation review found untested: a candidate where B is lower (z < 0) is "cannot tell" as for z > 0,
    never "no"; one property beyond the clean pairs' threshold answers "yes" even with another in their tails;
    Bonferroni's threshold over the calibration's 3 properties (Φ⁻¹(1 − 0.05/6) = 2.394, by hand)."""
    import statistics

    raised, not_found = _RAISED_T4, _INVERSION_NOT_FOUND

    def said(*zs):
        ranked = [{"property": name, "family": "brightness", "significant": abs(z) > 4.1, "calibrated_z": z}
                  for name, z in zip(("p", "q", "s"), zs)]
        return diagnose.answer(not_found, ranked, True, True, within_tails=diagnose._within_tails(ranked, raised))

    candidate = ("cannot tell", "1 properties beyond Bonferroni's threshold but within the largest differences "
                                "clean pairs of this type reach (p)")
    assert said(3.0, 0.1, 0.0) == candidate and said(-3.0, 0.1, 0.0) == candidate
    assert said(5.0, 3.0, 0.1) == ("yes", "1 properties beyond the training noise of clean pairs")
    bonferroni = statistics.NormalDist().inv_cdf(1 - 0.05 / 6)
    assert bonferroni == pytest.approx(2.394, abs=1e-3)
    assert said(2.3, 0.0, 0.0)[0] == "no" and said(2.45, 0.0, 0.0)[0] == "cannot tell"


def test_half_empty_text_is_healthy_and_one_unhealthy_side_makes_any_pair_cannot_tell(tmp_path, monkeypatch):
    """`text_health`'s "mostly empty" is more than half; and a pair whose B drew mostly nothing is "cannot tell"
    even where the named check found its bug: every side must be healthy (the real answer and health, the run
    reading stubbed)."""
    assert diagnose.text_health(["", "ab"]) == {"healthy": True, "shares": {"empty": 0.5}, "reason": None}
    assert diagnose.text_health(["", " ", "ab"])["healthy"] is False
    from fedgen_debug.analysis import calibration_store

    run_a, run_b = str(tmp_path / "A"), str(tmp_path / "B")
    for run in (run_a, run_b):
        os.makedirs(os.path.join(run, "released"))
    texts = {run_a: ["the cat sat on the mat"] * 40, run_b: ["the cat sat"] * 8 + [""] * 32}
    monkeypatch.setattr(diagnose, "check_comparable", lambda a, b: "char")
    monkeypatch.setattr(calibration_store, "choose", lambda *args: (None, None))
    monkeypatch.setattr(diagnose, "_named_check", lambda *args: {
        "name": "tokenization_bug_suspected", "family": "spacing", "suspect": "b", "suspected": True,
        "inconclusive": False, "z": 9.0, "z_threshold": 3.0, "statistic": "space_mass"})
    monkeypatch.setattr(diagnose, "lm_samples", lambda run, samples, seed: texts[run])
    monkeypatch.setattr(diagnose, "run_vocabulary", lambda kind, run: None)
    monkeypatch.setattr(diagnose, "_chart", lambda ranked, path: None)
    report = diagnose.diagnose(run_a, run_b, samples=40)
    assert report["health"]["a"]["healthy"] and not report["health"]["b"]["healthy"]
    assert (report["answer"], report["differ"]) == ("cannot tell", False)
    assert report["answer_reason"] == "an auxiliary is unhealthy: its samples are no evidence about the data"
    assert report["unhealthy"] == {"b": "mostly empty samples"}


def test_an_uncalibrated_clean_looking_difference_prints_cannot_tell_everywhere():
    report = {**_report(differ=False), "answer": "cannot tell", "answer_reason": "1 properties beyond the samples' noise",
              "checks": [{"name": "tokenization_bug_suspected", "suspected": False, "z": 0.5, "z_threshold": 3.0}]}
    text = "\n".join(format_report(report))
    assert "differ: CANNOT TELL" in text and "because: 1 properties beyond" in text and "differ: YES" not in text
    assert "families, most significant first (candidates: beyond the samples' noise only): spacing" in text
    # An unhealthy side's candidates are named for that, calibrated or not.
    sick = {**report, "unhealthy": {"b": "mostly blank"}, "calibration": {**report["calibration"], "calibrated": True}}
    assert "(candidates: an auxiliary is unhealthy): spacing" in "\n".join(format_report(sick))
    summary = diagnosis_summary.summarize(report, "B/released/diagnosis.json")
    assert summary["answer"] == "cannot tell" and summary["differ"] is False
    assert diagnosis_summary.headline(summary).startswith("what changed: cannot tell against training noise")
    assert "spacing — has_space more often" in diagnosis_summary.headline(summary)
    # A report written before "cannot tell" (schema /2) answers by its differ.
    assert diagnosis_summary.answer_of({"differ": True}) == "yes" and diagnosis_summary.answer_of({}) == "no"


def _named_check_refused(*_, **__):
    raise AssertionError("the named check ran again")


@pytest.mark.parametrize("kind", ["char", "gan"])
def test_the_named_check_report_given_is_used_and_changes_nothing(lm_pair, gan_pair, kind, monkeypatch):
    """`diagnose(..., named_report=)` (the demo's call, after its own named check): the same report as
    diagnose's own, without running the check or drawing an LM's samples again."""
    from fedgen_debug.analysis import gan_report, lm_analysis

    runs, samples = (lm_pair, 200) if kind == "char" else (gan_pair, 60)
    analyze = lm_analysis.analyze_lm if kind == "char" else gan_report.analyze_gan
    alone = diagnose.diagnose(runs["before"], runs["after"], samples=samples)
    named = analyze(runs["after"], runs["before"], samples=samples, seed=0)
    monkeypatch.setattr(lm_analysis, "analyze_lm", _named_check_refused)
    monkeypatch.setattr(gan_report, "analyze_gan", _named_check_refused)
    monkeypatch.setattr(lm_analysis, "draw", _named_check_refused)   # the LM samples: read, not drawn
    given = diagnose.diagnose(runs["before"], runs["after"], samples=samples, named_report=named)
    assert json.dumps(given, sort_keys=True) == json.dumps(alone, sort_keys=True)
    # A report of another pair, or of other samples, is refused rather than reported as this pair's check.
    with pytest.raises(ValueError, match="diagnose's named check analyses"):
        diagnose.diagnose(runs["after"], runs["before"], samples=samples, named_report=named)
    with pytest.raises(ValueError, match=f"diagnose draws {samples + 1}"):
        diagnose.diagnose(runs["before"], runs["after"], samples=samples + 1, named_report=named)


def _as_selection(run_dir: str, to: str, select: str) -> str:
    """A copy of a GAN run whose released config says it was trained on the users of `select`."""
    import shutil

    shutil.copytree(run_dir, to)
    config = store.read_config(to)
    store.write_json(store.released(to, store.CONFIG), {**config, "gan": {**config["gan"], "select": select}})
    return to


@pytest.mark.parametrize("low, high", [("by-user-accuracy:low", "by-user-accuracy:high"),
                                       ("by-example:misclassified", "by-example:correct")])
def test_the_named_check_reads_the_failing_side_of_a_selection_pair_in_either_order(gan_pair, tmp_path, low, high,
                                                                                    monkeypatch):
    """`diagnose LOW HIGH` asks the named check what `diagnose HIGH LOW` asks: are the low-accuracy (or
    misclassified) side's backgrounds the dark ones? Before, it asked it of the high-accuracy side."""
    from fedgen_debug.analysis import gan_report

    runs = {"low": _as_selection(gan_pair["after"], str(tmp_path / "low"), low),
            "high": _as_selection(gan_pair["before"], str(tmp_path / "high"), high)}
    assert diagnose.suspect_side("gan", runs["low"], runs["high"]) == "a"
    assert diagnose.suspect_side("gan", runs["high"], runs["low"]) == "b"
    assert diagnose.suspect_side("gan", gan_pair["before"], gan_pair["after"]) == "b"    # random vs random
    real = gan_report.analyze_gan
    asked = []

    def low_is_dark(current, compare=None, samples=1000, seed=0):   # the real report, its z only from the order
        asked.append((current, compare))
        report = real(current, compare, samples=samples, seed=seed)
        z = 9.0 if current == runs["low"] else -9.0
        return {**report, "pixel_inversion_suspected": z > 0, "inconclusive": False,
                "evidence": {**report["evidence"], "z": z}}

    monkeypatch.setattr(gan_report, "analyze_gan", low_is_dark)
    monkeypatch.setattr(gan_analysis, "TREND_SNAPSHOTS", 2)
    real_health = diagnose.image_health   # 2-round test GANs may draw blanks: health is not what this tests
    monkeypatch.setattr(diagnose, "image_health", lambda *args: {**real_health(*args), "healthy": True})
    given_low_first = diagnose.diagnose(runs["low"], runs["high"], samples=40)
    given_high_first = diagnose.diagnose(runs["high"], runs["low"], samples=40)
    assert asked == [(runs["low"], runs["high"])] * 2
    for report, suspect in ((given_low_first, "a"), (given_high_first, "b")):
        (check,) = report["checks"]
        assert (check["suspect"], check["suspected"], check["z"]) == (suspect, True, 9.0)
        assert report["families"][0] == "polarity" and report["answer"] == "yes"
        assert _schema_errors(json.loads(json.dumps(report))) == []
    assert "check pixel_inversion_suspected of A (the side where the primary model fails): YES" in "\n".join(
        format_report(given_low_first))
    assert "check pixel_inversion_suspected: YES" in "\n".join(format_report(given_high_first))
    # The demo's way: the named check's report made first, of the failing side against the other, for either order.
    named = real(runs["low"], runs["high"], samples=40, seed=0)
    monkeypatch.setattr(gan_report, "analyze_gan", _named_check_refused)
    assert diagnose.diagnose(runs["low"], runs["high"], samples=40, named_report=named)["checks"][0]["suspect"] == "a"
    with pytest.raises(ValueError, match="diagnose's named check analyses"):
        diagnose.diagnose(runs["high"], runs["low"], samples=40, named_report=real(runs["high"], runs["low"], 40, 0))


def test_an_lm_analysis_releases_the_samples_diagnose_would_draw(lm_pair):
    from fedgen_debug.analysis import lm_analysis
    from fedgen_debug.training.lm_run import load_lm

    run_dir = lm_pair["before"]
    lm_analysis.analyze_lm(run_dir, samples=120, seed=3)
    drawn = lm_analysis.sample_texts(*load_lm(run_dir), 120, 3)
    assert lm_analysis.released_texts(run_dir, 120, 3) == drawn == diagnose.lm_samples(run_dir, 120, 3)
    # Other samples, or another model than the one that drew them, are not reused.
    assert lm_analysis.released_texts(run_dir, 120, 4) is None and lm_analysis.released_texts(run_dir, 100, 3) is None
    released = store.read_json(store.released(run_dir, store.SAMPLES_JSON))
    store.write_json(store.released(run_dir, store.SAMPLES_JSON), {**released, "model_sha256": "0" * 64})
    assert lm_analysis.released_texts(run_dir, 120, 3) is None
    store.write_json(store.released(run_dir, store.SAMPLES_JSON), released)


@pytest.mark.parametrize("pair", ["replicate", "selection"])
def test_a_selection_pair_on_a_replicate_calibration_cannot_tell_what_a_replicate_pair_calls_yes(
        gan_pair, pair, monkeypatch):
    """The same samples and the same replicate calibration: a replicate pair is told "yes", a selection pair
    (two sets of users, e.g. T4's high and low accuracy with sharp generators, where only `gan-sharp-replicate`
    is shipped) "cannot tell", and the printed report and the app's headline say why."""
    from fedgen_debug.analysis import calibration as C
    from fedgen_debug.analysis import calibration_store

    monkeypatch.setattr(gan_analysis, "TREND_SNAPSHOTS", 2)
    noise = {p.name: C.PropertyNoise(0.0, 0.0, 0.0, 10) for p in image_properties.IMAGE_PROPERTIES}
    replicate = C.Calibration("rep", "gan", "test", "replicate", noise, 9, 1e-6, {"settings": {}})
    monkeypatch.setattr(calibration_store, "choose", lambda *args: (replicate, None))
    monkeypatch.setattr(diagnose, "pair_type", lambda kind, a, b: pair)
    real_health = diagnose.image_health   # 2-round test GANs may draw blanks: health is not what this tests
    monkeypatch.setattr(diagnose, "image_health", lambda *args: {**real_health(*args), "healthy": True})
    report = diagnose.diagnose(gan_pair["before"], gan_pair["after"], samples=40)
    assert report["calibration"]["calibrated"] and any(c["significant"] for c in report["differences"])
    text = "\n".join(format_report(report))
    headline = diagnosis_summary.headline(diagnosis_summary.summarize(report, "B/released/diagnosis.json"))
    if pair == "replicate":
        assert report["answer"] == "yes" and headline.startswith("what changed: ") and "cannot tell" not in headline
    else:
        assert report["answer"] == "cannot tell" and not report["differ"]
        assert "two selections of users" in report["answer_reason"]
        assert "differ: CANNOT TELL" in text and "(candidates: beyond replicate pairs' training noise only)" in text
        assert headline.startswith("what changed: cannot tell (two selections of users, calibrated on replicate")


def test_properties_a_calibration_does_not_hold_are_named_with_the_command_that_adds_them():
    from fedgen_debug.analysis import calibration as C
    held = C.Calibration("older", "gan", "demo", "replicate", {"p": C.PropertyNoise(0.0, 0.1, 0.2, 10)}, 9, 3.0,
                         {"settings": {}})
    ranked = [{"property": "p"}, {"property": "line_darkness"}]
    report = diagnose._calibration_report(held, "replicate", "a note", 3.0, ranked)
    assert report["note"].startswith("a note; not in calibration older, so never called: line_darkness")
    assert "--supplement older" in report["note"]
    assert diagnose._calibration_report(held, "replicate", None, 3.0, ranked[:1])["note"] is None
    # A transferred selection calibration leaves out what the primary model reads on purpose: no supplement advice.
    transferred = C.Calibration("t4 via older", "gan", "demo", "selection", held.properties, 9, 3.49,
                                {"transfer": {"left_out": ["predicted_class", "confidence"]}})
    rows = [{"property": "p"}, {"property": "predicted_class"}, {"property": "line_darkness"}]
    note = diagnose._calibration_report(transferred, "selection", "transferred", 3.49, rows)["note"]
    assert note.startswith("transferred; not in calibration t4 via older, so never called: line_darkness (")
