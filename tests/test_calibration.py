"""Calibration against training noise (analysis/calibration.py, calibration_store.py, calibrate.py): golden
estimates on hand-built clean pairs, the calibrated z, a statistical check of the false-alarm rate and the
power on simulated runs, the store's choice of calibration, and `fedgen-debug calibrate` end to end."""

import dataclasses
import itertools
import json
import math

import numpy as np
import pytest
from scipy import ndimage, stats

from fedgen_debug.analysis import calibration as C
from fedgen_debug.analysis import calibration_store, differences, image_properties
from fedgen_debug.analysis import diagnose
from fedgen_debug.runs import store

from conftest import run_cli, run_main
from fedgen_debug.experiments.sweep import train_run
from fedgen_debug.training.lm_run import LMRun


def _row(effect, error=0.0, name="p", kind="mean", family="stroke"):
    return {"property": name, "family": family, "kind": kind, "effect": effect, "standard_error": error, "z": 0.0,
            "standardized_difference": effect, "difference": effect, "difference_standard_error": error}


def test_replicate_noise_is_the_rms_effect_beyond_the_samples_noise_with_a_chi_square_bound():
    pairs = [[_row(e, 0.1)] for e in (0.3, -0.3, 0.3, -0.3)]
    noise, dof = C.estimate_noise(pairs, "replicate")
    # E[e²] = τ² + SE²: 0.09 = τ² + 0.01 → τ = √0.08; the bound: Σe²/χ²₀.₀₅(4) − SE².
    assert dof == 4 and noise["p"].offset == 0.0
    assert noise["p"].training_noise == pytest.approx(math.sqrt(0.08), abs=1e-12)
    assert noise["p"].training_noise_upper == pytest.approx(math.sqrt(0.36 / 0.7107230213973241 - 0.01), abs=1e-9)


def test_selection_pairs_have_an_offset_and_their_spread_about_it():
    noise, dof = C.estimate_noise([[_row(e)] for e in (0.5, 0.6, 0.7)], "selection")
    assert dof == 2 and noise["p"].offset == pytest.approx(0.6)
    assert noise["p"].training_noise == pytest.approx(0.1)             # Σ(e − 0.6)² / (3 − 1) = 0.01
    assert noise["p"].training_noise_upper == pytest.approx(math.sqrt(0.02 / stats.chi2.ppf(0.05, 2)))
    assert noise["p"].offset_error == pytest.approx(0.1 / math.sqrt(3))   # the offset is itself an estimate
    assert C.calibrated_z(_row(0.9), noise["p"]) == pytest.approx(
        0.3 / math.sqrt(noise["p"].training_noise_upper ** 2 + 0.01 / 3))


def test_too_few_pairs_and_unequal_properties_are_refused_or_left_uncalibrated():
    with pytest.raises(ValueError, match="degrees of freedom"):
        C.estimate_noise([[_row(0.1)]], "replicate")
    noise, _ = C.estimate_noise([[_row(0.1), _row(0.2, name="q")], [_row(0.1)], [_row(-0.1)]], "replicate")
    assert set(noise) == {"p"}                                          # "q" measured in one pair only


def test_calibrated_z_counts_both_noises_and_is_none_without_a_calibration():
    noise = C.PropertyNoise(offset=0.1, training_noise=0.3, training_noise_upper=0.4, pairs=10)
    assert C.calibrated_z(_row(0.5, 0.03), noise) == pytest.approx(0.4 / math.sqrt(0.03 ** 2 + 0.16))
    assert C.calibrated_z(_row(0.5, 0.03), None) is None
    # A class mix's distance below the clean pairs' is no difference; above, in units of their spread.
    mix = C.PropertyNoise(offset=0.2, training_noise=0.05, training_noise_upper=0.1, pairs=10, offset_error=0.0)
    assert C.calibrated_z(_row(0.1, 0.02, kind="categories"), mix) == 0.0
    assert C.calibrated_z(_row(0.5, 0.02, kind="categories"), mix) == pytest.approx(3.0)


def test_the_upper_bound_factor_is_what_estimate_noise_widens_a_clean_estimate_by():
    # By hand: χ²₀.₀₅(4) = 0.7107, √(4 / 0.7107) = 2.372; χ²₀.₀₅(30) = 18.493, √(30 / 18.493) = 1.274.
    assert C.upper_bound_factor(4) == pytest.approx(2.372, abs=1e-3)
    assert C.upper_bound_factor(30) == pytest.approx(1.274, abs=1e-3)
    # Five replicate runs whose pairs differ with no sampling noise: τ_upper / τ̂ is that factor.
    runs = [0.0, 1.0, 3.0, -1.0, 2.0]
    pairs = [[_row(runs[j] - runs[i], 0.0)] for i, j in itertools.combinations(range(5), 2)]
    noise, dof = C.estimate_noise(pairs, "replicate", 4)
    (p,) = noise.values()
    assert p.training_noise_upper / p.training_noise == pytest.approx(C.upper_bound_factor(dof))
    with pytest.raises(ValueError, match="degrees_of_freedom"):
        C.upper_bound_factor(0)


def test_degrees_of_freedom_of_shared_and_disjoint_pairs():
    assert C.replicate_degrees_of_freedom(list(itertools.combinations(range(5), 2))) == 4
    assert C.replicate_degrees_of_freedom([(0, 1), (2, 3), (4, 5)]) == 3
    assert C.replicate_degrees_of_freedom([(0, 1), (1, 2), (3, 4)]) == 3


def test_the_envelope_of_two_sources_is_the_wider_noise_about_the_mean_offset():
    a = {"p": C.PropertyNoise(0.0, 0.1, 0.2, 10), "q": C.PropertyNoise(0.0, 0.3, 0.4, 10),
         "only_a": C.PropertyNoise(0, 0, 0, 10)}
    b = {"p": C.PropertyNoise(0.0, 0.3, 0.5, 6), "q": C.PropertyNoise(0.0, 0.1, 0.1, 6)}
    both = C.envelope([a, b])
    assert set(both) == {"p", "q"}                                       # measured in both sources only
    assert (both["p"].training_noise, both["p"].training_noise_upper, both["p"].pairs) == (0.3, 0.5, 16)
    assert (both["q"].training_noise, both["q"].training_noise_upper) == (0.3, 0.4)
    # Selection pairs: offsets 0.2 and 0.6 → mean 0.4, each source's noise widened by its offset's distance.
    low = {"p": C.PropertyNoise(0.2, 0.1, 0.15, 5, offset_error=0.05)}
    high = {"p": C.PropertyNoise(0.6, 0.0, 0.05, 5, offset_error=0.02)}
    p = C.envelope([low, high])["p"]
    assert p.offset == pytest.approx(0.4) and p.offset_error == 0.05
    assert p.training_noise == pytest.approx(math.hypot(0.1, 0.2))
    assert p.training_noise_upper == pytest.approx(math.hypot(0.15, 0.2))
    assert C.envelope([a]) == a


def _two_source_calibration():
    synthetic = {"p": C.PropertyNoise(0.0, 0.1, 0.2, 10)}
    real = {"p": C.PropertyNoise(0.0, 0.3, 0.5, 6)}
    return C.Calibration("two", "gan", "demo", "replicate", C.envelope([synthetic, real]), 4, 3.0,
                         {"data": "npz:/femnist.npz, synthetic-images:writers=100,seed=0",
                          "sources": [{"data": "synthetic-images:writers=100,seed=0", "tested": 10, "false_alarms": 0},
                                      {"data": "npz:/femnist.npz", "tested": 6, "false_alarms": 1}]},
                         false_alarms={"pairs": 16, "alarms": 1},
                         by_source={"synthetic-images:writers=100,seed=0": {"degrees_of_freedom": 9, "properties": synthetic},
                                    "npz:/femnist.npz": {"degrees_of_freedom": 4, "properties": real}})


def test_runs_on_a_measured_source_use_its_own_noise_and_other_data_the_widest():
    two = _two_source_calibration()
    own, source = two.for_data(["npz:/femnist.npz", "npz:/femnist.npz"])
    assert source == "npz:/femnist.npz" and own.properties["p"].training_noise_upper == 0.5
    assert own.degrees_of_freedom == 4 and own.by_source is None and own.source["used"] == "npz:/femnist.npz"
    assert (own.false_alarms["pairs"], own.false_alarms["alarms"]) == (6, 1)     # that source's own, left out
    # Another size or seed of the tool's synthetic writers is the synthetic source; a modeler's other npz is not.
    own, source = two.for_data(["synthetic-images:writers=3400,seed=7"] * 2)
    assert source == "synthetic-images:writers=100,seed=0" and own.properties["p"].training_noise_upper == 0.2
    # The same file by another path is that source (the shipped calibrations name ../shared/data/...); another
    # file, or the same one read with other options, is not.
    own, source = two.for_data(["npz:../data/femnist.npz", "npz:/elsewhere/femnist.npz"])
    assert source == "npz:/femnist.npz" and own.properties["p"].training_noise_upper == 0.5
    for specs in (["npz:/digits.npz"] * 2, ["npz:/femnist.npz", "synthetic-images:writers=100,seed=0"], [None, None],
                  ["npz:/femnist.npz,background=black"] * 2, ["jsonl:/femnist.npz"] * 2):
        assert two.for_data(specs) == (two.widened(), None) and two.widened().other_data   # widened (below)
    assert two.properties["p"].training_noise_upper == 0.5                      # the widest
    assert C.Calibration.from_json(json.loads(json.dumps(two.to_json()))) == two


