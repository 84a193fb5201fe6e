"""Attacks on the DP guarantee that must fail. Each one reads only the released run store (what the
modeler sees) plus public knowledge (--seed, the code), and succeeded against the code before issue
11 (noted per test). Ground truth comes from the server side (the run secret, the data), and a control
shows the attack itself works whenever it is given what only the server knows.

The ledger bypasses are attacked in test_ledger.py; release-boundary walks in test_release_boundary.py.
The second privacy review's (issue 53) are here (the population key's preimage, budget resets by editing
or converting the data, re-chained and truncated ledgers, `data inspect --public`) and beside it:
test_attacks_timing.py (round timing in released files, the monitor's schedule, server/ modes),
test_attacks_cross_client.py (one user's change in the cross-client sum), test_attacks_paper_mode.py
(the paper selection's subpopulation size) and test_tff_workers.py (the local worker's address).
"""

import collections
import json
import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from conftest import run_cli
from fedgen_debug.runs import secret as secret_lib
from fedgen_debug.runs import store
from fedgen_debug.training import dp_fedavg, loop
from fedgen_debug.training.config import ClientConfig, DPConfig, ServerConfig, TrainingConfig
from fedgen_debug.training.dp_query import sum_query

FEATURES = 64
SPEC = dp_fedavg.ModelSpec(
    lambda: tf.keras.Sequential([tf.keras.layers.Dense(1, kernel_initializer="zeros", input_shape=(FEATURES,))]),
    tf.keras.losses.MeanSquaredError,
    (tf.TensorSpec([None, FEATURES], tf.float32), tf.TensorSpec([None, 1], tf.float32)))
PUBLIC_SEED = 3


def _data(n_clients=4, examples=None, shift=0.0):
    data = {}
    for i in range(n_clients):
        n = (examples or {}).get(i, 8)
        x = np.random.default_rng(i).normal(size=(n, FEATURES)).astype(np.float32)
        y = (x[:, :1] * 2.0 + 0.3 * (i + 1) + (shift if i == 0 else 0.0)).astype(np.float32)
        data[f"c{i}"] = tf.data.Dataset.from_tensor_slices((x, y))
    return data


def _config(clients, z=1.0, rounds=1):
    return TrainingConfig(rounds=rounds, dp=DPConfig(clients, z, 0.5), client=ClientConfig(1, 4, 0.1),
                          server=ServerConfig("sgd", 1.0), seed=PUBLIC_SEED, checkpoint_every=1)


def _train(run_dir, data, config, secret=None):
    return loop.train(lambda s: dp_fedavg.build_process(SPEC, config, s.tf_seed("dp-noise")),
                      loop.Population("attack-population", tuple(data)),
                      lambda cid, round_num: dp_fedavg.client_dataset(data[cid], config), config, str(run_dir), secret=secret)


def _released_update(run_dir) -> np.ndarray:
    """What the modeler reads: Δ = w0 − w1 (public zero init, server SGD lr 1): the noised mean update."""
    (kernel, bias) = store.load_arrays(store.released(str(run_dir), store.MODEL_WEIGHTS))
    return -np.concatenate([kernel.ravel(), bias.ravel()])


def _clipped_mean(data, config) -> np.ndarray:
    """Ground truth (server side, q = 1): the un-noised mean of the clipped updates."""
    quiet = TrainingConfig(**{**config.__dict__, "dp": DPConfig(config.dp.clients_per_round, 0.0, config.dp.clip)})
    process = dp_fedavg.build_process(SPEC, quiet, (0, 0))
    state = process.next(process.initialize(), [dp_fedavg.client_dataset(d, quiet) for d in data.values()]).state
    return -np.concatenate([w.ravel() for w in process.get_model_weights(state).trainable])


def _noise_on_the_mean(config, noise_seed) -> np.ndarray:
    """The noise the DP query adds to the mean update, were its seed `noise_seed`."""
    query = sum_query(config.dp, noise_seed)
    zeros = [tf.zeros((FEATURES, 1)), tf.zeros((1,))]
    noise, _, _ = query.get_noised_result(zeros, query.initial_global_state())
    return np.concatenate([n.numpy().ravel() for n in noise]) / config.dp.clients_per_round


