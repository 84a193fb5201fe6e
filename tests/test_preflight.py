"""`cli.preflight`: mistyped arguments are refused before TensorFlow is imported, with the full checks' words."""

import json
import os
import subprocess
import sys

import pytest

from fedgen_debug.cli import preflight

# Each command runs through the console script's own main() in one fresh interpreter; the script reports each
# exit code and message, and whether TensorFlow or TFF was imported by the end.
_REFUSALS = r"""
import contextlib, io, json, sys
from fedgen_debug.cli.main import main
results = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(argv)
    results.append([code, err.getvalue()])
print(json.dumps({"results": results, "imported": sorted(m for m in ("tensorflow", "tensorflow_federated")
                                                          if m in sys.modules)}))
"""


def test_mistakes_are_refused_in_a_fresh_process_without_importing_tensorflow(tmp_path):
    missing, out = str(tmp_path / "no-such"), str(tmp_path / "out")
    cases = [
        (["train-gan", "--data", f"npz:{missing}.npz", "--select", "random", "--out", out], "file not found"),
        (["train-gan", "--data", "synthetic-text:users=3", "--select", "random", "--out", out],
         "train-gan needs image data"),
        (["train-gan", "--data", "synthetic-images:writers=3", "--select", "by-user-accuracy:lo", "--out", out],
         "by-user-accuracy"),
        (["train-gan", "--data", "synthetic-images:writer=3", "--select", "random", "--out", out],
         "unexpected 'writer=3'"),
        (["train-lm", "--kind", "char", "--data", "synthetic-images:writers=3", "--out", out],
         "train-lm needs text data"),
        (["train-lm", "--kind", "word", "--data", f"jsonl:{missing}.jsonl", "--out", out], "file not found"),
        (["train-gan", "--data", "synthetic-images:writers=3", "--select", "random", "--bug", "rotat:0.5",
          "--out", out], "--bug: bug must be one of"),
        (["train-gan", "--data", "synthetic-images:writers=3", "--select", "random", "--bug", "blur:1.5",
          "--out", out], "--bug: fraction must be in [0, 1]"),
        (["train-lm", "--kind", "char", "--data", "synthetic-text:users=3", "--bug", "rotate:0.5", "--out", out],
         "--bug: rotate is a bug of image data"),
        (["diagnose", missing, missing + "-b"], f"{missing}: not a run directory"),
        (["calibrate", "--out", str(tmp_path / "c.json"), missing, missing, missing], "not a run directory"),
        (["calibrate", "--pairs", "--out", str(tmp_path / "c.json"), f"{missing}:{missing}-b"], "not a run directory"),
        (["analyze-gan", missing], "not a run directory"),
        (["analyze-lm", missing], "not a run directory"),
        (["check-memorization", missing], "not a run directory"),
    ]
    done = subprocess.run([sys.executable, "-c", _REFUSALS, json.dumps([argv for argv, _ in cases])],
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    for (argv, expected), (code, stderr) in zip(cases, report["results"]):
        assert code == 2 and stderr.startswith("fedgen-debug: error: ") and expected in stderr, (argv, stderr)
    assert report["imported"] == []
    assert not os.path.exists(out)   # refused before a run directory was made


@pytest.mark.parametrize("run_class, kwargs, data, modality", [
    ("GANRun", {"select": "random"}, "synthetic-text:users=3", "images"),
    ("LMRun", {"kind": "char"}, "synthetic-images:writers=3", "text"),
])
def test_the_full_checks_refuse_the_other_modality_with_the_preflights_words(run_class, kwargs, data, modality):
    """LMRun used to take image data and be refused only by the ledger (an ε for 3 'users' over the budget)."""
    from fedgen_debug.training import gan_run, lm_run

    cls = getattr(gan_run if run_class == "GANRun" else lm_run, run_class)
    with pytest.raises(ValueError) as full:
        cls(data=data, **kwargs)
    command = "train-gan" if run_class == "GANRun" else "train-lm"
    with pytest.raises(ValueError) as early:
        preflight.check_data(data, modality, command)
    assert str(full.value) == str(early.value) == f"{command} needs {'image' if modality == 'images' else 'text'} " \
                                                  f"data. Found {data!r}."


def test_a_run_directory_passes_and_a_directory_without_a_released_config_does_not(tmp_path):
    from fedgen_debug.runs import store

    run_dir = str(tmp_path / "run")
    os.makedirs(os.path.dirname(store.released(run_dir, store.CONFIG)))
    with pytest.raises(ValueError, match="not a run directory"):
        preflight.check_runs(run_dir)
    with open(store.released(run_dir, store.CONFIG), "w") as f:
        json.dump({}, f)
    preflight.check_runs(run_dir, None)   # None: an optional run not given (--compare, --baseline)