def test_a_clean_pair_is_two_runs_of_one_source():
    rows = {(0, 1): [_row(0.1)], (1, 2): [_row(0.2)]}
    with pytest.raises(ValueError, match="two runs of one source of data. Found runs 1 and 2 of A and B"):
        C.estimate_by_source(rows, "replicate", ["A", "A", "B"])
    assert C.all_pairs(5, ["A", "B", "A", "B", "A"]) == [(0, 2), (0, 4), (1, 3), (2, 4)]
    assert C.all_pairs(3) == [(0, 1), (0, 2), (1, 2)]


def test_a_noisier_source_alarms_against_the_other_sources_calibration_and_not_against_the_envelope():
    """Training noise depends on the data (real FEMNIST GANs 3.6x synthetic ones in confidence): a
    calibration of one source alarms on a noisier one, and pooling the two would understate the noisier
    one's noise; each source's noise, widest taken, holds for both."""
    rng = np.random.default_rng(3)
    quiet, noisy = _simulated_runs(rng, runs=10, run_noise=0.1), _simulated_runs(rng, runs=10, run_noise=0.4)
    values, source = quiet + noisy, ["quiet"] * 10 + ["noisy"] * 10
    quiet_pairs = list(itertools.combinations(range(10), 2))
    noise, dof = C.estimate_noise([_compare(quiet[i], quiet[j]) for i, j in quiet_pairs], "replicate", 9)
    quiet_only = C.Calibration("quiet", "gan", "demo", "replicate", noise, dof, C.threshold_for(3), {})
    noisy_alarms = sum(C.apply(_compare(noisy[i], noisy[j]), quiet_only)[0]["significant"] for i, j in quiet_pairs)
    assert noisy_alarms > 9                                               # far beyond 1 in 20 of 45
    pooled = C.leave_pair_out_false_alarms(values, _compare, "replicate", "gan", C.all_pairs(20, source))
    by_source = C.leave_pair_out_false_alarms(values, _compare, "replicate", "gan", source_of_run=source)
    assert by_source["pairs"] == 90 and {d["data"] for d in by_source["details"]} == {"quiet", "noisy"}
    noisy_by_source = sum(d["alarm"] for d in by_source["details"] if d["data"] == "noisy")
    noisy_pooled = sum(d["alarm"] for d in pooled["details"] if source[d["pair"][0]] == "noisy")
    assert noisy_by_source <= 45 / 20 < noisy_pooled
    assert by_source["alarms"] <= 90 / 20


def _measured_row(effect, error, n):
    return {**_row(effect, error), "measured_a": n, "measured_b": n}


def test_relative_noise_is_the_bound_over_the_median_per_sample_spread_and_widens_other_data_only():
    pairs = [[_measured_row(e, 0.1, 100)] for e in (0.3, -0.3, 0.3, -0.3)]
    noise = C.estimate_noise(pairs, "replicate")[0]["p"]
    upper = math.sqrt(0.36 / 0.7107230213973241 - 0.01)
    spread = 0.1 / math.sqrt(2 / 100)                     # SE = s √(1/n_a + 1/n_b): s = 0.707 per sample
    assert noise.training_noise_upper == pytest.approx(upper, abs=1e-9)
    assert noise.relative_noise == pytest.approx(upper / spread, abs=1e-9)
    # A pair whose samples spread twice as much: on other data τ doubles; on a measured source it stays.
    wide = _measured_row(0.5, 0.2, 100)
    assert C.training_noise_for(wide, noise, other_data=True) == pytest.approx(2 * upper)
    assert C.training_noise_for(wide, noise) == noise.training_noise_upper
    assert C.calibrated_z(wide, noise, other_data=True) == pytest.approx(0.5 / math.hypot(0.2, 2 * upper))
    # With each side's spread, the smaller: a fault on half of B's devices widens B's spread (a mixture), and
    # the noise must not grow with the fault it should expose.
    mixed = {**wide, "spread_a": spread, "spread_b": 5 * spread}
    assert C.sample_spread(mixed) == spread
    assert C.training_noise_for(mixed, noise, other_data=True) == pytest.approx(upper)
    # Never narrower than τ_upper; a class mix and a property without a spread keep τ_upper.
    assert C.training_noise_for(_measured_row(0.5, 0.01, 100), noise, other_data=True) == noise.training_noise_upper
    assert C.training_noise_for({**wide, "kind": "categories"}, noise, other_data=True) == noise.training_noise_upper
    assert C.estimate_noise([[_row(e, 0.1)] for e in (0.3, -0.3, 0.3)], "replicate")[0]["p"].relative_noise is None
    # Widened for other data, a property no source saw vary takes the largest relative noise of the others.
    widened = C.Calibration("w", "word", "demo", "replicate", {"p": noise, "digits": C.PropertyNoise(0, 0, 0, 4)},
                            3, 3.0, {}).widened()
    assert widened.other_data and widened.properties["digits"].relative_noise == noise.relative_noise
    assert widened.properties["p"] == noise
    # The envelope keeps the largest relative noise; a file without it loads as None (older calibrations).
    a, b = dataclasses.replace(noise, relative_noise=0.2), dataclasses.replace(noise, relative_noise=0.5)
    assert C.envelope([{"p": a}, {"p": b}])["p"].relative_noise == 0.5
    old = {k: v for k, v in dataclasses.asdict(noise).items() if k != "relative_noise"}
    assert C.PropertyNoise(**old).relative_noise is None
    with pytest.raises(ValueError, match="relative_noise"):
        dataclasses.replace(noise, relative_noise=float("inf"))


def _scaled_runs(rng, runs, relative, spread, samples=300, shift=0.0):
    """Runs whose property `p` spreads by `spread` per sample and whose training noise is `relative` of
    that (a share near zero in one source and common in another: both scale together); `shift` in units
    of the spread added to the last run."""
    offsets = rng.normal(0.0, relative * spread, size=runs)
    offsets[-1] += shift * spread
    return [{"p": rng.normal(offsets[r], spread, size=samples)} for r in range(runs)]


def _compare_p(values_a, values_b):
    return differences.compare_properties(_PROPERTIES[:1], values_a, values_b)


def test_on_data_no_source_measured_the_noise_follows_the_samples_spread():
    """Attack: a calibration of quiet data (synthetic text has no symbols) applied as is to data where the
    property varies 10x more calls most clean pairs different; widened by the relative noise, at most 1
    in 20, and a bug of 10 training noises is still found."""
    rng = np.random.default_rng(5)
    quiet = _scaled_runs(rng, 10, relative=0.3, spread=0.1)
    pairs = list(itertools.combinations(range(10), 2))
    noise, dof = C.estimate_noise([_compare_p(quiet[i], quiet[j]) for i, j in pairs], "replicate", 9)
    calibration = C.Calibration("quiet", "word", "demo", "replicate", noise, dof, C.threshold_for(1),
                                {"data": "synthetic-text:users=300,seed=0"})
    widened, source = calibration.for_data(["jsonl:/their.jsonl"] * 2)
    assert source is None and widened.other_data
    assert not calibration.for_data(["synthetic-text:users=9"] * 2)[0].other_data   # the same generator
    other = _scaled_runs(rng, 10, relative=0.3, spread=1.0)
    alarms = {c.other_data: sum(C.apply(_compare_p(other[i], other[j]), c)[0]["significant"] for i, j in pairs)
              for c in (calibration, widened)}
    assert alarms[False] > 20 and alarms[True] <= len(pairs) / 20
    buggy = _scaled_runs(rng, 2, relative=0.3, spread=1.0, shift=3.0)
    assert C.apply(_compare_p(buggy[0], buggy[1]), widened)[0]["significant"]


def test_threshold_is_bonferroni_over_the_properties():
    assert C.threshold_for(1) == pytest.approx(1.959964, abs=1e-6)
    assert C.threshold_for(26) == pytest.approx(stats.norm.isf(0.05 / 52))