def test_attack_subtracting_the_noise_rebuilt_from_the_public_seed_fails(tmp_path):
    """Before: the noise seed was [--seed, 0x5EED]; seed and config are released, so the modeler rebuilt
    the noise, subtracted it and read the exact clipped mean."""
    data, config = _data(), _config(4)
    _train(tmp_path / "run", data, config)
    public = json.load(open(store.released(str(tmp_path / "run"), store.CONFIG)))["training"]
    assert public["seed"] == PUBLIC_SEED  # the attacker's knowledge
    released, truth = _released_update(tmp_path / "run"), _clipped_mean(data, config)
    noise_norm = config.dp.noise_stddev * np.sqrt(FEATURES + 1)
    assert np.linalg.norm(released - truth) == pytest.approx(noise_norm, rel=0.35)  # the noise is there
    for guess in ((public["seed"], 0x5EED), (public["seed"], 0), (0, public["seed"]), (public["seed"], public["seed"])):
        residual = released - _noise_on_the_mean(config, guess) - truth
        assert np.linalg.norm(residual) > 0.5 * noise_norm, f"noise seed {guess} recovers the mean"
    # Control: with the run's secret (server side only) the same subtraction is exact.
    secret = secret_lib.load(str(tmp_path / "run"))
    exact = released - _noise_on_the_mean(config, secret.tf_seed("dp-noise"))
    np.testing.assert_allclose(exact, truth, atol=1e-5)


def test_attack_differencing_two_runs_with_the_same_seed_fails(tmp_path):
    """Before: two runs with one --seed drew the same noise (the demo trained its GANs so), and with
    a linear server step the difference of the released models was noise-free."""
    config = _config(4)
    d1, d2 = _data(), _data(shift=5.0)  # neighbouring: client c0's data replaced
    _train(tmp_path / "a", d1, config)
    _train(tmp_path / "b", d2, config)
    difference = _released_update(tmp_path / "a") - _released_update(tmp_path / "b")
    signal = _clipped_mean(d1, config) - _clipped_mean(d2, config)
    assert np.linalg.norm(signal) > 0.1  # c0's contribution differs
    residual = difference - signal
    expected = np.sqrt(2) * config.dp.noise_stddev * np.sqrt(FEATURES + 1)
    assert np.linalg.norm(residual) == pytest.approx(expected, rel=0.35)  # two independent noises


def _recover_counts(run_dir, client_ids, samples):
    """The issue's attack: per-round example totals solved against the (public) samples."""
    rows = store.read_csv(store.released(str(run_dir), store.METRICS))
    columns = [c for c in (rows[0] if rows else {}) if "num_examples" in c]
    if not columns or samples is None:
        return None
    a = np.array([[cid in s for cid in client_ids] for s in samples], float)
    totals = np.array([float(r[columns[0]]) for r in rows])
    return np.linalg.lstsq(a, totals, rcond=None)[0]


def test_attack_recovering_each_clients_example_count_from_released_metrics_fails(tmp_path):
    """Before: metrics.csv held TFF's un-noised train/num_examples per round; 9 rounds of a 6-client run
    solved against the public samples gave every client's example count exactly."""
    sizes_a = {i: 4 + 3 * i for i in range(6)}
    sizes_b = {**sizes_a, 0: 60}  # client c0 holds 15x the examples
    config = _config(3, rounds=9)
    secret = secret_lib.RunSecret.fresh()
    for name, sizes in (("a", sizes_a), ("b", sizes_b)):
        _train(tmp_path / name, _data(6, sizes), config, secret=secret)  # same secret: same samples, same noise
        # Nothing released names the samples, and no column is a count.
        assert _recover_counts(tmp_path / name, [f"c{i}" for i in range(6)], samples=None) is None
    released = {name: store.read_csv(store.released(str(tmp_path / name), store.METRICS)) for name in "ab"}
    assert released["a"] == released["b"] == [{"round": str(r)} for r in range(1, 10)]
    # Round times depend on what the sampled devices hold: they stay on the server.
    timing = store.read_csv(store.server(str(tmp_path / "a"), store.TIMING))
    assert len(timing) == 9 and "seconds" not in open(store.released(str(tmp_path / "a"), store.METRICS)).read()
    # TensorBoard holds the same (nothing here).
    events = [e for f in os.listdir(store.released(str(tmp_path / "a"), store.TENSORBOARD))
              for e in tf.compat.v1.train.summary_iterator(store.released(str(tmp_path / "a"), store.TENSORBOARD, f))]
    assert not [v.tag for e in events for v in e.summary.value]


