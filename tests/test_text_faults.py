"""Golden values of `device.text_faults` on hand-built sentences, per-sentence seeding, the share of hit
devices, and the catalog spec with settings. The DeviceTransform contract runs in test_device_transforms."""

import numpy as np
import pytest

from fedgen_debug.data import client_data as cd
from fedgen_debug.data.text import tokenize
from fedgen_debug.device import text_faults as faults
from fedgen_debug.device.catalog import BUGS, parse_bug
from fedgen_debug.device.text_faults import TEXT_FAULTS


def _one(fault, sentence: str, client_id: str = "u0") -> str:
    (out,) = fault.device_text(client_id, [sentence])
    return out


@pytest.mark.parametrize("fault, before, after", [
    (faults.Entities(1.0), "Tom & Jerry's <b>\"hi\"</b>", "Tom &amp; Jerry&#x27;s &lt;b&gt;&quot;hi&quot;&lt;/b&gt;"),
    (faults.Entities(1.0), "Good day.", "Good day."),
    (faults.Mojibake(1.0), "café", "cafÃ©"),
    (faults.Mojibake(1.0), "a — b", "a â€” b"),                       # the em dash of every broken web page
    (faults.Mojibake(1.0), "Á", "Ã\x81"),                             # 0x81: undefined in cp1252, kept as Latin-1
    (faults.Mojibake(1.0, codec="latin-1"), "a — b", "a â\x80\x94 b"),
    (faults.Truncate(1.0, length=3), "Good day to you, my friend.", "Good day to"),
    (faults.Truncate(1.0, length=5), "Good  day to you, my friend.", "Good  day to you, my"),
    (faults.Truncate(1.0, length=5), "Good day to you.", "Good day to you."),
    (faults.Truncate(1.0, length=4, unit="chars"), "Good day to you.", "Good"),
    (faults.Split(1.0), "Hello wonderful world, day 12345!", "He llo wond erful wo rld, day 12345!"),
    (faults.StripPunctuation(1.0), "Hello, world! Don't stop (now).", "Hello world Dont stop now"),
    (faults.DuplicateWords(1.0, rate=1.0), "Jerry's 1,234.5 café.", "Jerry's Jerry's 1,234.5 1,234.5 café café."),
    (faults.MissingSpaces(1.0, rate=1.0), "Good day to you, friend.", "Gooddaytoyou, friend."),
    (faults.NumberFormat(1.0), "1234.50 and 12 and 1000000 cost 3.5.", "1.234,50 and 12 and 1.000.000 cost 3,5."),
    (faults.NumberFormat(1.0), "1,234 and v1.2.3 stay", "1,234 and v1.2.3 stay"),
    (faults.StripAccents(1.0), "Café naïve Ångström", "Cafe naive Angstrom"),
    (faults.SmartQuotes(1.0), "He said \"don't\" and 'no'", "He said \u201cdon\u2019t\u201d and \u2019no\u2019"),
])
def test_golden(fault, before, after):
    assert _one(fault, before) == after


def test_truncate_keeps_the_first_words_as_the_tokenizer_reads_them():
    sentence = "Good day to you my dear friend"
    assert tokenize(_one(faults.Truncate(1.0, length=4), sentence)) == tokenize(sentence)[:4]


def test_typos_swap_or_drop_one_letter_per_word_seeded_by_device_and_sentence():
    words = "abcdef ghijkl mnopqr stuvwx yzABCD EFGHIJ KLMNOP QRSTUV".split()
    sentence = " ".join(words)
    fault = faults.Typos(1.0, rate=1.0, seed=7)
    out = _one(fault, sentence)
    assert out == _one(fault, sentence)                                        # deterministic
    assert out != _one(fault, sentence, client_id="u1")                        # per device
    assert out != _one(faults.Typos(1.0, rate=1.0, seed=8), sentence)          # per seed
    first, second = fault.device_text("u0", [sentence, sentence])
    assert first == out and second != out                                      # per sentence index
    for before, after in zip(words, out.split()):
        if len(after) == len(before) - 1:                                      # one letter dropped
            assert any(before[:i] + before[i + 1:] == after for i in range(len(before)))
        else:                                                                  # two adjacent letters swapped
            assert sorted(after) == sorted(before) and sum(a != b for a, b in zip(before, after)) == 2
    assert _one(fault, "to be or no") == "to be or no"                         # words under 3 letters kept