def test_the_clean_pairs_threshold_is_their_conformal_quantile_and_needs_19_pairs():
    # ⌈(n + 1) · 0.95⌉-th smallest |largest z|: with 19 pairs the largest, with 39 the second largest.
    assert C.clean_pairs_threshold([float(v) for v in range(1, 19)]) is None          # 18: no bound at 5%
    assert C.clean_pairs_threshold([-float(v) for v in range(1, 20)]) == 19.0          # signs do not count
    assert C.clean_pairs_threshold([float(v) for v in range(1, 40)]) == 38.0
    assert C.clean_pairs_threshold([float(v) for v in range(1, 11)], rate=0.1) == 10.0
    # Only ever raised: Bonferroni's stands where the clean pairs' own is lower (or unmeasured).
    assert C.threshold_with_clean_pairs(33, {"clean_pairs_threshold": 4.1}) == 4.1
    assert C.threshold_with_clean_pairs(33, {"clean_pairs_threshold": 1.9}) == C.threshold_for(33)
    assert C.threshold_with_clean_pairs(33, {"clean_pairs_threshold": None}) == C.threshold_for(33)
    assert C.threshold_with_clean_pairs(33, None) == C.threshold_for(33)


def test_left_out_false_alarms_use_the_other_pairs_threshold_and_report_both_counts():
    """20 selection pairs: "p" is 0 ± 1 in each, but pair 7 reaches 30 (an outlying run). Bonferroni calls pair
    7; so does the conformal threshold of the other 19 (their largest), since 30 passes it: 1 of 20 either
    way. Every other pair is held to pair 7's value, the largest of its 19 others, and so is a new pair
    (the pairs' own threshold: the largest of all 20)."""
    rng = np.random.default_rng(3)
    effects = rng.normal(0.0, 1.0, 20)
    effects[7] = 30.0
    rows = {(2 * k, 2 * k + 1): [_row(float(e), 0.01)] for k, e in enumerate(effects)}
    alarms = C.false_alarms_left_out(rows, "selection", "gan")
    assert alarms["alarms"] == alarms["alarms_at_bonferroni"] == 1 and alarms["details"][7]["alarm"]
    largest = [abs(d["top_calibrated_z"]) for d in alarms["details"]]
    assert alarms["clean_pairs_threshold"] == max(largest) == largest[7]
    assert alarms["details"][7]["threshold"] == max(C.threshold_for(1), *largest[:7], *largest[8:])
    assert all(d["threshold"] == largest[7] for i, d in enumerate(alarms["details"]) if i != 7)


def _heavy_tailed_pairs(rng, pairs, properties=20, outlying=0.2, outlier_scale=6.0):
    """Clean selection pairs (rows of `properties` properties) whose training noise is normal (τ = 1, the
    samples' noise 0.05) except in an `outlying` share of pairs, where one property's is `outlier_scale`
    times wider: the tails of clean T4 pairs (a low-accuracy GAN with a quarter of faint samples)."""
    all_rows = []
    for _ in range(pairs):
        effects = rng.normal(0.0, 1.0, properties)
        if rng.random() < outlying:
            effects[rng.integers(properties)] *= outlier_scale
        all_rows.append([_row(float(e), 0.05, name=f"p{k}") for k, e in enumerate(effects)])
    return all_rows


def test_heavy_tailed_clean_pairs_break_bonferroni_but_not_the_clean_pairs_threshold():
    """The attack on the false-alarm bound: training noise with heavier tails than normal. 30 calibrations of
    39 clean pairs each, every one then meeting 200 clean pairs it has not seen: beyond Bonferroni's
    threshold (3.02 for 20 properties) clean pairs alarm about twice as often as the issue's 1 in 20; beyond
    the calibration's own (max with the clean pairs' conformal quantile) at most 1 in 20 on average, by
    exchangeability, whatever the tails."""
    rng = np.random.default_rng(11)
    bonferroni, own, thresholds = [], [], []
    for _ in range(30):
        rows = {(2 * k, 2 * k + 1): r for k, r in enumerate(_heavy_tailed_pairs(rng, 39))}
        noise, dof = C.estimate_noise(list(rows.values()), "selection")
        alarms = C.false_alarms_left_out(rows, "selection", "gan")
        threshold = C.threshold_with_clean_pairs(len(noise), alarms)
        thresholds.append(threshold)
        calibration = C.Calibration("heavy", "gan", "demo", "selection", noise, dof, C.threshold_for(len(noise)), {})
        for fresh in _heavy_tailed_pairs(rng, 200):
            largest = abs(C.apply(fresh, calibration)[0]["calibrated_z"])
            bonferroni.append(largest > C.threshold_for(len(noise)))
            own.append(largest > threshold)
    assert np.mean(bonferroni) > 0.08                      # the bound assumed normal tails, and fails (0.10-0.12)
    assert np.mean(own) <= 0.065                           # ≤ 0.05 in expectation, ± 0.007 over 30 calibrations
    assert sum(t > C.threshold_for(20) for t in thresholds) >= 20     # raised in most calibrations here


def _simulated_runs(rng, runs, run_noise, samples=300, shift=0.0):
    """Each run's property values: N(run offset, 1) per sample, the run's offset ~ N(0, run_noise²) (training
    noise), `shift` added to the last run (a bug)."""
    offsets = rng.normal(0.0, run_noise, size=(runs, 3))
    offsets[-1, 0] += shift
    return [{name: rng.normal(offsets[r, i], 1.0, size=samples) for i, name in enumerate(("p", "q", "s"))}
            for r in range(runs)]


_PROPERTIES = [differences.Property(n, "stroke", "lower", "higher", n) for n in ("p", "q", "s")]


def _compare(values_a, values_b):
    return differences.compare_properties(_PROPERTIES, values_a, values_b)


def test_left_out_clean_pairs_rarely_alarm_while_the_samples_z_alarms_on_most():
    rng = np.random.default_rng(0)
    values = _simulated_runs(rng, runs=12, run_noise=0.3)
    pairs = list(itertools.combinations(range(12), 2))
    alarms = C.leave_pair_out_false_alarms(values, _compare, "replicate", "gan", pairs)
    assert alarms["pairs"] == 66 and alarms["alarms"] <= 3              # ≤ 1 in 20
    raw = sum(differences.rank(_compare(values[i], values[j]))[0]["significant"] for i, j in pairs)
    assert raw > 33                                                    # the sampling-only z: training noise is "found"


def test_a_shift_beyond_the_training_noise_is_found_and_one_within_it_is_not():
    rng = np.random.default_rng(1)
    clean = _simulated_runs(rng, runs=10, run_noise=0.2)
    pairs = list(itertools.combinations(range(10), 2))
    noise, dof = C.estimate_noise([_compare(clean[i], clean[j]) for i, j in pairs], "replicate",
                                  C.replicate_degrees_of_freedom(pairs))
    calibration = C.Calibration("sim", "gan", "demo", "replicate", noise, dof, C.threshold_for(3), {})
    big = _simulated_runs(rng, runs=2, run_noise=0.2, shift=3.0)
    ranked = C.apply(_compare(big[0], big[1]), calibration)
    assert ranked[0]["property"] == "p" and ranked[0]["significant"] and ranked[0]["z"] > ranked[0]["calibrated_z"]
    small = _simulated_runs(np.random.default_rng(7), runs=2, run_noise=0.0, shift=0.15)
    ranked = C.apply(_compare(small[0], small[1]), calibration)
    assert not any(c["significant"] for c in ranked)                   # within the training noise
    assert differences.rank(_compare(small[0], small[1]))[0]["z"] != 0.0


def test_a_rotated_set_is_orientation_alone_and_a_blurred_one_sharpness_first_under_a_calibration():
    from fedgen_debug.data import client_data as cd
    from fedgen_debug.data import spec as data_spec

    data = data_spec.load_client_data("synthetic-images:writers=40,seed=4")
    pool = np.concatenate([cd.client_numpy(data, c)["pixels"] for c in sorted(data.client_ids)])
    # Four sets of every writer's images (each writer in each set: sets differ by sampling, not by style).
    sets = [image_properties.as_unit_images(pool[i::4][:250]) for i in range(4)]
    values = [diagnose.image_values(s) for s in sets]
    pairs = list(itertools.combinations(range(4), 2))
    noise, dof = C.estimate_noise([diagnose.compare_values("gan", values[i], values[j]) for i, j in pairs],
                                  "replicate", 3)
    calibration = C.Calibration("halves", "gan", "demo", "replicate", noise, dof, C.threshold_for(len(noise)), {})
    ranked, _, _ = diagnose.image_differences(sets[0], np.rot90(sets[1], axes=(1, 2)), calibration=calibration)
    assert differences.significant_families(ranked) == ["orientation"]      # orientation and nothing else
    assert all(c["calibrated_z"] is not None for c in ranked)
    blurred = np.stack([ndimage.gaussian_filter(x, 1.0) for x in sets[1]])
    ranked, _, _ = diagnose.image_differences(sets[0], blurred, calibration=calibration)
    assert ranked[0]["family"] == "sharpness" and ranked[0]["significant"]


