"""The release boundary after each scenario: the released part of every run store holds no undeclared
file, secret, client id, raw example or exact count of private data (`release_boundary.check_released`).
The demo's stores are walked by test_cli.py's demo test."""

import json
import os

import numpy as np
import pytest

from conftest import provision_secret
from fedgen_debug.data import client_data as cd
from fedgen_debug.data import spec as data_spec
from fedgen_debug.runs import store
from fedgen_debug.training.gan_run import GANRun
from fedgen_debug.experiments.gan import train_gan
from fedgen_debug.analysis.gan_report import analyze_gan
from fedgen_debug.training.lm_run import LMRun
from fedgen_debug.experiments.lm import train_lm
from fedgen_debug.analysis.lm_analysis import analyze_lm
from release_boundary import check_released

TEXT = "synthetic-text:users=40,seed=4"
IMAGES = "synthetic-images:writers=12,seed=3"


@pytest.fixture(scope="module")
def text_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    runs = {"char": str(root / "char"), "word-dp-vocab": str(root / "word")}
    for name, run_dir in runs.items():  # a fresh secret's DP vocabulary is empty ~0.07% of the time
        provision_secret(run_dir, f"test_release_boundary/{name}")
    train_lm(LMRun("char", TEXT, 0.3, "test", rounds=2, vocab_size=500), runs["char"])
    train_lm(LMRun("word", TEXT, 0.3, "test", rounds=2, vocab_size=300, vocab="dp"), runs["word-dp-vocab"])
    analyze_lm(runs["char"], samples=200)
    analyze_lm(runs["word-dp-vocab"], samples=200)
    return runs


@pytest.fixture(scope="module")
def image_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("gan")
    runs = {"strict": str(root / "strict"), "paper": str(root / "paper")}
    train_gan(GANRun(IMAGES, "by-user-accuracy:low", 0.5, "test", rounds=2, primary_classes=10), runs["strict"])
    primary = store.released(runs["strict"], store.PRIMARY)
    provision_secret(runs["paper"], "test_release_boundary/paper")   # a DP count of qualified users above qN
    train_gan(GANRun(IMAGES, "by-example:correct,min_count=1", 0.5, "test", rounds=2, primary=primary,
                     selection="paper"), runs["paper"])
    analyze_gan(runs["strict"], runs["paper"], samples=40)
    return runs


def _text_ground_truth():
    data = data_spec.load_client_data(TEXT)
    sentences = [s.decode() for cid in data.client_ids for s in cd.client_numpy(data, cid)["text"]]
    sizes = cd.client_sizes(data)
    return data.client_ids, [s for s in sentences if len(s) > 25], [sum(sizes.values()), max(sizes.values())]


def _exact_oov_rate(run_dir: str) -> float:
    """The mean over the run's devices of their exact OOV rates: what its DP mean was noised from."""
    from fedgen_debug.device import lm_data
    from fedgen_debug.experiments.lm import prepare_devices

    run = LMRun(**store.read_json(store.released(run_dir, store.CONFIG))["lm"])
    vocab = lm_data.load_vocabulary(run_dir)
    data = data_spec.load_client_data(TEXT)
    fault = run.device_fault()
    devices = prepare_devices(run, fault.apply(data) if fault else data, vocab, None)
    return float(np.mean([lm_data.device_oov_rate(devices.tokens[c], vocab) for c in data.client_ids]))


@pytest.mark.parametrize("name", ["char", "word-dp-vocab"])
def test_lm_run_stores_release_nothing_private(text_runs, name):
    client_ids, sentences, counts = _text_ground_truth()
    exact = _exact_oov_rate(text_runs[name])
    # The mean OOV rate is released as a DP mean, never as the exact aggregate.
    check_released(text_runs[name], client_ids, sentences, exact_counts=counts,
                   noised={store.DEVICE_METRICS: {"oov_rate.mean": exact}})
    oov = store.read_json(store.released(text_runs[name], store.DEVICE_METRICS))["oov_rate"]
    assert oov["dp"] is True and abs(oov["mean"] - exact) < 5 * oov["stddev"]


@pytest.mark.parametrize("name", ["strict", "paper"])
def test_gan_run_stores_release_nothing_private(image_runs, name):
    data = data_spec.load_client_data(IMAGES)
    images = np.concatenate([cd.client_numpy(data, c)["pixels"] for c in data.client_ids])
    check_released(image_runs[name], data.client_ids, images=images,
                   exact_counts=[len(images)] + [v for v in cd.client_sizes(data).values() if v >= 10])
    population = store.read_json(store.released(image_runs[name], store.POPULATION))
    # Noised and continuous; clamped to [0, N] afterwards (post-processing), so a bound may show exactly.
    assert population["dp"] is True and population["users_stddev"] > 0
    assert population["users"] != round(population["users"]) or population["users"] in (0.0, 12.0)
    assert population["users_total"] == 12  # N is public under replace-one


