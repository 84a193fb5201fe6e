"""The contract of `device.transform.DeviceTransform`, run over every transform of a device's data: bugs,
a rollout's stage, canary insertion (the selectors' contract test is the model)."""

import dataclasses
import functools

import numpy as np
import pytest

from fedgen_debug.data import client_data as cd
from fedgen_debug.data.text import tokenize
from fedgen_debug.device.canaries import ThakkarInsertion
from fedgen_debug.device.canary_specs import generate_canaries, parse_canaries
from fedgen_debug.device.catalog import BUGS, parse_bug
from fedgen_debug.device.image_faults import IMAGE_FAULTS
from fedgen_debug.device.pixels import PixelInversionBug
from fedgen_debug.device.rollout import Rollout
from fedgen_debug.device.text_faults import TEXT_FAULTS
from fedgen_debug.device.tokenization import TokenizationBug
from fedgen_debug.runs.secret import RunSecret

DEVICES = 24


def _images(devices=DEVICES):
    rng = np.random.default_rng(0)
    return cd.ArrayClientData({f"d{i:02d}": cd.image_examples(rng.uniform(0.2, 0.6, (3, 28, 28)).astype(np.float32),
                                                               [i % 10, 1, 2]) for i in range(devices)})


def _text(devices=DEVICES):
    return cd.ArrayClientData({f"u{i:02d}": cd.text_examples([f"Good day number {i}, friend.", "Hello there you",
                                                              f"word{i} again and again"]) for i in range(devices)})


def _text_for_faults(devices=DEVICES):
    """Sentences every text fault changes: entities, non-ASCII, numbers, quotes, long words, > 5 words."""
    sentences = [f"Tom & Jerry's café costs {1000 + i}.50 \"dollars\", friend." for i in range(devices)]
    return cd.ArrayClientData({f"u{i:02d}": cd.text_examples([sentences[i], "Good day to you, my wonderful neighbour.",
                                                              f"word{i} again and again"]) for i in range(devices)})


def _canaries():
    (config,) = parse_canaries("thakkar:p_u=0.5,p_e=0.5,count=1")
    return tuple(generate_canaries([config], "word", [f"w{i}" for i in range(20)], seed=0, controls=0))


TRANSFORMS = {
    "invert": (lambda: PixelInversionBug(0.5, seed=1), _images),
    "concat": (lambda: TokenizationBug(0.5, seed=1), _text),
    "rollout-invert": (lambda: Rollout("invert", ((1, 0.5),), seed=3).at(1), _images),
    "rollout-concat": (lambda: Rollout("concat", ((1, 0.5),), seed=3).at(1), _text),
    "thakkar-canaries": (lambda: ThakkarInsertion(_canaries(), RunSecret(7)), _text),
    **{f"fault-{name}": (functools.partial(cls, 0.5, seed=1), _images) for name, cls in IMAGE_FAULTS.items()},
    **{f"fault-{name}": (functools.partial(cls, 0.5, seed=1), _text_for_faults) for name, cls in TEXT_FAULTS.items()},
}


def _arrays(client_data, client_id):
    return cd.client_numpy(client_data, client_id)


def _same(a, b) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.fixture(params=sorted(TRANSFORMS))
def case(request):
    make, data = TRANSFORMS[request.param]
    return make(), data()


def test_frozen(case):
    transform, _ = case
    field = dataclasses.fields(transform)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(transform, field, getattr(transform, field))


def test_keeps_ids_structure_and_example_counts(case):
    transform, data = case
    after = transform.apply(data)
    assert list(after.client_ids) == list(data.client_ids)
    assert after.element_type_structure == data.element_type_structure
    for cid in data.client_ids:
        a, b = _arrays(data, cid), _arrays(after, cid)
        assert {k: (v.shape, v.dtype) for k, v in a.items()} == {k: (v.shape, v.dtype) for k, v in b.items()}


def test_changes_exactly_the_affected_devices(case):
    transform, data = case
    after, affected = transform.apply(data), transform.affected_devices(data)
    assert 0 < len(affected) < DEVICES, affected
    for cid in data.client_ids:
        assert _same(_arrays(data, cid), _arrays(after, cid)) == (cid not in affected), cid


def test_deterministic_and_the_dataset_matches_the_arrays(case):
    transform, data = case
    once, twice = transform.apply(data), transform.apply(data)
    for cid in data.client_ids[:6]:
        assert _same(_arrays(once, cid), _arrays(twice, cid))
        from_dataset = list(once.create_tf_dataset_for_client(cid).batch(100).as_numpy_iterator())[0]
        assert _same(dict(from_dataset), dict(_arrays(once, cid)))


def test_the_fix_is_the_identity(case):
    transform, data = case
    fixed = transform.as_fixed()
    assert fixed.affected_devices(data) == frozenset()
    after = fixed.apply(data)
    assert all(_same(_arrays(data, cid), _arrays(after, cid)) for cid in data.client_ids)