def test_a_calibration_round_trips_through_json_and_refuses_other_files(tmp_path):
    noise = {"p": C.PropertyNoise(0.0, 0.1, 0.2, 5)}
    calibration = C.Calibration("x", "char", "demo", "replicate", noise, 4, 3.0, {"settings": {"rounds": 2}},
                                {"pairs": 3, "alarms": 0, "rate_upper_95": 0.63})
    path = str(tmp_path / "c.json")
    calibration_store.save(calibration, path)
    assert calibration_store.load(path) == calibration
    (tmp_path / "bad.json").write_text(json.dumps({"schema": "other"}))
    with pytest.raises(ValueError, match="not a calibration"):
        calibration_store.load(str(tmp_path / "bad.json"))
    with pytest.raises(ValueError, match="kind"):
        C.Calibration("x", "cnn", "demo", "replicate", noise, 4, 3.0, {})
    with pytest.raises(ValueError, match="training_noise"):
        C.PropertyNoise(0.0, 0.3, 0.2, 5)


def test_every_shipped_calibration_loads_and_is_measured_on_enough_runs():
    shipped = calibration_store.shipped()
    assert {c.kind for c in shipped} >= {"gan"}
    assert {(c.kind, c.pair_type) for c in shipped} >= {("gan", "replicate"), ("gan", "selection"), ("word", "replicate"),
                                                                 ("char", "replicate")}
    for c in shipped:
        # Replicate runs give many clean pairs (all pairs among them), selection pairs one each.
        assert c.degrees_of_freedom >= 9 and c.false_alarms["pairs"] >= (20 if c.pair_type == "replicate" else 10)
        settings = c.source["settings"]
        assert set(settings) - {"options"} == {"preset", "rounds", "clients_per_round", "noise_multiplier", "clip"}
        options = settings.get("options", {})
        assert all(calibration_store.MODEL_OPTIONS[k] != v for k, v in options.items())   # non-defaults only
        specs = [source["data"] for source in c.source.get("sources", [])] or [c.source["data"]]
        # At the defaults a calibration covers the tool's own synthetic data (the demo's); one of other
        # generator options, the data those options are for (the sharp generator: real FEMNIST writers).
        assert any(spec.startswith("synthetic-") for spec in specs) or options
        # Data none of its sources is gets widened (`training_noise_for`).
        assert sum(n.relative_noise is not None for n in c.properties.values()) >= len(c.properties) / 3
        assert all(n.relative_noise is not None for n in c.widened().properties.values())
        assert all(spec.split(":")[0] in c.source["description"] for spec in specs)
        # Properties added since (`calibrate --supplement`): each from 5 or more clean runs at these settings
        # (or 5 selection pairs), of every source, its clean pairs diagnosed as the supplemented calibration would.
        for added in c.source.get("supplements", []):
            assert added["properties"] and set(added["properties"]) <= set(c.properties), c.name
            assert added["degrees_of_freedom"] >= 4 and added["false_alarms"]["pairs"] >= 5, c.name
            for own in (c.by_source or {}).values():
                assert set(added["properties"]) <= set(own["properties"]), c.name
        # Bonferroni's, raised to its clean pairs' own where their tails are heavier (19 or more pairs).
        assert c.z_threshold == pytest.approx(C.threshold_with_clean_pairs(len(c.properties), c.false_alarms), abs=0.02)


# gan-demo-t4 was a known failure here until 2026-12-06 (2 of 19 left-out clean T4 pairs beyond Bonferroni's
# threshold): its clean pairs' tails are heavier than normal, and since then its threshold is their own 95% bound
# (`clean_pairs_threshold`). Its 40 pairs then alarm twice left out, as the bound allows; what the method does on
# clean pairs it never saw is `test_a_raised_threshold_was_tested_on_clean_pairs_it_never_saw`.
@pytest.mark.parametrize("name", sorted(c.name for c in calibration_store.shipped()))
def test_every_shipped_calibration_alarms_on_at_most_one_clean_pair_in_20(name):
    (c,) = [c for c in calibration_store.shipped() if c.name == name]
    assert c.false_alarms["alarms"] <= c.false_alarms["pairs"] / 20      # the issue's ≤ 1 in 20


def test_a_raised_threshold_was_tested_on_clean_pairs_it_never_saw():
    """Left out, a calibration whose threshold is its clean pairs' own can alarm only on its largest pairs: the
    count says little. So each such shipped calibration records how the method did on clean pairs a fit of it
    had not seen (`source.validation`): 8 or more, and their alarms must not reject a rate of 1 in 20
    (one-sided binomial at 5%). Measured (docs/analysis.md): 1 of 14 for gan-demo-t4's first 26 pairs, 1 of 20
    for the shipped 40 pairs; for gan-ema-replicate, 1 of 10 for a fit on its first 7 runs and 0 of 10 for the
    shipped 12; for gan-demo-t2, 3 of 22 pure pairs of a batch of runs held out from a fit on the other four
    batches, and 0 of 16 pairs sharing one primary trained after the shipped fit (3 of 38, p = 0.30); not
    refuted, which is weaker than shown."""
    raised = [c for c in calibration_store.shipped() if c.z_threshold > C.threshold_for(len(c.properties)) + 1e-9]
    assert [c.name for c in raised] == ["gan-demo-t2", "gan-demo-t4", "gan-ema-replicate"]   # heavier tails
    for c in raised:
        checks = c.source["validation"]
        pairs, alarms = sum(v["pairs"] for v in checks), sum(v["alarms"] for v in checks)
        assert pairs >= 8 and stats.binom.sf(alarms - 1, pairs, 0.05) >= 0.05


# Runs on one of a calibration's sources use that source's own noise: each source's pairs, left out of it.
@pytest.mark.parametrize("name, data", sorted((c.name, source["data"]) for c in calibration_store.shipped()
                                             for source in c.source.get("sources", [])))
def test_every_source_of_a_shipped_calibration_alarms_on_at_most_one_clean_pair_in_20(name, data):
    (c,) = [c for c in calibration_store.shipped() if c.name == name]
    (source,) = [s for s in c.source["sources"] if s["data"] == data]
    assert source["tested"] >= 20 and source["false_alarms"] <= source["tested"] / 20


def test_a_calibration_measured_on_other_data_says_so_and_on_the_same_source_does_not(tmp_path, monkeypatch):
    monkeypatch.setattr(calibration_store, "SHIPPED_DIR", str(tmp_path / "shipped"))
    (tmp_path / "shipped").mkdir()

    def run(name, data):
        config = {"gan": {"select": "random", "preset": "demo", "data": data},
                  "training": {"rounds": 200, "dp": {"clients_per_round": 50, "noise_multiplier": 0.3, "clip": 0.5}}}
        store.write_json(store.released(str(tmp_path / name), "config.json"), config)
        return str(tmp_path / name)

    synthetic_a, synthetic_b = run("s1", "synthetic-images:writers=30,seed=5"), run("s2", "synthetic-images:writers=30,seed=5")
    real_a, real_b = run("r1", "npz:/data/digits.npz"), run("r2", "npz:/data/digits.npz")
    settings = calibration_store.training_settings(real_a)
    noise = {"p": C.PropertyNoise(0.0, 0.1, 0.2, 10)}
    calibration = C.Calibration("rep", "gan", "demo", "replicate", noise, 9, 3.0,
                                {"settings": settings, "data": "synthetic-images:writers=100,seed=0"})
    calibration_store.save(calibration, str(tmp_path / "shipped" / "rep.json"))
    # Another synthetic population at the same settings: the calibration's own kind of data, no note.
    assert calibration_store.choose(None, "gan", "replicate", synthetic_a, synthetic_b) == (calibration, None)
    chosen, note = calibration_store.choose(None, "gan", "replicate", real_a, real_b)
    assert chosen == calibration.widened()          # still used, widened, with the note
    assert "measured on synthetic-images:writers=100,seed=0" in note and "npz:/data/digits.npz" in note
    assert "fedgen-debug calibrate" in note
    # A calibration file passed by hand is checked the same way, beside the settings' note.
    chosen, note = calibration_store.choose(str(tmp_path / "shipped" / "rep.json"), "gan", "replicate", real_a, real_b)
    assert chosen == calibration.widened() and "npz:/data/digits.npz" in note
    assert "relative noise times these samples' spread" in note
    # Measured on two sources (each apart, `calibration.envelope`): no note for either, one for other data,
    # another npz file too (a modeler's digits are not FEMNIST).
    both = dataclasses.replace(calibration, source={
        "settings": settings, "data": "npz:/data/digits.npz, synthetic-images:writers=9",
        "sources": [{"data": "npz:/data/digits.npz"}, {"data": "synthetic-images:writers=9"}]})
    assert calibration_store.data_note(both, (real_a, real_b)) is None
    assert calibration_store.data_note(both, (synthetic_a, synthetic_b)) is None
    assert "widest noise of its 2 sources" in calibration_store.data_note(both, (run("t", "jsonl:/t.jsonl"),))
    assert "npz:/other.npz" in calibration_store.data_note(both, (run("o", "npz:/other.npz"),))
    # Runs on one of a calibration's sources get that source's own noise, and no note.
    narrowed, note = calibration_store.for_runs(_two_source_calibration(), (run("f1", "npz:/femnist.npz"),
                                                                           run("f2", "npz:/femnist.npz")))
    assert note is None and narrowed.source["used"] == "npz:/femnist.npz"
    # One that does not say what it was measured on (made before 2026-12-04): no note, no error.
    calibration_store.save(dataclasses.replace(calibration, source={"settings": settings}),
                           str(tmp_path / "shipped" / "rep.json"))
    assert calibration_store.choose(None, "gan", "replicate", real_a, real_b)[1] is None