def test_paper_selection_keeps_who_qualified_on_the_server_side_and_says_so(image_runs):
    paper, strict = image_runs["paper"], image_runs["strict"]
    selected = store.read_json(store.server(paper, store.SELECTION))["client_ids"]
    assert 0 < len(selected) <= 12
    privacy = json.load(open(store.released(paper, store.PRIVACY)))
    (training,) = [r for k, r in privacy["releases"].items() if k.endswith("/training")]
    # The paper's subpopulation accounting, over a DP lower bound of how many qualified: the record
    # carries N, never the exact count (tests/test_attacks_paper_mode.py).
    assert training["population_size"] == 12
    assert json.load(open(store.released(paper, store.CONFIG)))["gan"]["selection"] == "paper"
    # Strict selection accounts over every user and keeps no selection anywhere.
    (strict_training,) = [r for k, r in json.load(open(store.released(strict, store.PRIVACY)))["releases"].items()
                          if k.endswith("/training")]
    assert strict_training["population_size"] == 12 and not os.path.exists(store.server(strict, store.SELECTION))


def test_run_files_live_only_in_released_and_server(text_runs, image_runs):
    for run_dir in list(text_runs.values()) + list(image_runs.values()):
        assert sorted(os.listdir(run_dir)) == ["released", "server"]
        server = os.listdir(os.path.join(run_dir, "server"))
        assert set(server) <= set(store.SERVER_FILES) and store.SECRET in server


TEXT_PLANTS = ["client id", "sentence", "exact count", "secret", "undeclared file", "client id in a CSV",
               "exact count in a CSV", "client id in the samples", "exact count in the samples", "exact aggregate"]


@pytest.mark.parametrize("plant", TEXT_PLANTS)
def test_the_walker_catches_each_kind_of_leak(text_runs, tmp_path, plant):
    import shutil

    from fedgen_debug.runs import secret as secret_lib

    run = str(tmp_path / "leaky")
    shutil.copytree(text_runs["char"], run)
    client_ids, sentences, counts = _text_ground_truth()
    exact = {store.DEVICE_METRICS: {"oov_rate.mean": _exact_oov_rate(run)}}
    check_released(run, client_ids, sentences, exact_counts=counts, noised=exact)   # clean before the plant
    analysis = store.released(run, store.ANALYSIS)
    report = store.read_json(analysis)
    metrics, samples = store.released(run, store.METRICS), store.released(run, store.SAMPLES_JSON)
    if plant == "undeclared file":
        open(os.path.join(run, "released", "client_metrics.csv"), "w").write("round,num_examples\n1,17\n")
    elif plant == "secret":
        report["debug"] = str(secret_lib.load(run).tf_seed("dp-noise")[0])
    elif plant in ("client id in a CSV", "exact count in a CSV"):
        open(metrics, "a").write(f"99,{client_ids[3] if 'id' in plant else counts[1]}\n")
    elif plant in ("client id in the samples", "exact count in the samples"):
        texts = store.read_json(samples)
        texts["texts"].append(f"from {client_ids[5]} ok" if "id" in plant else f"{counts[0]} words")
        store.write_json(samples, texts)
    elif plant == "exact aggregate":
        device_metrics = store.read_json(store.released(run, store.DEVICE_METRICS))
        device_metrics["oov_rate"]["mean"] = exact[store.DEVICE_METRICS]["oov_rate.mean"]
        store.write_json(store.released(run, store.DEVICE_METRICS), device_metrics)
    else:
        report["debug"] = {"client id": client_ids[3], "sentence": sentences[0], "exact count": counts[0]}[plant]
    store.write_json(analysis, report)
    with pytest.raises(AssertionError):
        check_released(run, client_ids, sentences, exact_counts=counts, noised=exact)


def test_ids_count_as_named_only_as_whole_tokens():
    from release_boundary import names_client, text_numbers

    assert names_client("round,user_0003,4", "user_0003") and names_client("from user_0003.", "user_0003")
    assert not names_client("user_00031", "user_0003") and not names_client("a-user_0003", "user_0003")
    assert text_numbers("17 words, 0.25 share, r17x, 3e2, -4, /tmp/pytest-263/x") == {17.0, 0.25, 300.0, -4.0}


