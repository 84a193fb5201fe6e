"""The `fedgen-debug` console script: data inspect/make, demo, and clear errors for bad input."""

import json
import os

from conftest import run_cli


def test_help_lists_commands():
    result = run_cli("--help")
    assert result.returncode == 0
    for command in ("data", "demo", "doctor"):
        assert command in result.stdout


def test_inspect_reports_counts_only(tmp_path):
    result = run_cli("data", "inspect", "synthetic-images:writers=3,seed=2", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    from fedgen_debug.data import synthetic_images as si

    sizes = [si.generate_writer(2, w, si.SyntheticImagesConfig(writers=3))[1].size for w in range(3)]
    assert summary["clients"] == 3 and summary["examples"] == sum(sizes)
    assert summary["examples_per_client"]["min"] == min(sizes)
    assert summary["examples_per_client"]["max"] == max(sizes)
    assert set(summary) == {"spec", "modality", "clients", "examples", "examples_per_client"}


def test_make_then_inspect_each_format(tmp_path):
    jsonl_path = tmp_path / "text.jsonl"
    made = run_cli("data", "make", "synthetic-text:users=4,seed=1", "--out", str(jsonl_path))
    assert made.returncode == 0, made.stderr
    assert "4 clients" in made.stdout
    text = json.loads(run_cli("data", "inspect", f"jsonl:{jsonl_path}", "--json").stdout)
    assert text["clients"] == 4

    cache = tmp_path / "cache"
    made = run_cli("data", "make", "synthetic-images:writers=2", "--format", "tff-sqlite", "--out", str(cache))
    assert made.returncode == 0, made.stderr
    assert os.path.exists(cache / "emnist_all.sqlite")
    images = json.loads(run_cli("data", "inspect", f"tff-emnist:{cache}", "--json").stdout)
    assert images["clients"] == 2 and images["modality"] == "images"


def _assert_clear_error(result, *fragments):
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    error_lines = [l for l in result.stderr.splitlines() if l.startswith("fedgen-debug: error:")]
    assert len(error_lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def test_bad_inputs_give_one_clear_error_and_write_nothing(tmp_path):
    _assert_clear_error(run_cli("data", "inspect", f"npz:{tmp_path}/missing.npz"), "missing.npz", "file not found")
    _assert_clear_error(run_cli("data", "inspect", f"tff-emnist:{tmp_path}", timeout=120),
                        "emnist_all.sqlite", "never downloads")
    _assert_clear_error(run_cli("data", "inspect", "femnist"), "Unknown data source 'femnist'")
    _assert_clear_error(run_cli("data", "make", "synthetic-text:users=2", "--out", str(tmp_path / "x.npz")),
                        "--format npz holds images")
    assert os.listdir(tmp_path) == []


def test_demo_runs_end_to_end_on_tiny_data(tmp_path):
    out = tmp_path / "demo"
    result = run_cli("demo", "--out", str(out), "--writers", "4", "--users", "40", "--stages", "data")
    assert result.returncode == 0, result.stderr
    assert "OOV rate" in result.stdout and "mean pixel intensity" in result.stdout
    summary = json.loads((out / "summary.json").read_text())
    oov = summary["text"]["oov_rate"]
    assert oov["with_bug"] > oov["without_bug"] == oov["after_fix"]
    intensity = summary["images"]["mean_pixel_intensity"]
    assert intensity["with_bug"] < intensity["without_bug"] == intensity["after_fix"]
    assert sorted(os.listdir(out / "data")) == ["synthetic_images.npz", "synthetic_text.jsonl"]
    # Modeler-facing output never names the affected devices or sentences.
    assert "writer_0" not in result.stdout and "user_0" not in result.stdout


def test_demo_lm_stage_trains_before_and_after_and_prints_the_verdict(tmp_path):
    """Test-size models: checks the wiring (runs, tables, verdict, summary), not the demo's numbers."""
    out = tmp_path / "demo"
    args = ("demo", "--out", str(out), "--users", "40", "--stages", "lm", "--preset", "test",
            "--concat-fraction", "0.5", "--vocab-size", "300")
    result = run_cli(*args, timeout=600)
    assert result.returncode == 0, result.stderr
    lm = json.loads((out / "summary.json").read_text())["lm"]
    assert set(lm) == {"char", "word"}
    for kind in ("char", "word"):
        for name in ("before", "after"):
            assert json.loads((out / "lm" / f"{kind}-lm-{name}" / "status.json").read_text())["state"] == "finished"
    assert lm["char"]["top20_with_space"]["before"] == 0
    assert lm["char"]["tokenization_bug_suspected"] is True
    assert "after (bug) top 20" in result.stdout and "before top 20" in result.stdout
    assert result.stdout.count("tokenization bug suspected:") == 2
    # Re-running resumes finished runs instead of training again.
    metrics = (out / "lm" / "char-lm-after" / "metrics.csv").read_text()
    again = run_cli(*args, timeout=600)
    assert again.returncode == 0, again.stderr
    assert (out / "lm" / "char-lm-after" / "metrics.csv").read_text() == metrics
    assert "tokenization bug suspected:" in again.stdout


def test_demo_rejects_unknown_stages(tmp_path):
    result = run_cli("demo", "--out", str(tmp_path), "--stages", "data,gans")
    assert result.returncode == 2 and "--stages must be" in result.stderr


def test_demo_gan_stage_trains_both_phases_and_prints_the_verdicts(tmp_path):
    """Test-size models: checks the wiring (primary CNN shared, four GAN runs, grids, summary)."""
    out = tmp_path / "demo"
    result = run_cli("demo", "--out", str(out), "--writers", "12", "--stages", "gan", "--preset", "test", timeout=900)
    assert result.returncode == 0, result.stderr
    gan = json.loads((out / "summary.json").read_text())["gan"]
    assert set(gan) == {"with_bug", "after_fix"}
    for phase in gan.values():
        assert isinstance(phase["pixel_inversion_suspected"], bool) and "z" in phase["evidence"]
        for run_dir in phase["run_dirs"].values():
            assert os.path.getsize(os.path.join(run_dir, "samples.png")) > 500
            population = json.loads(open(os.path.join(run_dir, "population.json")).read())
            assert population["primary"] == str((out / "gan" / "primary_cnn.npz").resolve())
    assert result.stdout.count("pixel inversion suspected:") == 2
