"""What a modeler reads (issue 54): each release's ε once, in the command's report; logs on stderr only
at -v, plus warnings no report says; third-party noise (TensorFlow retracing, matplotlib glyphs) out
of a default run, in this process and in the demo's worker processes alike."""

import logging
import re
import warnings

from conftest import run_cli

TRAIN_LM = ("train-lm", "--kind", "char", "--data", "synthetic-text:users=40", "--preset", "test", "--rounds", "3")


def test_train_lm_prints_each_release_epsilon_once_and_logs_only_at_verbose(tmp_path):
    out = tmp_path / "char"
    result = run_cli(*TRAIN_LM, "--out", str(out))
    assert result.returncode == 0, result.stderr
    both = result.stdout + result.stderr
    releases = re.findall(r"^ +(.+?): ε = .* at δ = ", result.stdout, re.MULTILINE)
    assert "char-LM" in releases and len(releases) >= 2, result.stdout   # the model and its aggregate(s)
    for label in releases:
        assert both.count(f"{label}: ε =") == 1, (label, both)
    assert "WARNING: ε > 10, weak privacy" in result.stdout   # the test preset's z: said in the report
    assert "WARNING fedgen_debug.privacy.run_ledger" not in both and "tf.function retracing" not in both
    assert not re.search(r"^(INFO|DEBUG) ", both, re.MULTILINE), both

    verbose = run_cli("-v", *TRAIN_LM, "--out", str(tmp_path / "char-v"))
    assert verbose.returncode == 0, verbose.stderr
    assert re.search(r"^INFO fedgen_debug\.privacy\.run_ledger: charged char-LM: ε = ", verbose.stderr, re.MULTILINE), \
        verbose.stderr
    assert not re.search(r"^(INFO|DEBUG|WARNING) ", verbose.stdout, re.MULTILINE), verbose.stdout


def _noise(_call: int) -> None:
    """What TensorFlow and matplotlib say during a run that a modeler cannot act on."""
    logging.getLogger("tensorflow").warning("5 out of the last 246 calls to <f> triggered tf.function retracing.")
    warnings.warn("Glyph 949 (\\N{GREEK SMALL LETTER EPSILON}) missing from current font.", UserWarning)
    logging.getLogger("fedgen_debug.test").warning("a genuine warning")
    logging.getLogger("fedgen_debug.test").info("a detail")


def test_third_party_noise_is_quiet_by_default_here_and_on_workers(capfd):
    from fedgen_debug import log_setup
    from fedgen_debug.runs.side_by_side import run_side_by_side

    root, saved = logging.getLogger(), (logging.getLogger().level, logging.getLogger("tensorflow").level)
    try:
        with warnings.catch_warnings():
            log_setup.configure(logging.WARNING)
            _noise(0)
            run_side_by_side([(_noise, 1), (_noise, 2)], processes=2)   # workers at the parent's level
        err = capfd.readouterr().err
        assert "tf.function retracing" not in err and "Glyph 949" not in err, err
        assert err.count("WARNING fedgen_debug.test: a genuine warning") >= 2, err   # here (pytest's) + workers
        assert "a detail" not in err
        with warnings.catch_warnings():
            log_setup.configure(logging.INFO)   # -v: TensorFlow's warnings and INFO logs come back
            run_side_by_side([(_noise, 1), (_noise, 2)], processes=2)
        err = capfd.readouterr().err
        assert err.count("tf.function retracing") == 2 and err.count("INFO fedgen_debug.test: a detail") == 2, err
    finally:
        root.setLevel(saved[0])
        logging.getLogger("tensorflow").setLevel(saved[1])


def test_every_report_marks_weak_privacy_in_the_same_words():
    """The README quotes one mark; analyze-lm, analyze-gan's header, a monitor's period line and each release
    print that mark, not one wording each."""
    from fedgen_debug.cli.lm_cmd import format_report
    from fedgen_debug.cli.monitor_cmd import format_period
    from fedgen_debug.cli.privacy_flags import weak_privacy_mark
    from fedgen_debug.privacy.accounting import weak_privacy

    mark = "WARNING: ε > 10, weak privacy"
    assert weak_privacy() == mark and weak_privacy_mark({"above_warning": True}) == "  " + mark
    current = {"kind": "word", "device_reported_oov_rate": 0.1, "device_reported_oov_rate_stddev": 0.01,
               "privacy": {"run": {"epsilon": 50.0, "above_warning": True}}, "oov_by_position": [],
               "phrases_with_unk": []}
    lines = format_report({"current": current, "tokenization_bug_suspected": False,
                           "evidence": {"test": "position 1", "z": 0.0}}, "RUN", top_k=20)
    assert lines[0].endswith(f"ε = 50 [{mark}]"), lines[0]
    period = format_period({"period": 3, "auxiliaries": {"char": {"epsilon": 12.0, "signals": {}}},
                            "rollout": {"bug": None}, "population_epsilon": 30.0})
    assert period.count(f"({mark})") == 2, period