@pytest.mark.parametrize("name", [n for n, (make, _) in sorted(TRANSFORMS.items()) if make().local])
def test_a_local_transform_does_not_depend_on_the_other_devices(name):
    make, data_fn = TRANSFORMS[name]
    transform, data = make(), data_fn()
    some = cd.ArrayClientData({cid: _arrays(data, cid) for cid in data.client_ids[::3]})
    whole, part = transform.apply(data), transform.apply(some)
    assert all(_same(_arrays(whole, cid), _arrays(part, cid)) for cid in some.client_ids)


def test_only_the_papers_exact_share_inversion_is_not_local():
    assert sorted(n for n, (make, _) in TRANSFORMS.items() if not make().local) == ["invert"]


@pytest.mark.parametrize("name", sorted(BUGS))
def test_catalog_bugs_validate_their_fraction_alike(name):
    modality, cls = BUGS[name]
    with pytest.raises(ValueError, match=r"fraction must be in \[0, 1\]. Found 1.5."):
        cls(1.5)
    with pytest.raises(ValueError, match=r"fraction must be in \[0, 1\]. Found nan."):
        cls(float("nan"))
    data = _images() if modality == "images" else _text()
    assert cls(0.0, seed=3).affected_devices(data) == frozenset()
    assert parse_bug(f"{name}:0.25", modality, seed=4) == cls(0.25, seed=4)


def test_parse_bug_names_the_problem():
    with pytest.raises(ValueError, match="bug must be one of invert, concat"):
        parse_bug("smudge:0.5", "images")
    with pytest.raises(ValueError, match="concat is a bug of text data; for images use invert"):
        parse_bug("concat:0.5", "images")
    with pytest.raises(ValueError, match="a bug looks like invert:0.5"):
        parse_bug("invert", "images")
    with pytest.raises(ValueError, match="must be a number"):
        parse_bug("invert:half", "images")


def test_the_tokenization_bug_as_text_tokenizes_as_the_buggy_tokenizer():
    """The bug written into the devices' text (GLUE) and the device's own buggy tokenizer agree exactly."""
    bug, data = TokenizationBug(0.5, seed=2), _text()
    after = bug.apply(data)
    glued = 0
    for cid in data.client_ids:
        sentences = [t.decode() for t in _arrays(data, cid)["text"]]
        assert [tokenize(t.decode()) for t in _arrays(after, cid)["text"]] == bug.tokenize_client(cid, sentences)
        glued += sum(any(" " in token for token in tokenize(t.decode())) for t in _arrays(after, cid)["text"])
    assert glued > 0
    assert tokenize("Good day to you.") == ["good", "day", "to", "you", "."]


def test_runs_take_a_catalog_fault_as_their_fault_and_the_papers_bug_as_their_fraction():
    from fedgen_debug.cli.bug_arg import bug_settings
    from fedgen_debug.training.gan_run import GANRun
    from fedgen_debug.training.lm_run import LMRun

    assert bug_settings("invert:0.5", "images") == {"bug_fraction": 0.5}
    assert bug_settings("rotate:0.5,degrees=180", "images") == {"fault": "rotate:0.5,degrees=180"}
    assert bug_settings("entities:0.25", "text") == {"fault": "entities:0.25"}
    with pytest.raises(ValueError, match="--bug: rotate is a bug of image data; for text use concat"):
        bug_settings("rotate:0.5", "text")
    run = GANRun("synthetic-images:writers=4", "random", fault="blur:0.5", seed=3)
    assert run.device_fault() == parse_bug("blur:0.5", "images", seed=3) and run.to_json()["fault"] == "blur:0.5"
    assert "fault" not in GANRun("synthetic-images:writers=4", "random").to_json()   # saved configs unchanged
    with pytest.raises(ValueError, match="invert is the run's bug_fraction"):
        GANRun("synthetic-images:writers=4", "random", fault="invert:0.5")
    with pytest.raises(ValueError, match="concat is a bug of text data"):
        GANRun("synthetic-images:writers=4", "random", fault="concat:0.5")
    assert LMRun("char", "synthetic-text:users=4", fault="truncate:1.0,length=3").device_fault().length == 3


def test_train_lm_trains_on_the_text_the_fault_left(tmp_path, monkeypatch):
    """The fault reaches what the devices tokenize (after the vocabulary, built from clean text)."""
    from fedgen_debug.experiments import lm
    from fedgen_debug.training.lm_run import LMRun

    seen = {}
    original = lm.prepare_devices

    def capture(run, client_data, vocab, sentences=None):
        seen.update({cid: [t.decode() for t in cd.client_numpy(client_data, cid)["text"]]
                     for cid in client_data.client_ids})
        return original(run, client_data, vocab, sentences)

    monkeypatch.setattr(lm, "prepare_devices", capture)
    lm.train_lm(LMRun("char", "synthetic-text:users=6,seed=2", preset="test", rounds=1, clients_per_round=2,
                      fault="truncate:1.0,length=3"), str(tmp_path / "run"))
    assert seen and all(len(s.split()) <= 3 for sentences in seen.values() for s in sentences)