@pytest.mark.parametrize("plant", ["exact copy", "near copy", "copy in a snapshot"])
def test_the_walker_finds_a_clients_image_in_any_released_image_array(image_runs, tmp_path, plant):
    import shutil

    data = data_spec.load_client_data(IMAGES)
    images = np.concatenate([cd.client_numpy(data, c)["pixels"] for c in data.client_ids])
    run = str(tmp_path / "leaky")
    shutil.copytree(image_runs["strict"], run)
    check_released(run, images=images)
    victim = images[-1]   # the last client's last image: a walker that looks at the first 200 misses it
    if plant != "exact copy":
        victim = np.clip(victim + np.random.default_rng(0).normal(0.0, 0.01, victim.shape), 0.0, 1.0)
    (samples,) = store.load_arrays(store.released(run, store.SAMPLES_NPZ))
    samples[7] = 2.0 * victim.reshape(samples.shape[1:]) - 1.0
    target = store.released(run, store.SAMPLES_NPZ)
    if plant == "copy in a snapshot":
        target = os.path.join(run, store.RELEASED, store.SAMPLE_SNAPSHOTS, "round_000001.npz")
        os.makedirs(os.path.dirname(target), exist_ok=True)
    np.savez(target, samples)
    with pytest.raises(AssertionError, match="within RMS"):
        check_released(run, images=images)


@pytest.fixture(scope="module")
def file_runs(tmp_path_factory):
    """The scenarios on the data formats modelers bring (a JSONL and an .npz file): a word-LM with the
    DP cross-client ratios, a GAN, and a 3-period monitor, all charged to one ledger."""
    from conftest import GAN_MONITOR_PLAN, monitor
    from fedgen_debug.data import jsonl, npz
    from fedgen_debug.memorization.cross_client_lm import CrossClientConfig, cross_client_memorization
    from fedgen_debug.training.lm_run import load_lm

    root = tmp_path_factory.mktemp("files")
    text, images = str(root / "users.jsonl"), str(root / "writers.npz")
    jsonl.write_jsonl(data_spec.load_client_data(TEXT), text)
    npz.write_npz(data_spec.load_client_data(IMAGES), images)
    runs = {"word": str(root / "word"), "gan": str(root / "gan")}
    train_lm(LMRun("word", f"jsonl:{text}", 0.3, "test", rounds=2, vocab_size=300, vocab="dp"), runs["word"])
    model, vocab, run = load_lm(runs["word"])
    cross_client_memorization(runs["word"], model, vocab, run, CrossClientConfig(prefixes_per_client=3))
    train_gan(GANRun(f"npz:{images}", "by-user-accuracy:low", 0.5, "test", rounds=2, primary_classes=10), runs["gan"])
    # The monitor on the images (a text monitor on 40 users' file data has a DP vocabulary of ~0 words).
    # Three periods (two calibrate the alerts, the third rolls the fault out and is tested), each of 1 round
    # and 32 samples: the same kinds of file are released as at 2 rounds and 64 samples, in half the training.
    plan = {**GAN_MONITOR_PLAN, "data": f"npz:{images}", "periods": 3, "rollout": "invert:3=0.5",
            "rounds_per_period": 1, "samples": 32}
    out, env, done = monitor(root, "monitor", plan=plan)
    assert done.returncode == 0, done.stderr[-3000:]
    runs.update({p: str(out / p / "gan-random") for p in os.listdir(out) if p.startswith("period_")})
    return runs, str(out), (text, images), env["FEDGEN_DEBUG_LEDGER"]


def test_runs_on_data_files_release_no_digest_of_them(file_runs):
    """Before issue 53 a file's population key was sha256(file)[:16], released in config.json,
    privacy.json and the ledger: a deterministic function of every raw example."""
    from release_boundary import file_digests, released_files

    runs, monitor_dir, files, ledger_home = file_runs
    assert len(runs) == 5
    releases = store.read_json(store.released(runs["word"], store.PRIVACY))["releases"]
    assert any("cross-client-mr" in k for k in releases)
    text_ids, image_ids = data_spec.load_client_data(TEXT).client_ids, data_spec.load_client_data(IMAGES).client_ids
    for name, run_dir in runs.items():
        check_released(run_dir, client_ids=text_ids if name == "word" else image_ids, data_files=files)
    digests = file_digests(files)
    for path in released_files(monitor_dir) + [os.path.join(ledger_home, "ledger.jsonl")]:
        raw = open(path, "rb").read()
        assert not any(d.encode() in raw for d in digests), path
    # What names the population in the store now: the users' keyed MAC, the same for both runs' files.
    for name in ("word", "gan"):
        assert store.read_json(store.released(runs[name], store.PRIVACY))["population"].startswith("users-")
