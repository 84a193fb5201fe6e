"""Faults outside the catalog, written into copies of data files (`evaluation/jsonl_outside_faults.py`,
`evaluation/npz_outside_faults.py`): which users, which lines or images, what."""

import importlib.util
import os

import numpy as np
import pytest

_EVALUATION = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "evaluation")


def _script(name: str):
    """An `evaluation/` script as a module (the folder is not a package)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(_EVALUATION, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def outside():
    return _script("jsonl_outside_faults")


def test_every_line_of_the_chosen_users_changes_and_no_other(outside):
    rows = [{"client_id": u, "text": t} for u in ("a", "b", 3, "d") for t in ("one idea.", "more coffee")]
    changed, hit = outside.corrupt(rows, "leet", 0.5, seed=1)
    assert len(hit) == 2 and hit <= {"a", "b", "3", "d"}
    for before, after in zip(rows, changed):
        expected = before["text"].translate(str.maketrans("eoai", "3041")) if str(before["client_id"]) in hit else before["text"]
        assert after == {**before, "text": expected}
    assert changed[0]["text"] in ("one idea.", "0n3 1d34.")
    signed, _ = outside.corrupt(rows, "signature", 1.0, seed=1)
    assert all(r["text"].endswith(" -- Sent from my phone") for r in signed)
    assert outside.corrupt(rows, "leet", 0.0, seed=1)[0] == rows


def test_markup_form_encoding_and_emoji_write_what_a_pipeline_would(outside):
    rows = [{"client_id": "a", "text": "to be or not."}]
    written = {fault: outside.corrupt(rows, fault, 1.0, seed=0)[0][0]["text"] for fault in ("html", "form_encoded", "emoji")}
    assert written == {"html": "<p>to be or not.</p>", "form_encoded": "to+be+or+not.", "emoji": "to be or not. \U0001F642"}


def test_invisible_and_look_alike_characters_are_written_where_a_pipeline_would_leave_them(outside):
    rows = [{"client_id": "a", "text": "a noble kingdom."}]
    written = {fault: outside.corrupt(rows, fault, 1.0, seed=0)[0][0]["text"]
               for fault in ("bom", "zwsp", "homoglyph", "soft_hyphen")}
    assert written == {"bom": "\ufeffa noble kingdom.", "zwsp": "a\u200b noble\u200b kingdom.\u200b",
                       "homoglyph": "\u0430 n\u043ebl\u0435 kingd\u043em.", "soft_hyphen": "a noble kin\u00adgdom."}


def test_a_play_becomes_one_user_per_speaker_one_line_per_sentence(outside, tmp_path):
    play = tmp_path / "play.txt"
    play.write_text("First Citizen:\nBefore we proceed. Hear me\nspeak!\n\nAll:\nSpeak, speak.\n", encoding="utf-8")
    rows = outside.play_to_jsonl(str(play))
    assert rows == [{"client_id": "All", "text": "Speak, speak."},
                    {"client_id": "First Citizen", "text": "Before we proceed."},
                    {"client_id": "First Citizen", "text": "Hear me speak!"}]


def test_unknown_faults_and_fractions_are_refused(outside):
    with pytest.raises(ValueError, match="fault must be one of"):
        outside.corrupt([], "rot13", 0.5, seed=0)
    with pytest.raises(ValueError, match="fraction"):
        outside.corrupt([], "leet", 1.5, seed=0)


# Image faults outside the catalog (`evaluation/npz_outside_faults.py`).
@pytest.fixture
def image_outside():
    return _script("npz_outside_faults")


def _bar_images(n_per_user: int = 2):
    """uint8, white background: a dark vertical bar in columns 12-15, rows 4-23, on three users' images."""
    image = np.full((28, 28), 255, np.uint8)
    image[4:24, 12:16] = 0
    client_ids = np.repeat(np.array(["u0", "u1", "u2"]), n_per_user)
    return np.stack([image] * len(client_ids)), client_ids


def test_image_faults_change_only_the_chosen_users_images_in_the_files_dtype(image_outside):
    pixels, client_ids = _bar_images()
    changed, hit = image_outside.corrupt(pixels, client_ids, "ruled", 2 / 3, seed=3)
    assert len(hit) == 2 and changed.dtype == np.uint8 and changed.shape == pixels.shape
    for image, before, user in zip(changed, pixels, client_ids):
        if user in hit:   # row 21: half grey where it was white, the bar's ink stays ink
            assert list(image[21, :12]) == [128] * 12 and list(image[21, 12:16]) == [0] * 4
            assert np.array_equal(np.delete(image, 21, axis=0), np.delete(before, 21, axis=0))
        else:
            assert np.array_equal(image, before)
    assert np.array_equal(image_outside.corrupt(pixels, client_ids, "shear", 0.0, seed=3)[0], pixels)


def test_each_image_fault_moves_the_ink_as_it_says(image_outside):
    pixels, client_ids = _bar_images(1)
    ink = lambda image: image < 128   # noqa: E731
    squashed = image_outside.corrupt(pixels, client_ids, "squash", 1.0, seed=0)[0][0]
    columns = np.flatnonzero(ink(squashed).any(axis=0))
    assert list(columns) == [13, 14] and ink(squashed)[4:24].any(axis=1).all()   # 4 wide → about 2.4, centred
    sheared = image_outside.corrupt(pixels, client_ids, "shear", 1.0, seed=0)[0][0]
    mean_column = lambda row: np.flatnonzero(ink(sheared)[row]).mean()   # noqa: E731
    assert mean_column(5) - mean_column(22) == pytest.approx(0.3 * 17, abs=1.0)   # the bottom leans left
    occluded = image_outside.corrupt(pixels, client_ids, "occlude", 1.0, seed=0)[0][0]
    assert (occluded[:, 18:] == 255).all() and np.array_equal(occluded[:, :18], pixels[0][:, :18])


