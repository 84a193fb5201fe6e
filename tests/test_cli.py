"""The `fedgen-debug` console script: data inspect/make, demo, and clear errors for bad input."""

import json
import os

import numpy as np

from conftest import DEMO_TEST_ARGS, run_cli, run_main
from fedgen_debug.runs import store
from release_boundary import check_released


def test_help_lists_commands():
    result = run_cli("--help")
    assert result.returncode == 0
    for command in ("data", "demo", "doctor"):
        assert command in result.stdout


def test_inspect_reports_dp_counts_charged_to_the_ledger(tmp_path, fresh_ledger):
    # The console script once; the further calls in this process (`run_main`: the same main(), no TF start-up).
    result = run_cli("data", "inspect", "synthetic-images:writers=12,seed=2", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    from fedgen_debug.data import synthetic_images as si

    sizes = [si.generate_writer(2, w, si.SyntheticImagesConfig(writers=12))[1].size for w in range(12)]
    assert summary["clients"] == 12 and summary["dp"] is True  # N is public; the rest is DP
    assert abs(summary["examples"] - sum(sizes)) < 4 * summary["examples_stddev"] and summary["examples"] != sum(sizes)
    assert "min" not in json.dumps(summary) and max(sizes) not in [h["clients"] for h in summary["client_size_histogram"]]
    assert sorted(r.label for r in fresh_ledger.records()) == ["DP aggregate data inspect: client sizes",
                                                                "DP aggregate data inspect: examples"]
    text = run_main("data", "inspect", "synthetic-images:writers=12,seed=2").stdout
    assert "(DP; each client counted up to 1024)" in text and "charged to the ledger" in text
    # Public data (the modeler says so): exact, nothing charged; not for users the ledger knows as private.
    refused = run_main("data", "inspect", "synthetic-images:writers=3,seed=2", "--public", "--json")
    assert refused.returncode == 2 and "the ledger holds DP releases on users of this data" in refused.stderr
    public = json.loads(run_main("data", "inspect", "synthetic-images:writers=3,seed=5", "--public", "--json").stdout)
    other = [si.generate_writer(5, w, si.SyntheticImagesConfig(writers=3))[1].size for w in range(3)]
    assert public["examples"] == sum(other) and public["examples_per_client"]["max"] == max(other)
    assert len(fresh_ledger.records()) == 4


def test_make_then_inspect_each_format(tmp_path):
    jsonl_path = tmp_path / "text.jsonl"
    made = run_cli("data", "make", "synthetic-text:users=4,seed=1", "--out", str(jsonl_path))
    assert made.returncode == 0, made.stderr
    assert "4 clients" in made.stdout
    text = json.loads(run_main("data", "inspect", f"jsonl:{jsonl_path}", "--json").stdout)   # in this process
    assert text["clients"] == 4

    cache = tmp_path / "cache"
    made = run_main("data", "make", "synthetic-images:writers=2", "--format", "tff-sqlite", "--out", str(cache))
    assert made.returncode == 0, made.stderr
    assert os.path.exists(cache / "emnist_all.sqlite")
    images = json.loads(run_main("data", "inspect", f"tff-emnist:{cache}", "--json").stdout)
    assert images["clients"] == 2 and images["modality"] == "images"


def _assert_clear_error(result, *fragments):
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    error_lines = [l for l in result.stderr.splitlines() if l.startswith("fedgen-debug: error:")]
    assert len(error_lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def test_bad_inputs_give_one_clear_error_and_write_nothing(tmp_path):
    # The console script (with a timeout: it must not start a download); the rest through the same main()
    # in this process (`run_main`), each without a TensorFlow start-up of its own.
    _assert_clear_error(run_cli("data", "inspect", f"tff-emnist:{tmp_path}", timeout=120),
                        "emnist_all.sqlite", "never downloads")
    _assert_clear_error(run_main("data", "inspect", f"npz:{tmp_path}/missing.npz"), "missing.npz", "file not found")
    _assert_clear_error(run_main("data", "inspect", "femnist"), "Unknown data source 'femnist'")
    _assert_clear_error(run_main("data", "inspect", "before.jsonl"), "(a file? say jsonl:before.jsonl)")
    _assert_clear_error(run_main("data", "make", "synthetic-text:users=2", "--out", str(tmp_path / "x.txt")),
                        ".txt is no format the tool writes")   # it wrote a TFF cache directory named x.txt
    assert not (tmp_path / "x.txt").exists()
    _assert_clear_error(run_main("data", "inspect", "json:my images.npz"), "(a file? say npz:my images.npz)")
    _assert_clear_error(run_main("data", "make", "synthetic-text:users=2", "--out", str(tmp_path / "x.npz")),
                        "--format npz holds images")
    assert os.listdir(tmp_path) == []


def test_demo_data_stage_releases_dp_aggregates_under_a_budget_it_states(tmp_path, fresh_ledger):
    out = tmp_path / "demo"
    # The demo test store's populations (`DEMO_TEST_ARGS`): their users are generated once a session (disk cache).
    args = ("demo", "--out", str(out), "--writers", "12", "--users", "40", "--stages", "data")
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr
    assert "OOV rate (DP" in result.stdout and "mean pixel intensity (DP" in result.stdout
    # The simulated populations had no budget: the demo sets what its releases need, and says so.
    assert result.stdout.count("it had no budget, so the demo sets ε =") == 2
    keys = {fresh_ledger.population_key(s) for s in ("synthetic-text:users=40,seed=0", "synthetic-images:writers=12,seed=0")}
    assert {fresh_ledger.budget(p, 100).source for p in keys} == keys
    summary = json.loads((out / "summary.json").read_text())
    exact = _exact_data_stage_means(summary)
    for kind, key in (("text", "oov_rate"), ("images", "mean_pixel_intensity")):
        for variant, value in summary[kind][key].items():
            assert abs(value["mean"] - exact[kind][variant]) < 4 * value["stddev"], (kind, variant)
            assert value["mean"] != exact[kind][variant]   # noised, not the exact mean
    assert exact["images"]["with_bug"] < exact["images"]["without_bug"] - 0.1  # the bug, in the ground truth
    assert sorted(os.listdir(out / "data")) == ["synthetic_images.npz", "synthetic_text.jsonl"]
    # Modeler-facing output never names the affected devices or sentences.
    assert "writer_0" not in result.stdout and "user_0" not in result.stdout
    for kind in ("text", "images"):
        check_released(str(out / "device-aggregates" / kind), exact_counts=[summary[kind]["clients"] + 1])
    # A re-run charges nothing twice.
    records = len(fresh_ledger.records())
    again = run_main(*args)   # in this process: the same main()
    assert again.returncode == 0, again.stderr
    assert len(fresh_ledger.records()) == records and "(set before)" in again.stdout


def _exact_data_stage_means(summary) -> dict:
    """Ground truth of the simulation (what the DP means estimate)."""
    from fedgen_debug.device.pixels import PixelInversionBug
    from fedgen_debug.device.tokenization import TokenizationBug
    from fedgen_debug.data import client_data as cd
    from fedgen_debug.data import spec as data_spec
    from fedgen_debug.device import lm_data

    text = data_spec.load_client_data(summary["text"]["data"])
    images = data_spec.load_client_data(summary["images"]["data"])
    vocab = lm_data.public_vocabulary(lm_data.default_vocabulary_source(summary["text"]["data"]), 10000)
    concat, invert = TokenizationBug(0.1, seed=0), PixelInversionBug(0.5, seed=0)

    def oov(bug):
        return float(np.mean([lm_data.device_oov_rate(lm_data.device_tokens(text, c, bug), vocab)
                              for c in text.client_ids]))

    def intensity(data):
        return float(np.mean([np.mean(cd.client_numpy(data, c)["pixels"]) for c in data.client_ids]))

    return {"text": {"without_bug": oov(None), "with_bug": oov(concat), "after_fix": oov(concat.as_fixed())},
            "images": {"without_bug": intensity(images), "with_bug": intensity(invert.apply(images)),
                       "after_fix": intensity(invert.as_fixed().apply(images))}}


def _demo_ground_truth(out, kind: str) -> dict:
    """What the test-size demo's runs must not release: the users' ids, sentences or images (every one),
    exact sizes, and digests of the data files the demo wrote (`DEMO_TEST_ARGS`: 40 users, 12 writers)."""
    from fedgen_debug.data import client_data as cd
    from fedgen_debug.data import spec as data_spec

    files = [str(out / "data" / "synthetic_text.jsonl"), str(out / "data" / "synthetic_images.npz")]
    spec = "synthetic-text:users=40,seed=0" if kind == "text" else "synthetic-images:writers=12,seed=0"
    data = data_spec.load_client_data(spec)
    sizes = cd.client_sizes(data)
    public = {float(a) for a in DEMO_TEST_ARGS if a.replace(".", "").isdigit()}   # N = 40 users is public
    truth = {"client_ids": data.client_ids, "data_files": files,
             # the whole data's size: a user's own (tens to a hundred) is as common a number in the samples'
             # statistics (a word drawn 117 times) as it is in any user's data
             "exact_counts": [n for n in (sum(sizes.values()),) if n not in public]}
    if kind == "text":
        sentences = [t.decode() for c in data.client_ids for t in cd.client_numpy(data, c)["text"]]
        return {**truth, "sentences": [t for t in sentences if len(t) > 25]}
    return {**truth, "images": np.concatenate([cd.client_numpy(data, c)["pixels"] for c in data.client_ids])}


def test_demo_lm_stage_trains_before_and_after_and_prints_the_verdict(demo_test_store):
    """Test-size models: checks the wiring (runs, tables, verdict, summary), not the demo's numbers."""
    out, result = demo_test_store
    args = ("demo", "--out", str(out), *DEMO_TEST_ARGS, "--stages", "lm")
    lm = json.loads((out / "summary.json").read_text())["lm"]
    assert set(lm) == {"char", "word"}
    for kind in ("char", "word"):
        for name in ("before", "after"):
            run_dir = str(out / "lm" / f"{kind}-lm-{name}")
            assert json.loads(open(store.released(run_dir, store.STATUS)).read())["state"] == "finished"
            check_released(run_dir, **_demo_ground_truth(out, "text"))
        assert lm[kind]["epsilon"]["after"] > 10  # stated, and marked
    assert lm["char"]["top20_with_space"]["before"] == 0
    assert lm["char"]["tokenization_bug_suspected"] is True
    assert "after (bug) top 20" in result.stdout and "before top 20" in result.stdout
    assert result.stdout.count("tokenization bug suspected:") == 2
    assert result.stdout.count("char-LM: ε = ") == 2 and "WARNING: ε > 10, weak privacy" in result.stdout
    # Each training release also says what its noise on the mean update is worth at a deployment (issue 56):
    # the smallest deployments where it is ε ≤ 1 and ε ≤ 10.
    for kind in ("char", "word"):
        for name in ("before", "after"):
            privacy = store.read_json(store.released(str(out / "lm" / f"{kind}-lm-{name}"), store.PRIVACY))
            (training,) = [r for k, r in privacy["releases"].items() if k.endswith("/training")]
            assert set(training["deployment_equivalent"]["smallest_deployment"]) == {"1", "10"}
    # for each of the demo's 8 auxiliaries: 4 LMs here, and the 4 GANs (with the bug / after the fix, high / low)
    assert result.stdout.count("deployment-equivalent (noise on the mean update σ/S = ") == 8
    # and what all of its releases (DP counts, the T4 quantile, the training) need together
    assert result.stdout.count(" releases of this run at a deployment (") == 8
    assert result.stdout.count("ε ≤ 1 from N = ") == 16 and result.stdout.count("ε ≤ 10 from N = ") == 16
    # Each pair's diagnosis after its verdict, on the verdict's own samples and report (issue 55).
    for kind in ("char", "word"):
        _assert_diagnosed(result.stdout, lm[kind], f"B = {kind}-LM after, A = before",
                          f"tokenization bug, {kind}-LM after vs before: differ", str(out / "lm" / f"{kind}-lm-after"))
        assert store.read_json(lm[kind]["diagnosis"]["report"])["samples"] == 5000   # the verdict's samples
    # Re-running resumes finished runs instead of training again.
    weights = open(store.released(str(out / "lm" / "char-lm-after"), store.MODEL_WEIGHTS), "rb").read()
    again = run_cli(*args, timeout=600)
    assert again.returncode == 0, again.stderr
    assert open(store.released(str(out / "lm" / "char-lm-after"), store.MODEL_WEIGHTS), "rb").read() == weights
    assert "tokenization bug suspected:" in again.stdout


def _assert_diagnosed(stdout: str, story: dict, pair: str, closing: str, run_b: str) -> None:
    """The story's diagnosis: 2-3 printed lines after its verdict, a line in the closing summary, a compact
    summary in summary.json, the whole report in B's released/, with the named check as the story's verdict."""
    printed = stdout.split(f"diagnosis, {pair}: differ ", 1)
    assert len(printed) == 2, f"no diagnosis of {pair}"
    assert "calibrated against" in printed[1].splitlines()[0]
    assert printed[1].splitlines()[1].startswith("           families: ") or "no property to compare" in printed[1]
    assert closing in stdout.split("summary of the demo", 1)[1]
    diagnosis = story["diagnosis"]
    assert {"differ", "calibrated", "against", "families", "first", "unhealthy", "report"} <= set(diagnosis)
    assert diagnosis["report"] == store.released(run_b, store.DIAGNOSIS)
    report = store.read_json(diagnosis["report"])
    assert report["differ"] == diagnosis["differ"] and report["families"] == diagnosis["families"]
    (check,) = report["checks"]
    assert check["z"] == story["evidence"]["z"]


def test_demo_rejects_unknown_stages(tmp_path):
    result = run_cli("demo", "--out", str(tmp_path), "--stages", "data,gans")
    assert result.returncode == 2 and "--stages must be" in result.stderr
    result = run_cli("demo", "--out", str(tmp_path), "--parallel-runs", "0")
    assert result.returncode == 2 and "--parallel-runs must be >= 1. Found 0." in result.stderr


def test_demo_gan_stage_trains_both_phases_and_prints_the_verdicts(demo_test_store):
    """Test-size models: checks the wiring (primary CNN shared, four GAN runs, grids, summary)."""
    out, result = demo_test_store
    gan = json.loads((out / "summary.json").read_text())["gan"]
    assert set(gan) == {"with_bug", "after_fix"}
    shared = open(out / "gan" / store.PRIMARY, "rb").read()
    for phase in gan.values():
        assert isinstance(phase["pixel_inversion_suspected"], bool) and "z" in phase["evidence"]
        assert min(phase["epsilon"].values()) > 10
        for run_dir in phase["run_dirs"].values():
            assert os.path.getsize(store.released(run_dir, store.SAMPLES_PNG)) > 500
            assert open(store.released(run_dir, store.PRIMARY), "rb").read() == shared  # its own copy
            check_released(run_dir, **_demo_ground_truth(out, "images"))
    assert result.stdout.count("pixel inversion suspected:") == 2
    assert result.stdout.count("-accuracy GAN:") == 4 and "privacy spent on the demo's populations" in result.stdout
    for phase, story in gan.items():
        _assert_diagnosed(result.stdout, story, "B = low, A = high accuracy",
                          f"pixel inversion, {phase.replace('_', ' ')}, low vs high accuracy: differ",
                          story["run_dirs"]["low"])
    assert result.stdout.count("diagnosis, B = low, A = high accuracy: differ ") == 2