@pytest.fixture(scope="module")
def char_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("calibrate")
    runs = []
    for seed in range(3):
        runs.append(str(root / f"clean{seed}"))
        train_run(LMRun("char", "synthetic-text:users=12,seed=3", preset="test", rounds=2, vocab_size=200, seed=seed),
                  runs[-1])   # as train-lm trains it, in this process
    return runs


@pytest.fixture(scope="module")
def char_calibration(char_runs, tmp_path_factory):
    """`fedgen-debug calibrate` on the three runs, run once: the CLI test reads what it printed, the supplement
    test supplements the file it wrote (it ran the same command again)."""
    path = str(tmp_path_factory.mktemp("calibration") / "char.json")
    return path, run_cli("calibrate", *char_runs, "--out", path, "--samples", "100")


def test_calibrate_cli_then_diagnose_uses_it_and_none_switches_it_off(char_runs, char_calibration):
    path, result = char_calibration
    assert result.returncode == 0, result.stderr
    assert "2 degrees of freedom" in result.stdout and "false alarms" in result.stdout
    assert "4.42x its estimate at 2 degrees of freedom (twice the runs: 2.09x)" in result.stdout
    assert "0 clean pairs: 19 or more also bound the threshold" in result.stdout   # too few for their own
    calibration = calibration_store.load(path)
    assert calibration.kind == "char" and calibration.pair_type == "replicate" and calibration.false_alarms["pairs"] == 0
    assert calibration.source["data"] == "synthetic-text:users=12,seed=3"     # what it was measured on
    report = diagnose.diagnose(char_runs[0], char_runs[1], samples=100, calibration=path)
    assert report["calibration"]["calibrated"] and report["calibration"]["name"] == "char"
    assert report["calibration"]["note"] is None          # same settings, same source of data: nothing to say
    assert all("calibrated_z" in c for c in report["differences"])
    assert store.read_json(store.released(char_runs[1], store.DIAGNOSIS))["calibration"]["calibrated"]
    off = diagnose.diagnose(char_runs[0], char_runs[1], samples=100, calibration="none")
    assert not off["calibration"]["calibrated"] and "switched off" in off["calibration"]["note"]
    # The test preset has no shipped calibration: sampling noise only, and the report says how to make one.
    default = diagnose.diagnose(char_runs[0], char_runs[1], samples=100)
    assert not default["calibration"]["calibrated"] and "fedgen-debug calibrate" in default["calibration"]["note"]


def test_calibrate_supplement_adds_what_a_calibration_lacks_from_new_runs(char_runs, char_calibration, tmp_path):
    """A calibration measured before a property existed (one deleted from a real one) gets it from these runs,
    and only it; a shipped name is accepted in place of a file."""
    import pathlib

    full = pathlib.Path(char_calibration[0])
    assert char_calibration[1].returncode == 0, char_calibration[1].stderr
    older = json.loads(full.read_text())
    missing = sorted(older["properties"])[0]
    del older["properties"][missing]
    older["name"], older["z_threshold"] = "older", C.threshold_for(len(older["properties"]))
    (tmp_path / "older.json").write_text(json.dumps(older))
    out = tmp_path / "merged.json"
    result = run_cli("calibrate", *char_runs, "--supplement", str(tmp_path / "older.json"), "--out", str(out),
                     "--samples", "100")
    assert result.returncode == 0, result.stderr
    assert f"supplemented with {missing} from 3 runs" in result.stdout
    merged, measured = calibration_store.load(str(out)), calibration_store.load(str(full))
    assert merged.name == "older" and merged.properties == measured.properties
    assert merged.z_threshold == measured.z_threshold and merged.source["supplements"][0]["properties"] == [missing]
    done = run_main("calibrate", *char_runs, "--supplement", str(full), "--out", str(tmp_path / "x.json"))
    assert done.returncode != 0 and "no property" in done.stderr
    done = run_main("calibrate", *char_runs, "--supplement", "no-such-calibration", "--out", str(tmp_path / "y.json"))
    assert done.returncode != 0 and "gan-demo-t4" in done.stderr      # the shipped names are listed


def test_calibrate_refuses_too_few_runs_and_bad_pairs(char_runs, tmp_path):
    done = run_main("calibrate", *char_runs[:2], "--out", str(tmp_path / "c.json"))
    assert done.returncode == 2 and "3 or more replicate runs" in done.stderr and "Traceback" not in done.stderr
    done = run_main("calibrate", char_runs[0], "--pairs", "--out", str(tmp_path / "c.json"))
    assert done.returncode == 2 and "A:B" in done.stderr


def test_pairs_sharing_runs_name_each_run_once_so_a_left_out_pair_takes_its_runs_other_pairs_with_it(tmp_path):
    """Every A run against every B run: 2 × 2 runs make 4 clean pairs of 4 runs, not 8 runs. Listed as 8, the
    left-out pair (a1, b1) would have been calibrated by (a1, b2) and (a2, b1): its own runs."""
    from fedgen_debug.cli.diagnose_cmd import _parse_pairs

    a1, a2, b1, b2 = (str(tmp_path / n) for n in ("a1", "a2", "b1", "b2"))
    runs, pairs = _parse_pairs([f"{a}:{b}" for a in (a1, a2) for b in (b1, b2)][:3] + [f"{a2}/:{b2}"])
    assert runs == [a1, b1, b2, a2] and pairs == [(0, 1), (0, 2), (3, 1), (3, 2)]
    for bad, message in (([f"{a1}:{a1}"], "pairs a run with itself"), ([f"{a1}:{b1}", f"{a1}:{b1}"], "given twice")):
        with pytest.raises(ValueError, match=message):
            _parse_pairs(bad)


def test_calibrate_leaves_an_unhealthy_run_out_and_refuses_when_too_few_are_left(char_runs, tmp_path, monkeypatch):
    """A diverged auxiliary is not training noise (diagnose answers "cannot tell" for it): its run leaves
    the calibration, and the source says how many left."""
    import shutil

    from fedgen_debug.analysis import calibrate

    fourth = str(tmp_path / "clean3")
    shutil.copytree(char_runs[2], fourth)
    drawn = diagnose.lm_samples
    monkeypatch.setattr(diagnose, "lm_samples", lambda run, n, seed: [""] * n if run == char_runs[1] else drawn(run, n, seed))
    calibration = calibrate.build([*char_runs, fourth], None, "replicate", "c", samples=50)
    assert calibration.source["runs"] == 3 and calibration.source["left_out_unhealthy"] == 1
    assert calibration.degrees_of_freedom == 2 and calibration.source["pairs"] == 3
    with pytest.raises(ValueError, match="3 or more healthy replicate runs. Found 2: 1 of 3 runs are unhealthy"):
        calibrate.build(list(char_runs), None, "replicate", "c", samples=50)
    # Selection pairs: a pair with an unhealthy side leaves whole.
    with pytest.raises(ValueError, match="3 or more healthy selection pairs. Found 2"):
        calibrate.build([char_runs[0], char_runs[1], char_runs[2], fourth, char_runs[0], fourth],
                        [(0, 1), (2, 3), (4, 5)], "selection", "c", samples=50)


def test_calibrate_runs_of_two_sources_pairs_them_within_each_and_lists_both(char_runs, tmp_path, monkeypatch,
                                                                            capsys):
    import shutil

    from fedgen_debug.analysis import calibrate

    copies = []
    for i, run in enumerate(char_runs):
        copies.append(str(tmp_path / f"other{i}"))
        shutil.copytree(run, copies[-1])
    data = calibration_store.run_data
    monkeypatch.setattr(calibration_store, "run_data", lambda d: "jsonl:/other.jsonl" if d in copies else data(d))
    calibration = calibrate.build([*char_runs, *copies], None, "replicate", "two", samples=50)
    assert calibration.source["pairs"] == 6 and calibration.degrees_of_freedom == 2   # 3 + 3 pairs, not 15
    assert [(s["data"], s["runs"], s["pairs"], s["degrees_of_freedom"]) for s in calibration.source["sources"]] == [
        ("synthetic-text:users=12,seed=3", 3, 3, 2), ("jsonl:/other.jsonl", 3, 3, 2)]
    import argparse

    from fedgen_debug.cli import diagnose_cmd
    args = argparse.Namespace(runs=[*char_runs, *copies], pairs=False, out=str(tmp_path / "two.json"), name=None,
                              samples=50, seed=0, supplement=None)
    assert diagnose_cmd.run_calibrate(args) == 0
    printed = capsys.readouterr().out
    assert "synthetic-text:users=12,seed=3: 3 runs, 2 degrees of freedom, 0 of 0 left-out pairs alarmed" in printed
    assert "jsonl:/other.jsonl: 3 runs" in printed
    with pytest.raises(ValueError, match="two runs of one source of data"):
        calibrate.build([*char_runs, *copies], [(0, 3), (1, 4), (2, 5)], "selection", "two", samples=50)
    with pytest.raises(ValueError, match="Each source of data needs 3 or more"):
        calibrate.build([*char_runs, *copies[:2]], None, "replicate", "two", samples=50)