def test_typos_and_duplicates_hit_words_at_their_rate():
    sentence = " ".join(["abcdefgh"] * 50)
    for fault, changed in ((faults.Typos(1.0, rate=0.2), lambda w: w != "abcdefgh"),
                           (faults.DuplicateWords(1.0, rate=0.3), None)):
        outs = fault.device_text("u0", [sentence] * 100)
        if changed is not None:
            share = np.mean([changed(w) for out in outs for w in out.split()])
        else:
            share = np.mean([len(out.split()) - 50 for out in outs]) / 50
        n = 5000
        assert abs(share - fault.rate) <= 4 * np.sqrt(fault.rate * (1 - fault.rate) / n), (fault, share)


def test_a_hit_device_whose_text_the_fault_leaves_alone_is_not_affected():
    data = cd.ArrayClientData({f"u{i:03d}": cd.text_examples(["Tom & Jerry." if i % 2 else "Good day."])
                               for i in range(60)})
    fault = faults.Entities(0.5, seed=1)
    hit = fault.hit_devices(data.client_ids)
    assert fault.affected_devices(data) == frozenset(cid for cid in hit if int(cid[1:]) % 2)
    after = fault.apply(data)
    for cid in data.client_ids:
        text = cd.client_numpy(after, cid)["text"][0].decode()
        assert text == ("Tom &amp; Jerry." if cid in hit and int(cid[1:]) % 2 else
                        cd.client_numpy(data, cid)["text"][0].decode())


@pytest.mark.parametrize("name", sorted(TEXT_FAULTS))
def test_the_share_of_hit_devices_is_the_fraction_and_shares_are_nested(name):
    ids = [f"user-{i}" for i in range(400)]
    fraction = 0.3
    hit = TEXT_FAULTS[name](fraction, seed=5).hit_devices(ids)
    assert abs(len(hit) - 400 * fraction) <= 4 * np.sqrt(400 * fraction * (1 - fraction))
    assert TEXT_FAULTS[name](0.1, seed=5).hit_devices(ids) <= hit
    assert TEXT_FAULTS[name](fraction, seed=5).as_fixed().hit_devices(ids) == frozenset()


def test_every_text_fault_is_in_the_catalog_and_parses_with_its_settings():
    assert all(BUGS[name] == ("text", cls) for name, cls in TEXT_FAULTS.items())
    assert parse_bug("truncate:0.5,length=3,unit=chars", "text", seed=1) == faults.Truncate(0.5, seed=1, length=3,
                                                                                            unit="chars")
    assert parse_bug("typos:0.1,rate=0.5", "text") == faults.Typos(0.1, rate=0.5)
    with pytest.raises(ValueError, match="rotate is a bug of image data; for text use concat, entities"):
        parse_bug("rotate:0.5", "text")


@pytest.mark.parametrize("spec, message", [
    ("truncate:0.5,unit=lines", "unit must be one of words, chars. Found 'lines'."),
    ("truncate:0.5,length=0", r"length must be in \[1, 10000\]. Found 0."),
    ("typos:0.5,rate=0", r"rate must be in \(0, 1\]. Found 0.0."),
    ("mojibake:0.5,codec=koi8-r", "codec must be one of cp1252, latin-1. Found 'koi8-r'."),
    ("entities:0.5,quote=no", "entities has no setting 'quote': it has no settings"),
])
def test_bad_settings_say_what_is_wrong(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_bug(spec, "text")
