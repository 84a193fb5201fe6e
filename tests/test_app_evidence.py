"""The app's verdict sentences (`fedgen_debug.app.evidence`) from hand-built analyses."""

from fedgen_debug.app.evidence import explain


def _gan_analysis(z, path=None, suspected=None):
    share = {"share": 0.0, "dark": 0, "samples": 1000}
    return {"pixel_inversion_suspected": (z > 3.0) if suspected is None else suspected, "inconclusive": False,
            "current": {"run_dir": "runs/x/low"}, "compare": {"run_dir": "runs/x/high"},
            "evidence": {"z": z, "z_threshold": 3.0, "current": share, "reference": share, "training_path": path}}


def test_a_verdict_decided_along_training_says_which_rounds_and_that_the_final_samples_look_clean():
    path = {"suspected": True, "dark_rounds": [160, 190, 200], "max_z": 11.31, "z_threshold": 3.58, "rounds_tested": 8}
    sentence = explain(_gan_analysis(0.0, path, suspected=True))["sentence"]
    assert ("Pixel inversion suspected along training: the snapshots after rounds 160, 190, 200 look white-on-black "
            "far more often (largest z = 11.31 > 3.58, the threshold for 8 snapshots)") in sentence
    assert "the final samples show the other mode" in sentence and "z = 0.00 ≤ 3" in sentence


def test_final_verdicts_and_old_analyses_keep_their_sentences():
    assert "Pixel inversion suspected: this population" in explain(_gan_analysis(44.7))["sentence"]
    clean = {"suspected": False, "dark_rounds": [], "max_z": 0.0, "z_threshold": 3.58, "rounds_tested": 8}
    assert "No sign of pixel inversion" in explain(_gan_analysis(0.0, clean))["sentence"]
    old = _gan_analysis(0.0)
    del old["evidence"]["training_path"]
    assert "No sign of pixel inversion" in explain(old)["sentence"]


def test_an_inconclusive_verdict_on_an_empty_selection_says_nobody_may_be_below_the_cut():
    analysis = {**_gan_analysis(44.7), "inconclusive": True}
    analysis["evidence"]["mostly_noise"] = ["current"]
    analysis["current"]["population"] = {"users": 0.0, "users_stddev": 2.83}
    sentence = explain(analysis)["sentence"]
    assert sentence.endswith("Inconclusive: `low` draws mostly noise; a GAN that did not learn its data says nothing "
                             "about backgrounds. Its selection cannot be told from an empty one (DP count ≈0 ± 3 "
                             "users): likely nobody is below the cut; a broader one selects more.")
    analysis["current"]["population"] = {"users": 16.0, "users_stddev": 2.83}   # 9 inverted writers and 1 clean
    assert "empty" not in explain(analysis)["sentence"]
    analysis["evidence"]["mostly_noise"] = []
    analysis["evidence"]["mostly_no_background"] = ["current"]   # a dark texture (a diverged GAN)
    assert "Inconclusive: `low` draws mostly textures without a background;" in explain(analysis)["sentence"]