def test_attack_reading_a_users_selection_bit_from_the_run_store_fails(tmp_path):
    """Before: the trained population was the selected ids, population.json held exact users/images and
    ε was over the subpopulation, so the run store revealed who qualified. Now (strict selection) a
    user's qualifying changes no released file except through DP outputs."""
    from fedgen_debug.training.gan_run import GANRun
    from fedgen_debug.experiments.gan import train_gan

    data, secret = "synthetic-images:writers=12,seed=3", secret_lib.RunSecret.fresh()
    outcomes = {}
    for name, bug in (("inverted", 0.5), ("clean", 0.0)):  # inversion changes who has low accuracy
        run_dir = str(tmp_path / name)
        secret_lib.save(run_dir, secret)  # the same secret: any difference is the data's
        train_gan(GANRun(data, "by-user-accuracy:low,threshold=0.5", bug, "test", rounds=1, primary_classes=10), run_dir)
        privacy = json.load(open(store.released(run_dir, store.PRIVACY)))
        releases = {k: {f: v for f, v in r.items() if f != "source"} for k, r in privacy["releases"].items()}
        outcomes[name] = {"releases": releases, "population": privacy["population_size"],
                          "counts": store.read_json(store.released(run_dir, store.POPULATION))}
    assert outcomes["inverted"]["releases"] == outcomes["clean"]["releases"]  # same N, same events: ε over all
    assert outcomes["inverted"]["population"] == 12
    for counts in (o["counts"] for o in outcomes.values()):
        # Noised and continuous; clamped to [0, N] afterwards (post-processing), so a bound may show exactly.
        assert counts["dp"] and counts["users_stddev"] > 1
        assert counts["users"] != round(counts["users"]) or counts["users"] in (0.0, 12.0)
    for name in outcomes:
        text = "".join(open(p, errors="ignore").read() for p in _released_text_files(str(tmp_path / name)))
        assert "writer_" not in text


def _released_text_files(run_dir):
    root = os.path.join(run_dir, store.RELEASED)
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if f.endswith((".json", ".csv"))]


def test_attack_finding_words_a_single_user_typed_in_the_vocabulary_fails(tmp_path, caplog):
    """Before: vocab.json was the top 10K of the private text; on synthetic-text:users=300, 5,452 of
    its words were used by one single user."""
    from fedgen_debug.data import spec as data_spec
    from fedgen_debug.device import lm_data
    from fedgen_debug.training.lm_run import LMRun
    from fedgen_debug.experiments.lm import train_lm

    data = "synthetic-text:users=300,seed=6"
    client_data = data_spec.load_client_data(data)
    users_of = collections.defaultdict(set)
    for cid in client_data.client_ids:
        for sentence in lm_data.device_tokens(client_data, cid, None):
            for token in sentence:
                users_of[token].add(cid)
    assert sum(len(u) == 1 for u in users_of.values()) > 1000  # the private text is full of them
    dp_run = str(tmp_path / "dp")
    caplog.set_level(logging.WARNING, logger="fedgen_debug.experiments.lm")
    train_lm(LMRun("word", data, 0.0, "test", rounds=1, vocab_size=10_000, vocab="dp"), dp_run)
    words = store.read_json(store.released(dp_run, store.VOCAB))["words"]
    assert 10 < len(words) and min(len(users_of[w]) for w in words) >= 10
    # What the privacy costs the diagnosis is said: so few words leave ordinary words out of vocabulary.
    assert f"the DP vocabulary holds only {len(words)} words (heavy hitters of 300 users)" in caplog.text
    assert "the word-LM sees most words as UNK" in caplog.text and "char-LM" not in caplog.text
    # The default for synthetic text: the public stand-in's words, whatever the private users typed.
    public_run = str(tmp_path / "public")
    run = LMRun("word", data, 0.0, "test", rounds=1, vocab_size=2000)
    train_lm(run, public_run)
    assert store.read_json(store.released(public_run, store.VOCAB))["words"] == list(
        lm_data.public_vocabulary(run.vocab, 2000).words)


@pytest.mark.parametrize("delta, message", [("0.99", "delta must be < 1/N = 0.025 (N = 40)"),
                                            ("0.03", "delta must be < 1/N")])
def test_attack_a_meaningless_delta_is_refused_before_training(tmp_path, delta, message):
    out = str(tmp_path / "r")
    result = run_cli("train-lm", "--kind", "char", "--data", "synthetic-text:users=40", "--preset", "test",
                     "--delta", delta, "--out", out)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert not os.path.exists(out)


# ---- second review (issue 53): the population key, budget resets, a rewritten ledger ------------------

PLAY = """ROMEO:
I have a secret word, {word}.
And I keep it.

JULIET:
Mine is different. It is plain.

NURSE:
I know none. Good night.
"""
CANDIDATES = ("falcon", "otter", "walrus", "heron", "badger", "lynx")