def test_replicates_read_by_two_primary_models_pair_only_within_each(char_runs, tmp_path):
    """A T1 GAN's class mix and confidence are its primary model's view: runs of one source read by two models
    are two groups of replicates (6 runs, 3 + 3 pairs, 4 degrees of freedom), not 15 pairs."""
    import shutil

    from fedgen_debug.analysis import calibrate

    copies = []
    for i, run in enumerate(char_runs):
        copies.append(str(tmp_path / f"keras{i}"))
        shutil.copytree(run, copies[-1])
        store.write_json(store.released(copies[-1], store.PRIMARY_INFO), {"model_file": "primary_model.keras",
                                                                         "source": "model.keras"})
    calibration = calibrate.build([*char_runs, *copies], None, "replicate", "two primaries", samples=50)
    assert (calibration.source["pairs"], calibration.degrees_of_freedom) == (6, 4)
    assert {tuple(d["pair"]) for d in calibration.false_alarms["details"]} <= {(0, 1), (0, 2), (1, 2), (3, 4), (3, 5),
                                                                                (4, 5)}


def test_healthy_only_reindexes_the_pairs_that_are_left():
    from fedgen_debug.analysis.calibrate import _healthy_only

    runs, values = ["r0", "r1", "r2", "r3", "r4", "r5"], ["v0", "v1", "v2", "v3", "v4", "v5"]
    kept = _healthy_only(runs, [values, list("abcdef")], [(0, 1), (2, 3), (4, 5), (1, 4)], {3}, "selection")
    assert kept == (["r0", "r1", "r4", "r5"], [["v0", "v1", "v4", "v5"], list("abef")], [(0, 1), (2, 3), (1, 2)])


def _fake_gan_run(root, name, select, rounds=150):
    config = {"gan": {"select": select, "preset": "demo"},
              "training": {"rounds": rounds, "dp": {"clients_per_round": 50, "noise_multiplier": 0.3, "clip": 0.5}}}
    run = str(root / name)
    store.write_json(store.released(run, "config.json"), config)
    return run


def test_the_sharp_generator_on_real_writers_gets_its_own_shipped_calibration(tmp_path):
    """README: writers with few images each train with `--cycle-client-data --gen-ema 0.9 --gen-upsample
    bilinear`; such runs at the demo preset are calibrated by the runs measured with those options (16 on real
    FEMNIST, 2026-12-05), the same runs without them by the preset's, on FEMNIST's own noise in both."""
    femnist = "npz:../shared/data/femnist_real_184_writers.npz"

    def run(name, **options):
        config = {"gan": {"select": "random", "preset": "demo", "data": femnist, **options},
                  "training": {"rounds": 200, "dp": {"clients_per_round": 50, "noise_multiplier": 0.3, "clip": 0.5}}}
        store.write_json(store.released(str(tmp_path / name), "config.json"), config)
        return str(tmp_path / name)

    sharp = {"cycle_client_data": True, "gen_ema": 0.9, "gen_upsample": "bilinear"}
    chosen, note = calibration_store.choose(None, "gan", "replicate", run("a", **sharp), run("b", **sharp))
    assert chosen.name == "gan-sharp-replicate" and note is None and chosen.degrees_of_freedom == 15
    chosen, note = calibration_store.choose(None, "gan", "replicate", run("c"), run("d"))
    assert chosen.name == "gan-demo-replicate" and note is None and chosen.source["used"] == femnist
    # One of the three options alone is another generator: neither calibration holds it. The EMA generator
    # alone has its own (12 runs on synthetic writers, 2026-12-06), which FEMNIST gets widened, with a note.
    chosen, note = calibration_store.choose(None, "gan", "replicate", run("e", gen_ema=0.9), run("f", gen_ema=0.9))
    assert chosen.name == "gan-ema-replicate" and chosen.degrees_of_freedom == 11
    assert "synthetic-images:writers=100,seed=0" in note
    chosen, note = calibration_store.choose(None, "gan", "replicate", run("g", gen_upsample="bilinear"),
                                            run("h", gen_upsample="bilinear"))
    assert chosen is None and "fedgen-debug calibrate" in note


def _selection_run(root, name, select, data, model=None, rounds=150, users=95.0, **options):
    """A GAN run's released config, primary model (the modeler's `model` file, else the stand-in) and DP user
    count, as `calibration_store.choose` reads them."""
    config = {"gan": {"select": select, "preset": "demo", "data": data, **options},
              "training": {"rounds": rounds, "dp": {"clients_per_round": 50, "noise_multiplier": 0.3, "clip": 0.5}}}
    run = str(root / name)
    store.write_json(store.released(run, "config.json"), config)
    info = {"model_file": "primary_model.keras", "source": model} if model else {"config": {}, "seed": 0}
    store.write_json(store.released(run, store.PRIMARY_INFO), info)
    store.write_json(store.released(run, store.POPULATION), {"users": users})
    return run


def _shipped(directory, name, pair_type, settings, selections=None):
    source = {"settings": settings, **({"selections": selections} if selections else {})}
    noise = {"p": C.PropertyNoise(0.0, 0.1, 0.2, 10)}
    calibration_store.save(C.Calibration(name, "gan", "demo", pair_type, noise, 9, 3.0, source), str(directory / f"{name}.json"))


def test_a_pair_gets_the_calibration_of_its_settings_kind_and_selections(tmp_path, monkeypatch):
    monkeypatch.setattr(calibration_store, "SHIPPED_DIR", str(tmp_path / "shipped"))
    (tmp_path / "shipped").mkdir()
    high, low = _fake_gan_run(tmp_path, "high", "by-user-accuracy:high"), _fake_gan_run(tmp_path, "low", "by-user-accuracy:low")
    correct, wrong = _fake_gan_run(tmp_path, "ok", "correct"), _fake_gan_run(tmp_path, "bad", "misclassified")
    settings = calibration_store.training_settings(high)
    assert settings == {"preset": "demo", "rounds": 150, "clients_per_round": 50, "noise_multiplier": 0.3, "clip": 0.5}
    assert calibration_store.choose(None, "gan", "selection", high, low)[0] is None          # nothing shipped
    _shipped(tmp_path / "shipped", "t4", "selection", settings, ["by-user-accuracy:high", "by-user-accuracy:low"])
    chosen, note = calibration_store.choose(None, "gan", "selection", high, low)
    assert chosen.name == "t4" and note is None
    # T2's pair has other offsets than T4's: not T4's calibration; a replicate one with a note, if any.
    assert calibration_store.choose(None, "gan", "selection", correct, wrong)[0] is None
    _shipped(tmp_path / "shipped", "rep", "replicate", settings)
    chosen, note = calibration_store.choose(None, "gan", "selection", correct, wrong)
    assert chosen.name == "rep" and "replicate pairs' training noise only" in note
    # Other settings (200 rounds): none of them, and the note says how to make one.
    other = _fake_gan_run(tmp_path, "long", "by-user-accuracy:low", rounds=200)
    chosen, note = calibration_store.choose(None, "gan", "replicate", other, _fake_gan_run(tmp_path, "l2", "by-user-accuracy:low", 200))
    assert chosen is None and "fedgen-debug calibrate" in note
    chosen, note = calibration_store.choose(None, "gan", "selection", high, other)
    assert chosen is None and "different settings" in note
    # A T4 pair at 200 rounds: replicate noise only (no replicate calibration there either), and the note says
    # where the shipped T4 calibration holds, so the pair can be trained there instead.
    high_200 = _fake_gan_run(tmp_path, "high200", "by-user-accuracy:high", rounds=200)
    chosen, note = calibration_store.choose(None, "gan", "selection", high_200, other)
    assert chosen is None and "t4 at rounds 150 (these runs: 200)" in note and "rep at" not in note
    assert "measured elsewhere" not in calibration_store.choose(None, "gan", "selection", correct, wrong)[1]
    assert calibration_store.choose("none", "gan", "selection", high, low) == (None, "calibration switched off "
                                                                                 "(--calibration none): sampling noise only")
    with pytest.raises(ValueError, match="for gan runs"):
        calibration_store.choose(str(tmp_path / "shipped" / "t4.json"), "char", "replicate", high, low)
    # An adaptive clip (no fixed S) is a setting of its own: no shipped calibration matches it.
    adaptive = str(tmp_path / "adaptive")
    config = store.read_config(high)
    config["training"]["dp"].update(clip=None, clip_quantile=0.5)
    store.write_json(store.released(adaptive, "config.json"), config)
    assert calibration_store.training_settings(adaptive)["clip"] == "adaptive:0.5"
    assert calibration_store.choose(None, "gan", "replicate", adaptive, adaptive)[0] is None
    # So is a generator of other options (sharper FEMNIST samples): a run at the defaults still matches.
    sharp = str(tmp_path / "sharp")
    config = store.read_config(high)
    config["gan"].update(gen_ema=0.9, gen_upsample="bilinear", cycle_client_data=True, d_step="fixed", init=None)
    store.write_json(store.released(sharp, "config.json"), config)
    assert calibration_store.training_settings(sharp) == {**settings, "options": {
        "gen_ema": 0.9, "gen_upsample": "bilinear", "cycle_client_data": True}}
    assert calibration_store.choose(None, "gan", "selection", sharp, sharp)[0] is None
    config["gan"].update(gen_ema=0.0, gen_upsample="transpose", cycle_client_data=False)
    store.write_json(store.released(sharp, "config.json"), config)
    assert calibration_store.choose(None, "gan", "selection", sharp, low)[0].name == "t4"


