"""Canaries: the spec grammar, the published grids, distinct seeded secrets, and both insertion designs
(Thakkar's p_u / p_e rates checked statistically; Ramaswamy's devices exactly)."""

import math

import numpy as np
import pytest

from fedgen_debug.device.canaries import ThakkarInsertion, ramaswamy_devices
from fedgen_debug.device.canary_specs import (CHAR_ALPHABET, InsertionConfig, generate_canaries, parse_canaries,
                                              space_size)
from fedgen_debug.runs.secret import RunSecret
from fedgen_debug.spec_grammar import split_spec


def test_spec_grammar_splits_name_positional_and_settings():
    parts = split_spec("ramaswamy:n_u=16,n_e=200")
    assert (parts.name, parts.positional, parts.settings_dict()) == ("ramaswamy", (), {"n_u": "16", "n_e": "200"})
    with pytest.raises(ValueError, match="n_u is given twice"):
        split_spec("ramaswamy:n_u=1,n_u=2")


def test_default_is_both_published_grids():
    configs = parse_canaries("default")
    assert len(configs) == 18
    assert {(c.n_u, c.n_e) for c in configs if c.design == "ramaswamy"} == {
        (u, e) for u in (1, 4, 16) for e in (1, 14, 200)}
    assert {(c.p_u, c.p_e) for c in configs if c.design == "thakkar"} == {
        (u, e) for u in (0.01, 0.03, 0.1) for e in (0.01, 0.1, 1.0)}
    assert all(c.count == 3 for c in configs)


def test_single_configs_and_combinations():
    (one,) = parse_canaries("ramaswamy:n_u=16,n_e=200")
    assert (one.n_u, one.n_e, one.count, one.label) == (16, 200, 3, "n_u=16,n_e=200")
    both = parse_canaries("thakkar:p_u=0.02,p_e=0.1,count=5+ramaswamy:n_u=4,n_e=14")
    assert [(c.design, c.label, c.count) for c in both] == [("thakkar", "p_u=0.02,p_e=0.1", 5),
                                                          ("ramaswamy", "n_u=4,n_e=14", 3)]