def _cli(capsys, *argv) -> tuple[int, str]:
    from fedgen_debug.cli.main import main

    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def test_attack_a_preimage_of_the_population_key_finds_no_secret_word(tmp_path, fresh_ledger, capsys):
    """Before: a file's population key was sha256(file)[:16], in released/config.json, privacy.json, the
    ledger and the CLI's output. Substituting each candidate for ROMEO's secret word and hashing named
    the one in the file. Now the key is a keyed MAC of the user ids: no candidate reproduces anything
    released, and the key is the same whatever the word (it is not a function of the text at all)."""
    import hashlib

    fresh_ledger.set_budget("*", 1e6)
    path = tmp_path / "play.txt"
    released = {}
    for word in ("otter", "lynx"):
        path.write_text(PLAY.format(word=word))
        code, output = _cli(capsys, "data", "inspect", f"play:{path}", "--json")
        assert code == 0, output
        released[word] = output + open(fresh_ledger.path).read()
        key = json.loads(output[output.index("{"):])["population"]
        released[word + " key"] = key
    for word in ("otter", "lynx"):
        guesses = {}
        for candidate in CANDIDATES:
            digest = hashlib.sha256(PLAY.format(word=candidate).encode()).hexdigest()
            guesses[candidate] = (digest[:16], digest)
        # Control: the guesses differ per candidate, so a content hash would single out the word.
        assert len({g[0] for g in guesses.values()}) == len(CANDIDATES)
        found = [c for c, (short, full) in guesses.items() if short in released[word] or full in released[word]]
        assert found == [], f"the released text reproduces the hash of a candidate file: {found}"
    assert released["otter key"] == released["lynx key"]


def test_attack_editing_or_converting_the_data_resets_no_budget(tmp_path, fresh_ledger, capsys):
    """Before: a blank line (any changed byte) or `data make` into another format made a new population
    with a fresh budget (refused at ε 10.75, accepted at 3.25 after the edit)."""
    path = tmp_path / "play.txt"
    path.write_text(PLAY.format(word="otter"))
    assert _cli(capsys, "data", "inspect", f"play:{path}")[0] == 0
    (total,) = fresh_ledger.totals()
    fresh_ledger.set_budget(total.population, total.guarantee.epsilon * 1.5)  # no room for a second inspect
    refused = "over the budget set for"
    code, output = _cli(capsys, "data", "inspect", f"play:{path}")
    assert code == 2 and refused in output, output
    edited = tmp_path / "edited.txt"
    edited.write_text("\n" + PLAY.format(word="heron").replace("Good night.", "Good night, all.") + "\n\n")
    converted = tmp_path / "converted.jsonl"
    assert _cli(capsys, "data", "make", f"play:{path}", "--out", str(converted))[0] == 0
    reordered = tmp_path / "reordered.jsonl"
    reordered.write_text("".join(reversed(converted.read_text().splitlines(keepends=True))))
    for spec in (f"play:{edited}", f"jsonl:{converted}", f"jsonl:{reordered}", f"play:{path},min_sentences=2"):
        code, output = _cli(capsys, "data", "inspect", spec)
        assert code == 2 and refused in output, (spec, output)
    assert len(fresh_ledger.records()) == 2  # the first inspect's two releases, nothing since


def test_attack_images_converted_to_tff_sqlite_reset_no_budget(tmp_path, fresh_ledger, capsys):
    from conftest import hand_built_images
    from fedgen_debug.data import npz
    from fedgen_debug.data.client_data import ArrayClientData

    arrays = tmp_path / "writers.npz"
    npz.write_npz(ArrayClientData(hand_built_images()), str(arrays))
    assert _cli(capsys, "data", "inspect", f"npz:{arrays}")[0] == 0
    (total,) = fresh_ledger.totals()
    fresh_ledger.set_budget(total.population, total.guarantee.epsilon * 1.5)
    cache = tmp_path / "tff-cache"
    assert _cli(capsys, "data", "make", f"npz:{arrays}", "--out", str(cache), "--format", "tff-sqlite")[0] == 0
    code, output = _cli(capsys, "data", "inspect", f"tff-emnist:{cache}")
    assert code == 2 and "over the budget set for" in output, output


def _ledger_with_three_releases(ledger):
    from test_ledger import _record

    ledger.set_budget("*", 1e6)
    for name in ("a", "b", "c"):
        ledger.spend(_record(name, z=0.3, t=200))
    return open(ledger.path).read().splitlines()