def test_model_options_defaults_are_the_runs_own():
    """`calibration_store.MODEL_OPTIONS` copies the run configs' defaults (importing them would pull in
    TensorFlow): a default that drifted would take every default run off the shipped calibrations."""
    import dataclasses

    from fedgen_debug.training.gan_run import GANRun
    from fedgen_debug.training.lm_run import LMRun

    gan = {f.name: f.default for f in dataclasses.fields(GANRun)}
    assert {name: gan[name] for name in calibration_store.MODEL_OPTIONS} == calibration_store.MODEL_OPTIONS
    assert {f.name: f.default for f in dataclasses.fields(LMRun)}["init"] == calibration_store.MODEL_OPTIONS["init"]


def test_a_selection_calibration_holds_only_for_its_data_and_primary_model(tmp_path, monkeypatch):
    """A T4 calibration's offsets are how the users its primary model chose on its data differ without a bug:
    a pair chosen by the modeler's own model, or on other data, gets the selection noise transferred to its
    replicate noise (`selection_transfer`), with a note saying why; without a replicate calibration to transfer
    to, nothing; a calibration of clean pairs chosen by that model holds."""
    monkeypatch.setattr(calibration_store, "SHIPPED_DIR", str(tmp_path / "shipped"))
    (tmp_path / "shipped").mkdir()
    synthetic, mnist = "synthetic-images:writers=100,seed=0", "npz:mnist.npz,background=black"

    def run(name, select, data=synthetic, model=None):
        return _selection_run(tmp_path, name, select, data, model, users=25.3)

    settings = calibration_store.training_settings(run("probe", "random"))
    sides = ["by-user-accuracy:high", "by-user-accuracy:low"]
    noise = {"p": C.PropertyNoise(0.0, 0.1, 0.2, 10)}
    for name, pair_type, source in [("t4", "selection", {"selections": sides, "data": synthetic}),
                                    ("rep", "replicate", {"data": synthetic})]:
        calibration_store.save(C.Calibration(name, "gan", "demo", pair_type, noise, 9, 3.0,
                                             {"settings": settings, **source}), str(tmp_path / "shipped" / f"{name}.json"))
    stand_in = run("high", sides[0]), run("low", sides[1])
    assert calibration_store.choose(None, "gan", "selection", *stand_in)[0].name == "t4"
    assert calibration_store.primary_identity(stand_in[0]) is None
    # Another seed of the same synthetic writers is the same source: t4 holds.
    assert calibration_store.choose(None, "gan", "selection", run("h2", sides[0], "synthetic-images:writers=50,seed=4"),
                                    run("l2", sides[1], "synthetic-images:writers=50,seed=4"))[0].name == "t4"
    own = run("high_own", sides[0], model="digits.keras"), run("low_own", sides[1], model="digits.keras")
    chosen, note = calibration_store.choose(None, "gan", "selection", *own)
    assert chosen.name == "t4 via rep" and chosen.pair_type == "selection" and not chosen.other_data
    assert "with the tool's stand-in CNN choosing the users; these runs use your model digits.keras" in note
    assert "selection noise transferred: rep's replicate noise" in note and "(predicted_class, confidence)" in note
    # Either order: the transfer's offsets are noise, the same both ways; t4 itself holds low-then-high with its
    # offsets negated.
    assert calibration_store.choose(None, "gan", "selection", *own[::-1])[0].name == "t4 via rep"
    chosen, note = calibration_store.choose(None, "gan", "selection", *stand_in[::-1])
    assert chosen.name == "t4" and chosen.source["selections"] == sides[::-1] and "other way round" in note
    other_data = run("high_mnist", sides[0], mnist), run("low_mnist", sides[1], mnist)
    chosen, note = calibration_store.choose(None, "gan", "selection", *other_data)
    assert chosen.name == "t4 via rep" and chosen.other_data and f"on {synthetic}; these runs train on {mnist}" in note
    # The modeler's calibration of clean pairs chosen by their model holds for their pairs, not the stand-in's.
    calibration_store.save(C.Calibration("t4-own", "gan", "demo", "selection", noise, 9, 3.0,
                                         {"settings": settings, "selections": sides, "data": synthetic,
                                          "primary": "digits.keras"}), str(tmp_path / "shipped" / "t4-own.json"))
    assert calibration_store.choose(None, "gan", "selection", *own)[0].name == "t4-own"
    assert calibration_store.choose(None, "gan", "selection", *stand_in)[0].name == "t4"
    # Without a replicate calibration either: nothing to transfer, sampling noise only, and the note still says why.
    (tmp_path / "shipped" / "rep.json").unlink()
    chosen, note = calibration_store.choose(None, "gan", "selection", *other_data)
    assert chosen is None and "no calibration holds for these runs" in note and "--pairs A:B" in note


def test_the_shipped_t4_noise_transfers_to_a_sharp_t4_pair_on_femnist_chosen_by_the_modelers_model(tmp_path):
    """README: writers with few images train T4 pairs at 150 rounds with the sharp options and, often, the
    modeler's own model. No clean T4 pairs were measured there: `gan-demo-t4`'s ratio to `gan-demo-replicate`
    on the synthetic writers (both at the demo preset) carries over to `gan-sharp-replicate`'s FEMNIST noise.
    At other rounds (no T4 calibration) or other options (no replicate calibration) nothing transfers."""
    femnist = "npz:/elsewhere/femnist_real_184_writers.npz"

    def run(name, select, rounds=150, users=40.2, **options):
        return _selection_run(tmp_path, name, select, femnist, "users.keras", rounds, users, **options)

    sharp = {"cycle_client_data": True, "gen_ema": 0.9, "gen_upsample": "bilinear"}
    pair = run("high", "by-user-accuracy:high", **sharp), run("low", "by-user-accuracy:low", **sharp)
    chosen, note = calibration_store.choose(None, "gan", "selection", *pair)
    assert chosen.name == "gan-demo-t4 via gan-sharp-replicate" and not chosen.other_data   # FEMNIST's own noise
    assert "gan-demo-t4 against gan-demo-replicate on synthetic-images:writers=100,seed=0: 1.0-4.1x" in note
    sharp_noise = calibration_store.named("gan-sharp-replicate").for_data([femnist])[0].properties["stroke_slant"]
    assert chosen.properties["stroke_slant"].training_noise_upper == pytest.approx(
        4.09 * sharp_noise.training_noise_upper, rel=0.01)
    assert "predicted_class" not in chosen.properties and chosen.z_threshold == pytest.approx(3.486, abs=1e-3)
    plain = run("high_plain", "by-user-accuracy:high"), run("low_plain", "by-user-accuracy:low")
    assert calibration_store.choose(None, "gan", "selection", *plain)[0].name == "gan-demo-t4 via gan-demo-replicate"
    at_200 = run("high_200", "by-user-accuracy:high", 200, **sharp), run("low_200", "by-user-accuracy:low", 200, **sharp)
    chosen, note = calibration_store.choose(None, "gan", "selection", *at_200)
    assert chosen.name == "gan-sharp-replicate" and "replicate pairs' training noise only" in note
    ema = run("high_ema", "by-user-accuracy:high", gen_ema=0.5), run("low_ema", "by-user-accuracy:low", gen_ema=0.5)
    assert calibration_store.choose(None, "gan", "selection", *ema)[0] is None
    # A side of a handful of users (a model right on nearly every image leaves few below the cut): not transferred.
    few = run("high_few", "by-user-accuracy:high", **sharp), run("low_few", "by-user-accuracy:low", users=9.6, **sharp)
    chosen, note = calibration_store.choose(None, "gan", "selection", *few)
    assert chosen is None and "a side holds about 10 users: under 20" in note