@pytest.mark.parametrize("spec, message", [
    ("bogus", "unknown canary design 'bogus'"),
    ("thakkar:p_u=0.5", "give both p_u and p_e"),
    ("thakkar:p_u=0,p_e=0.1", r"p_u must be in \(0, 1\]. Found 0.0"),
    ("ramaswamy:n_u=2,n_e=201", r"n_e must be in \[1, 200\]. Found 201"),
    ("ramaswamy:n_u=two,n_e=1", "n_u must be a number"),
    ("ramaswamy:n_u=1,n_e=1,p_u=0.1", "unknown setting 'p_u'"),
    ("ramaswamy:n_u=1,n_e=1+ramaswamy:n_u=1,n_e=1", "given twice"),
])
def test_bad_specs_say_what_is_wrong(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_canaries(spec)


def test_canaries_are_distinct_seeded_and_disjoint_from_controls():
    words = [f"w{i}" for i in range(50)]
    configs = parse_canaries("default")
    canaries = generate_canaries(configs, "word", words, seed=3, controls=10)
    assert len(canaries) == 54 + 10
    assert sum(c.config is None for c in canaries) == 10
    assert len({c.prefix for c in canaries}) == len({c.suffix for c in canaries}) == len(canaries)
    assert all(len(c.prefix) == 2 and len(c.suffix) == 3 and set(c.prefix + c.suffix) <= set(words) for c in canaries)
    assert canaries == generate_canaries(configs, "word", words, seed=3, controls=10)
    assert canaries != generate_canaries(configs, "word", words, seed=4, controls=10)
    assert canaries[0].text == " ".join(canaries[0].prefix + canaries[0].suffix)


def test_char_canaries_are_eight_letters_and_never_a_forbidden_word():
    (config,) = parse_canaries("ramaswamy:n_u=1,n_e=1,count=30")
    canaries = generate_canaries([config], "char", CHAR_ALPHABET, seed=0, controls=5, forbidden={"abcdefgh"})
    assert all(len(c.text) == 8 and c.text.isalpha() and c.text != "abcdefgh" for c in canaries)
    assert space_size(26, 6) == 26.0 ** 6


def test_too_many_canaries_for_the_prefix_space_is_refused():
    with pytest.raises(ValueError, match="distinct prefixes"):
        generate_canaries(parse_canaries("ramaswamy:n_u=1,n_e=1,count=5"), "word", ["a", "b"], seed=0, controls=0)


def test_thakkar_insertion_rates_match_p_u_and_p_e():
    (config,) = parse_canaries("thakkar:p_u=0.2,p_e=0.3,count=1")
    (canary,) = generate_canaries([config], "word", [f"w{i}" for i in range(20)], seed=0, controls=0)
    insertion = ThakkarInsertion((canary,), RunSecret(11))
    users, per_user = 4000, 20
    sharers, replaced = 0, 0
    for u in range(users):
        out = insertion.device_examples(f"user{u}", [f"sentence {k}" for k in range(per_user)])
        sharers += insertion_selected(insertion, f"user{u}")
        replaced += sum(s == canary.text for s in out)
    # Binomial(4000, 0.2): sd 25.3; 4σ bounds. Replacements among sharers' sentences: p_e = 0.3.
    assert abs(sharers - 0.2 * users) < 4 * math.sqrt(users * 0.2 * 0.8)
    n = sharers * per_user
    assert abs(replaced / n - 0.3) < 4 * math.sqrt(0.3 * 0.7 / n)


def insertion_selected(insertion, client_id):
    """Whether the device drew 'sharer' (the same draw `apply` makes first)."""
    (canary,) = insertion.canaries
    return insertion.secret.rng("canary-insertion", client_id, canary.canary_id).random() < canary.config.p_u


def test_thakkar_insertion_depends_on_the_secret_and_the_device_only():
    (config,) = parse_canaries("thakkar:p_u=0.5,p_e=1.0,count=1")
    (canary,) = generate_canaries([config], "word", [f"w{i}" for i in range(20)], seed=0, controls=0)
    sentences = ["a b c"] * 5
    picks = {s: [ThakkarInsertion((canary,), RunSecret(s)).device_examples(f"u{u}", sentences)[0] == canary.text
                 for u in range(64)] for s in (1, 2)}
    assert picks[1] == [ThakkarInsertion((canary,), RunSecret(1)).device_examples(f"u{u}", sentences)[0] == canary.text
                        for u in range(64)]
    assert picks[1] != picks[2]  # another secret, other sharers: who shares is not derivable from --seed


def test_ramaswamy_devices_hold_n_e_copies_and_public_filler():
    configs = parse_canaries("ramaswamy:n_u=2,n_e=14,count=1+ramaswamy:n_u=1,n_e=200,count=1+thakkar:p_u=0.1,p_e=0.1,count=1")
    canaries = generate_canaries(configs, "word", [f"w{i}" for i in range(30)], seed=0, controls=2)
    devices = ramaswamy_devices(canaries, ["public one", "public two"], np.random.default_rng(0))
    assert list(devices) == ["canary-device-0000", "canary-device-0001", "canary-device-0002"]
    first = canaries[0].text
    for cid in ("canary-device-0000", "canary-device-0001"):
        assert len(devices[cid]) == 200 and devices[cid].count(first) == 14
        assert set(devices[cid]) - {first} <= {"public one", "public two"}
    assert devices["canary-device-0002"] == [canaries[1].text] * 200
    with pytest.raises(ValueError, match="public examples"):
        ramaswamy_devices(canaries, [], np.random.default_rng(0))


def test_insertion_config_validates_its_design():
    with pytest.raises(ValueError, match="thakkar insertion takes p_u and p_e"):
        InsertionConfig("thakkar", p_u=0.1, p_e=0.1, n_u=2)