def test_attack_dropping_records_and_re_chaining_the_ledger_fails(fresh_ledger):
    """Before: the chain was sha256 of the previous line, so dropping records and recomputing the chain
    took a population from ε 1,173 to 3.15, undetected. Now each line is MACed under a key outside
    the ledger file; an attacker without it can renumber and re-point lines but not re-sign them."""
    from fedgen_debug.privacy.ledger import LedgerCorrupted

    lines = _ledger_with_three_releases(fresh_ledger)
    full = fresh_ledger.totals()[0].guarantee.epsilon
    kept = [json.loads(line) for line in lines[:2]]  # the budget and release a; b and c dropped
    with open(fresh_ledger.path, "w") as f:
        f.write("\n".join(json.dumps(e, sort_keys=True) for e in kept) + "\n")
    with pytest.raises(LedgerCorrupted, match="cut short"):
        fresh_ledger.totals()
    # Re-chained as the old ledger was (no MACs, sha256 of the line before): refused too.
    import hashlib

    prev, rechained = "", []
    for entry in kept:
        entry = {k: v for k, v in entry.items() if k not in ("mac", "seq")} | {"prev": prev}
        line = json.dumps(entry, sort_keys=True)
        rechained.append(line)
        prev = hashlib.sha256(line.encode()).hexdigest()
    with open(fresh_ledger.path, "w") as f:
        f.write("\n".join(rechained) + "\n")
    with pytest.raises(LedgerCorrupted):
        fresh_ledger.totals()
    # Dropping b and re-pointing c at a (the attacker copies a's MAC as c's prev): c no longer verifies.
    c = json.loads(lines[3]) | {"seq": 3, "prev": json.loads(lines[1])["mac"]}
    with open(fresh_ledger.path, "w") as f:
        f.write("\n".join([lines[0], lines[1], json.dumps(c, sort_keys=True)]) + "\n")
    with pytest.raises(LedgerCorrupted, match="does not verify"):
        fresh_ledger.spend([])
    # The intact ledger still reads, with the same total: the refusals above were the attack's.
    with open(fresh_ledger.path, "w") as f:
        f.write("\n".join(lines) + "\n")
    assert fresh_ledger.totals()[0].guarantee.epsilon == full


@pytest.mark.parametrize("attack", ["truncate the tail", "delete the ledger", "delete the head", "delete the key"])
def test_attack_truncating_or_resetting_the_ledger_fails(fresh_ledger, attack):
    from fedgen_debug.privacy.ledger import LedgerCorrupted
    from fedgen_debug.privacy.ledger_keys import HEAD_FILE

    lines = _ledger_with_three_releases(fresh_ledger)
    if attack == "truncate the tail":
        with open(fresh_ledger.path, "w") as f:
            f.write("\n".join(lines[:-1]) + "\n")
    elif attack == "delete the ledger":
        os.remove(fresh_ledger.path)
    elif attack == "delete the head":
        os.remove(os.path.join(fresh_ledger.keys.directory, HEAD_FILE))
    else:
        os.remove(fresh_ledger.keys.key_path)
    with pytest.raises(LedgerCorrupted):
        fresh_ledger.totals()
    from test_ledger import _record

    with pytest.raises(LedgerCorrupted):  # and nothing more is charged on top of it
        fresh_ledger.spend(_record("d"))


def test_attack_exact_counts_of_known_users_through_inspect_public_fails(tmp_path, fresh_ledger, capsys):
    """Before: `data inspect --public` printed exact counts and per-client min/max of any data, charging
    and checking nothing. Now users the ledger holds DP releases on are private until the data owner
    declares them public, and the declaration is on the ledger's record."""
    path = tmp_path / "play.txt"
    path.write_text(PLAY.format(word="otter"))
    code, output = _cli(capsys, "data", "inspect", f"play:{path}", "--public", "--json")
    assert code == 0 and json.loads(output)["examples"] == 6  # unknown users: the modeler's public data
    assert fresh_ledger.records() == []
    assert _cli(capsys, "data", "inspect", f"play:{path}")[0] == 0  # now a private population
    converted = tmp_path / "converted.jsonl"
    assert _cli(capsys, "data", "make", f"play:{path}", "--out", str(converted))[0] == 0
    for spec in (f"play:{path}", f"jsonl:{converted}"):
        code, output = _cli(capsys, "data", "inspect", spec, "--public", "--json")
        assert code == 2 and "the ledger holds DP releases on users of this data" in output, output
        assert '"examples"' not in output and "examples_per_client" not in output
    code, output = _cli(capsys, "data", "inspect", f"play:{path}", "--public", "--declare-public", "published play")
    assert code == 0 and "examples: 6 (public data: exact)" in output
    declared = [e for e in fresh_ledger.entries() if e["kind"] == "declared-public"]
    assert [e["reason"] for e in declared] == ["published play"]
    assert declared[0]["population"] == fresh_ledger.population_key(f"play:{path}")