def test_every_a_run_against_every_b_run_estimates_the_noise_of_a_new_pair_and_the_offsets_error():
    """Selection pairs sharing runs (n A runs × n B runs): each run's own training noise is in n pairs, so the
    spread about the offset has n(n − 1) terms' worth, not n² − 1, and the offset's error is τ/√n, not τ/n. On
    simulated runs (τ²/2 a side, no sampling noise) the estimates are unbiased, and a disjoint design's are as
    before."""
    rng = np.random.default_rng(0)
    n, tau, draws = 4, 0.2, 4000
    pairs = [(a, n + b) for a in range(n) for b in range(n)]
    design = C.SelectionDesign.of(pairs)
    assert (design.spread_terms, design.offset_share) == (n * (n - 1), 1 / n)
    assert (C.SelectionDesign.disjoint(5).spread_terms, C.SelectionDesign.disjoint(5).offset_share) == (4, 1 / 5)
    assert C.replicate_degrees_of_freedom(pairs) - 1 == 2 * n - 2
    variances, offsets = [], []
    for _ in range(draws):
        runs = rng.normal(0.0, tau / math.sqrt(2), 2 * n)
        effects = [0.3 + runs[a] - runs[b] for a, b in pairs]
        noise, _ = C.estimate_noise([[_row(e, 0.0)] for e in effects], "selection", 2 * n - 2, design)
        variances.append(noise["p"].training_noise ** 2)
        offsets.append(noise["p"].offset)
    assert np.mean(variances) == pytest.approx(tau ** 2, rel=0.05)
    assert np.std(offsets) == pytest.approx(tau / math.sqrt(n), rel=0.05)
    assert noise["p"].offset_error == pytest.approx(noise["p"].training_noise / math.sqrt(n))
    naive, _ = C.estimate_noise([[_row(e, 0.0)] for e in effects], "selection")   # as if 16 disjoint pairs
    assert naive["p"].training_noise < noise["p"].training_noise and naive["p"].offset_error < noise["p"].offset_error


def test_the_shipped_t2_calibration_holds_for_its_pairs_and_transfers_to_the_modelers_model(tmp_path):
    """T2 (correctly classified against misclassified examples) at 150 rounds: `gan-demo-t2` for the stand-in
    CNN on the synthetic writers (484 pairs of 44 runs, each A run against each B run: 42 degrees of freedom);
    the modeler's model on FEMNIST with the sharp options gets its noise transferred to `gan-sharp-replicate`'s;
    a T4 pair never gets T2's, nor a T2 pair T4's."""
    synthetic, femnist = "synthetic-images:writers=100,seed=0", "npz:/elsewhere/femnist_real_184_writers.npz"
    sharp = {"cycle_client_data": True, "gen_ema": 0.9, "gen_upsample": "bilinear"}

    def run(name, select, data=synthetic, model=None, **options):
        return _selection_run(tmp_path, name, select, data, model, **options)

    t2 = calibration_store.named("gan-demo-t2")
    assert (t2.pair_type, t2.degrees_of_freedom, t2.source["runs"], t2.source["pairs"]) == ("selection", 42, 44, 484)
    assert t2.source["selections"] == ["by-example:correct", "by-example:misclassified"]
    pair = run("ok", "by-example:correct"), run("bad", "by-example:misclassified")
    chosen, note = calibration_store.choose(None, "gan", "selection", *pair)
    assert chosen.name == "gan-demo-t2" and note is None
    own = (run("ok_own", "by-example:correct", femnist, "users.keras", **sharp),
           run("bad_own", "by-example:misclassified", femnist, "users.keras", **sharp))
    chosen, note = calibration_store.choose(None, "gan", "selection", *own)
    assert chosen.name == "gan-demo-t2 via gan-sharp-replicate" and "gan-demo-t2 against gan-demo-replicate" in note
    t4 = run("high", "by-user-accuracy:high"), run("low", "by-user-accuracy:low")
    assert calibration_store.choose(None, "gan", "selection", *t4)[0].name == "gan-demo-t4"
    mixed = run("high_mixed", "by-user-accuracy:high"), pair[1]
    assert calibration_store.choose(None, "gan", "selection", *mixed)[0] is None   # two selections nobody measured


def test_a_selection_pair_given_b_first_gets_its_calibration_with_the_offsets_negated(tmp_path):
    """`diagnose LOW HIGH` (T4) or `diagnose MISCLASSIFIED CORRECT` (T2) is the shipped calibration's pair the other
    way round: the same clean pairs' noise, each offset negated but the class mix's distance, so every property's
    |calibrated z| is the pair's in the measured order (before: the wider transferred noise)."""
    from fedgen_debug.data import client_data as cd
    from fedgen_debug.data import spec as data_spec

    synthetic = "synthetic-images:writers=100,seed=0"
    correct = _selection_run(tmp_path, "ok", "by-example:correct", synthetic)
    wrong = _selection_run(tmp_path, "bad", "by-example:misclassified", synthetic)
    t2, _ = calibration_store.choose(None, "gan", "selection", correct, wrong)
    reversed_, note = calibration_store.choose(None, "gan", "selection", wrong, correct)
    assert reversed_.name == "gan-demo-t2" and "other way round" in note and "via" not in reversed_.name
    assert reversed_.source["selections"] == ["by-example:misclassified", "by-example:correct"]
    assert reversed_.properties["predicted_class"] == t2.properties["predicted_class"]
    moved = [n for n in t2.properties if n != "predicted_class"]
    assert any(t2.properties[n].offset != 0.0 for n in moved)
    for name in moved:
        mine, theirs = reversed_.properties[name], t2.properties[name]
        assert mine.offset == -theirs.offset
        assert (mine.training_noise_upper, mine.offset_error) == (theirs.training_noise_upper, theirs.offset_error)
    assert (reversed_.z_threshold, reversed_.degrees_of_freedom) == (t2.z_threshold, t2.degrees_of_freedom)
    # A file given with --calibration is put in order too.
    path = str(tmp_path / "t2.json")
    calibration_store.save(t2, path)
    given, note = calibration_store.choose(path, "gan", "selection", wrong, correct)
    assert given.properties == reversed_.properties and "other way round" in note
    assert calibration_store.choose(path, "gan", "selection", correct, wrong)[0].properties == t2.properties
    with pytest.raises(ValueError, match="only a selection calibration"):
        calibration_store.named("gan-demo-replicate").other_order()
    # Any two sample sets: every property's calibrated z in one order is minus the other's (the class mix's equal).
    data = data_spec.load_client_data("synthetic-images:writers=30,seed=5")
    pool = np.concatenate([cd.client_numpy(data, c)["pixels"] for c in sorted(data.client_ids)])
    a, b = image_properties.as_unit_images(pool[0::2][:200]), image_properties.as_unit_images(pool[1::2][:200])
    b = np.clip(b * 1.3, 0.0, 1.0)
    logits = np.random.default_rng(0).normal(size=(2, 200, 10))
    forward, _, _ = diagnose.image_differences(a, b, logits[0], logits[1], t2)
    backward, _, _ = diagnose.image_differences(b, a, logits[1], logits[0], reversed_)
    z_backward = {c["property"]: c["calibrated_z"] for c in backward}
    assert len(forward) == len(backward) > 30
    for c in forward:
        sign = 1.0 if c["property"] == "predicted_class" else -1.0
        assert z_backward[c["property"]] == pytest.approx(sign * c["calibrated_z"], abs=1e-9), c["property"]
    assert [c["property"] for c in forward if c["significant"]] == [c["property"] for c in backward if c["significant"]]


def test_noise_estimates_by_hand_for_the_class_mix_and_the_degrees_of_freedom_of_two_sources():
    """The categories branch of `estimate_noise`, the per-source degrees of freedom, the sign of a difference
    against no noise and the alarm rate's bound, each a value worked out by hand."""
    rows = [[{"property": "c", "kind": "categories", "difference": e, "difference_standard_error": 0.0}]
            for e in (0.1, 0.2, 0.3)]
    noise = C.estimate_noise(rows, "replicate")[0]["c"]
    assert math.isclose(noise.offset, 0.2) and math.isclose(noise.training_noise, 0.1)
    # The 95% upper bound of τ on n − 1 = 2 degrees of freedom: sqrt(Σ(e − ē)² / χ²₂(0.05)).
    assert math.isclose(noise.training_noise_upper, math.sqrt(0.02 / stats.chi2.ppf(0.05, 2)))
    assert math.isclose(noise.offset_error, 0.1 / math.sqrt(3))
    # Two sources of 3 and 4 replicate runs: the calibration claims the smaller source's 2 degrees of freedom.
    sources = ["A"] * 3 + ["B"] * 4
    by_pair = {pair: [{"property": "p", "kind": "mean", "difference": 0.1 * (k % 3) - 0.1,
                       "difference_standard_error": 0.0}]
               for k, pair in enumerate(C.all_pairs(7, sources))}
    assert C.estimate_by_source(by_pair, "replicate", sources)[1] == 2
    # A difference where the training noise and the sampling error are both zero keeps its sign.
    row = {"property": "p", "kind": "mean", "difference": -0.5, "difference_standard_error": 0.0}
    assert C.calibrated_z(row, C.PropertyNoise(0.0, 0.0, 0.0, 10)) == -1000.0
    # No alarm in 10 pairs: the rate's 95% upper bound is 1 − 0.05^(1/10).
    assert math.isclose(C._rate_upper(0, 10), 1 - 0.05 ** 0.1)