def test_the_added_image_faults_by_hand(image_outside):
    """Zero padding: a black band 4 pixels wide round white paper holding the bar, shrunk; a frame: 2 black
    pixels round the unchanged image; darken and washed: exact levels; a downsample keeps white edges (a
    zero-filled resample drew dark lines along two of them, which read as an artefact)."""
    pixels, client_ids = _bar_images(1)

    def faulty(fault):
        return image_outside.corrupt(pixels, client_ids, fault, 1.0, seed=0)[0][0].astype(int)

    padded = faulty("pad")
    band = np.ones((28, 28), bool)
    band[4:-4, 4:-4] = False
    assert (padded[band] == 0).all() and (padded[4:-4, 4:-4].max() == 255)
    bar_columns = np.flatnonzero((padded[4:-4, 4:-4] < 128).any(axis=0)) + 4
    assert 2 <= len(bar_columns) <= 4 and 12 <= bar_columns.mean() <= 15   # about 20/28 of 4 wide, centred
    framed = faulty("frame")
    band[:] = True
    band[2:-2, 2:-2] = False
    assert (framed[band] == 0).all() and np.array_equal(framed[2:-2, 2:-2], pixels[0][2:-2, 2:-2])
    thin = faulty("thin_frame")
    band[1:-1, 1:-1] = False
    assert (thin[band] == 0).all() and np.array_equal(thin[1:-1, 1:-1], pixels[0][1:-1, 1:-1])
    assert set(np.unique(faulty("darken"))) == {0, 178} and set(np.unique(faulty("washed"))) == {64, 217}
    downsampled = faulty("downsample")
    assert (downsampled[[0, -1]] == 255).all() and (downsampled[:, [0, -1]] == 255).all()
    assert set(faulty("posterize").ravel()) <= {0, 85, 170, 255}
    assert np.array_equal(faulty("rotate180"), pixels[0][::-1, ::-1])


def test_black_background_float_files_are_changed_in_their_own_convention(image_outside):
    pixels, client_ids = _bar_images(1)
    mnist_style = (255 - pixels).astype(np.float32) / 255.0    # 0.0 the background, ink bright
    changed = image_outside.corrupt(mnist_style, client_ids, "occlude", 1.0, seed=0, background="black")[0]
    assert changed.dtype == np.float32 and (changed[:, :, 18:] == 0.0).all()
    assert np.allclose(changed[:, :, :18], mnist_style[:, :, :18])


def test_unknown_image_faults_fractions_and_backgrounds_are_refused(image_outside):
    pixels, client_ids = _bar_images(1)
    for kwargs, message in (({"fault": "swirl", "fraction": 0.5}, "fault must be one of"),
                            ({"fault": "ruled", "fraction": -0.1}, "fraction"),
                            ({"fault": "ruled", "fraction": 0.5, "background": "grey"}, "background")):
        with pytest.raises(ValueError, match=message):
            image_outside.corrupt(pixels, client_ids, seed=0, **kwargs)


def test_an_outside_ceiling_row_says_what_was_found_and_what_the_named_check_said():
    ceiling = _script("outside_fault_ceiling")

    def ranked_row(name, family, z, significant):
        return {"property": name, "family": family, "calibrated_z": z, "significant": significant}

    ranked = [ranked_row("line_darkness", "artefact", 30.54, True), ranked_row("extent", "scale", 15.47, True),
              ranked_row("blockiness", "resolution", 2.0, False)]
    inversion = {"pixel_inversion_suspected": False, "inconclusive": True, "evidence": {"z": 0.04}}
    assert ceiling.row("thin_frame", 1, ranked, inversion) == {
        "fault": "thin_frame", "seed": 1, "expected": ["artefact"], "detected": True, "first_right": True,
        "families": ["artefact", "scale"],
        "top": [("line_darkness", "artefact", 30.54), ("extent", "scale", 15.47), ("blockiness", "resolution", 2.0)],
        "inversion_suspected": False, "inversion_inconclusive": True, "inversion_z": 0.0}


def test_the_text_ceiling_finds_a_byte_order_mark_as_characters_and_no_clean_difference(tmp_path, monkeypatch):
    """`evaluation/outside_text_ceiling.py` end to end on 40 synthetic users (seconds, no training)."""
    import json
    import sys

    from fedgen_debug.data import spec as data_spec
    from fedgen_debug.data.jsonl import write_jsonl

    source, out = tmp_path / "text.jsonl", tmp_path / "rows.jsonl"
    write_jsonl(data_spec.load_client_data("synthetic-text:users=40,seed=0"), str(source))
    ceiling = _script("outside_text_ceiling")
    monkeypatch.setattr(sys, "argv", ["outside_text_ceiling.py", str(source), "--kinds", "char", "--faults", "bom",
                                      "--seeds", "0", "--samples", "300", "--vocab-size", "100",
                                      "--out", str(out)])
    ceiling.main()
    rows = {r["fault"]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    assert set(rows) == {"clean", "bom"}
    assert not rows["clean"]["detected"]
    assert rows["bom"]["detected"] and rows["bom"]["families"][0] == "characters"
    assert rows["bom"]["top"][0][0] == "non_ascii_share"
