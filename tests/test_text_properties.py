"""text_properties: golden values on hand-written samples; on synthetic sentences each text fault's family
ranked first (entities → characters, glued words → spacing, truncation → length; identical sets: nothing);
distinctive terms by log-odds with an informative Dirichlet prior."""

import itertools
import json
import math
import string

import numpy as np
import pytest

from fedgen_debug.analysis import differences as df
from fedgen_debug.analysis import text_properties as tp
from fedgen_debug.data import synthetic_text


def test_golden_values():
    samples = ["Hello world.", "fish &amp; chips", "caf\u00c3\u00a9 ok", "aaa bb aaa", "word", "don ' t stop",
               "12 #tags"]
    values = tp.text_properties(samples)
    assert values["has_space"].tolist() == [1, 1, 1, 1, 0, 1, 1]
    assert values["entities"].tolist() == [0, 1, 0, 0, 0, 0, 0]
    assert values["mojibake"].tolist() == [0, 0, 1, 0, 0, 0, 0]
    assert values["space_before_punctuation"].tolist() == [0, 0, 0, 0, 0, 1, 0]
    assert values["tokens"].tolist() == [2, 3, 2, 3, 1, 4, 2]
    assert values["characters"][0] == 12
    assert values["token_length"][0] == pytest.approx(5.5)
    # Truncation is only read from samples of 2+ tokens: one word has no sentence end to miss.
    assert values["unterminated"][0] == 0 and values["unterminated"][1] == 1 and math.isnan(values["unterminated"][4])
    assert values["repeated_tokens"][3] == pytest.approx(1 / 3)
    assert values["character_run"].tolist() == [0, 0, 0, 1, 0, 0, 0]
    assert values["uppercase_share"][0] == pytest.approx(1 / 10)
    assert values["starts_uppercase"][0] == 1 and values["starts_uppercase"][1] == 0
    assert math.isnan(values["starts_uppercase"][6])
    assert values["digit_share"][6] == pytest.approx(2 / 8)
    assert values["symbol_share"][6] == pytest.approx(1 / 8)
    assert values["punctuation_share"][0] == pytest.approx(1 / 12)
    assert values["non_ascii_share"][2] == pytest.approx(2 / 8)
    with pytest.raises(ValueError, match="sequence of strings"):
        tp.text_properties("not a list")


def test_a_word_lms_unk_is_vocabulary_not_capitals():
    values = tp.text_properties(["UNK is here .", "the UNK UNK", "all known words", ""])
    assert values["oov_share"][:3].tolist() == pytest.approx([1 / 4, 2 / 3, 0.0]) and math.isnan(values["oov_share"][3])
    assert values["oov_first"][:3].tolist() == [1, 0, 0]
    # The character properties skip the UNK tokens: no capitals, "is here ." starts lower case.
    assert values["uppercase_share"][:3].tolist() == [0, 0, 0] and values["starts_uppercase"][0] == 0
    assert values["tokens"][:2].tolist() == [4, 3]


def test_samples_the_sampler_cut_at_its_length_cap_are_not_read_as_truncated():
    twenty = " ".join(["w"] * 20)
    assert tp.cut_by_sampler([twenty, " ".join(["w"] * 18) + " ."], "word", 20).tolist() == [True, False]
    # A char-LM word is cut after max_length + 1 bytes: é is two.
    assert tp.cut_by_sampler(["a" * 17, "a" * 16, "\u00e9" * 8 + "a"], "char", 16).tolist() == [True, False, True]
    values = tp.text_properties([twenty, "cut short here", "ends well ."], cut=[True, False, False])
    assert math.isnan(values["unterminated"][0]) and values["unterminated"][1:].tolist() == [1, 0]
    assert values["tokens"][0] == 20   # the length properties still count it
    with pytest.raises(ValueError, match="one flag per sample"):
        tp.text_properties(["a b", "c d"], cut=[True])


def test_a_word_lms_phrases_are_compared_without_the_spaces_its_join_put_there():
    names = [p.name for p in tp.properties_for("word")]
    assert not set(tp.JOINED_BY_SPACES) & set(names) and "token_length" in names
    assert tp.properties_for(None) == tp.TEXT_PROPERTIES
    char = [p.name for p in tp.properties_for("char")]
    assert not set(tp.ONE_WORD_REPEATS) & set(char) and {"token_length", "has_space"} <= set(char)
    # A punctuation-stripping pipeline: the word-LM draws no "." token. Read as plain text that is "less
    # split punctuation" (spacing); for a word-LM it is characters (and length: unterminated).
    rng = np.random.default_rng(1)
    ended = [" ".join(rng.choice(["the", "cat", "sat", "on"], size=int(rng.integers(4, 9)))) + " ." for _ in range(600)]
    stripped = [s.removesuffix(" .") if i % 2 else s for i, s in enumerate(ended)]

    def ranked(kind):
        properties = tp.properties_for(kind)
        return df.rank(df.compare_properties(properties, tp.text_properties(ended), tp.text_properties(stripped)))

    assert ranked(None)[0]["property"] == "space_before_punctuation"
    word = ranked("word")
    assert word[0]["family"] in ("characters", "length") and word[0]["significant"]
    assert "space_before_punctuation" not in [r["property"] for r in word]


def test_more_samples_at_the_length_cap_is_no_truncation_but_cut_sentences_are():
    """Clean word-LMs differ from training to training in how many samples run to the sampler's cap (3-30%
    of 1,000 on 12 clean demo runs, 2026-12-04): those end mid-sentence, and read as "unterminated" they
    hid the sentences a truncating pipeline cut after five words."""
    rng = np.random.default_rng(0)

    def sentence(length):
        return " ".join(rng.choice(["the", "cat", "sat", "on", "a", "mat"], size=length)) + " ."

    def side(capped_share, truncated_share, n=1000):
        out = []
        for _ in range(n):
            u = rng.random()
            if u < capped_share:
                out.append(" ".join(rng.choice(["the", "cat", "mat"], size=20)))
            elif u < capped_share + truncated_share:
                out.append(sentence(6).rsplit(" ", 2)[0])   # five words, no end
            else:
                out.append(sentence(int(rng.integers(6, 15))))
        return out

    def unterminated_z(a, b):
        compared = df.compare_properties(tp.TEXT_PROPERTIES, tp.text_properties(a, tp.cut_by_sampler(a, "word", 20)),
                                         tp.text_properties(b, tp.cut_by_sampler(b, "word", 20)))
        return next(c["z"] for c in compared if c["property"] == "unterminated")

    few_capped, many_capped, truncating = side(0.03, 0.0), side(0.30, 0.0), side(0.03, 0.15)
    assert abs(unterminated_z(few_capped, many_capped)) < 3
    assert unterminated_z(few_capped, truncating) > 8
    # Without the cut flags the capped samples are a "difference" of their own.
    uncut = df.compare_properties(tp.TEXT_PROPERTIES, tp.text_properties(few_capped), tp.text_properties(many_capped))
    assert next(c["z"] for c in uncut if c["property"] == "unterminated") > 8


def test_glued_tokens_in_a_word_lm_show_as_unk_at_the_first_position():
    rng = np.random.default_rng(3)
    clean = [" ".join(rng.choice(["the", "cat", "sat", "on", "a", "mat"], size=rng.integers(4, 12))) + " ."
             for _ in range(400)]
    glued = [f"UNK {s.split(' ', 2)[2]}" if i % 2 else s for i, s in enumerate(clean)]
    ranked = df.rank(df.compare_properties(tp.TEXT_PROPERTIES, tp.text_properties(clean), tp.text_properties(glued)))
    assert ranked[0]["family"] == "vocabulary" and ranked[0]["significant"]
    assert not any(c["family"] == "case" and c["significant"] for c in ranked)


def test_every_family_is_documented():
    assert {p.family for p in tp.TEXT_PROPERTIES} == set(df.TEXT_FAMILIES)
    assert len({p.name for p in tp.TEXT_PROPERTIES}) == len(tp.TEXT_PROPERTIES)


@pytest.fixture(scope="module")
def sentence_halves():
    """600 synthetic sentences per side: 60 users' 20 each, split between A and B."""
    config = synthetic_text.SyntheticTextConfig(users=60, median_sentences=20, min_sentences=20, max_sentences=20)
    sentences = [s for user in range(60) for s in synthetic_text.generate_user(config, user)]
    return sentences[0::2], sentences[1::2]


def _glue(sentence, rng):
    tokens = sentence.split()
    i = int(rng.integers(len(tokens) - 1)) if len(tokens) > 1 else 0
    return " ".join(tokens[:i] + ["".join(tokens[i:i + 2])] + tokens[i + 2:])


def _faulty(sentences, fault):
    rng = np.random.default_rng(0)
    if fault == "entities":   # a scraper that did not unescape HTML, in half the sentences
        return [s.replace(" ", " &amp; ", 1) if rng.random() < 0.5 else s for s in sentences]
    if fault == "glued":      # one pair of tokens glued per sentence
        return [_glue(s, rng) for s in sentences]
    if fault == "truncated":  # cut at half its tokens
        return [" ".join(s.split()[:max(2, len(s.split()) // 2)]) for s in sentences]
    if fault == "mojibake":   # UTF-8 read as Latin-1
        return [s.replace("e", "é", 1).encode("utf-8").decode("latin-1") for s in sentences]
    if fault == "lowercase":
        return [s.lower() for s in sentences]
    return list(sentences)


def _ranked(halves, fault):
    a, b = halves
    return df.rank(df.compare_properties(tp.TEXT_PROPERTIES, tp.text_properties(a),
                                         tp.text_properties(_faulty(b, fault))))


@pytest.mark.parametrize("fault, family", [("entities", "characters"), ("glued", "spacing"),
                                           ("truncated", "length"), ("mojibake", "characters"),
                                           ("lowercase", "case")])
def test_each_fault_ranks_its_family_first(sentence_halves, fault, family):
    ranked = _ranked(sentence_halves, fault)
    top = [(c["property"], round(c["z"], 1), round(c["standardized_difference"], 2)) for c in ranked[:3]]
    assert ranked[0]["family"] == family and ranked[0]["significant"], top


def test_entities_are_named_by_their_property_and_terms(sentence_halves):
    ranked = _ranked(sentence_halves, "entities")
    assert ranked[0]["property"] == "entities" and ranked[0]["direction"] == "more HTML entities"
    assert ranked[0]["a"] == 0.0 and 0.4 < ranked[0]["b"] < 0.6
    a, b = sentence_halves
    terms = tp.distinctive_terms(a, _faulty(b, "entities"), top=3)
    assert terms["tokens"]["b"][0]["term"] == "&amp;"
    assert terms["tokens"]["b"][0]["count_a"] == 0 and terms["tokens"]["b"][0]["z"] > 5
    entity_trigrams = {" &amp; "[i:i + 3] for i in range(5)}
    assert {row["term"] for row in terms["ngrams"]["b"]} <= entity_trigrams
    assert all(row["z"] < 5 for row in terms["tokens"]["a"])
    json.dumps(terms, allow_nan=False)


def test_identical_sets_differ_in_nothing(sentence_halves):
    a, b = sentence_halves
    ranked = df.rank(df.compare_properties(tp.TEXT_PROPERTIES, tp.text_properties(a), tp.text_properties(a)))
    assert df.significant_families(ranked) == []
    assert all(c["z"] == 0 and c["effect"] == 0 for c in ranked)
    assert df.significant_families(_ranked(sentence_halves, "none")) == []
    terms = tp.distinctive_terms(a, a)
    assert all(row["z"] == 0 for side in terms.values() for rows in side.values() for row in rows)


def test_distinctive_terms_golden():
    # 'x': 0 of 100 tokens on A, 20 of 100 on B; prior = pooled counts (α_x = 20, α_0 = 200).
    a, b = ["y"] * 100, ["x"] * 20 + ["y"] * 80
    (row,) = tp.distinctive_terms(a, b, top=1)["tokens"]["b"]
    delta = math.log(40 / (100 + 200 - 40)) - math.log(20 / (100 + 200 - 20))
    assert row["term"] == "x" and row["z"] == pytest.approx(delta / math.sqrt(1 / 40 + 1 / 20))
    assert row["probability_a"] == 0.0 and row["probability_b"] == pytest.approx(0.2)
    with pytest.raises(ValueError, match="prior_weight > 0"):
        tp.distinctive_terms(a, b, prior_weight=0)


def test_glued_char_lm_words_are_spacing():
    """char-LM samples are single words; glued ones hold a space (the tokenization bug's signature)."""
    rng = np.random.default_rng(0)
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa"]
    a = [words[i] for i in rng.integers(0, 7, 1000)]
    b = [words[i] + (" " + words[j] if rng.random() < 0.1 else "") for i, j in rng.integers(0, 7, (1000, 2))]
    ranked = df.rank(df.compare_properties(tp.TEXT_PROPERTIES, tp.text_properties(a), tp.text_properties(b)))
    assert ranked[0]["family"] == "spacing" and ranked[0]["significant"]


def test_split_char_lm_words_are_spacing_not_also_length():
    """A char-LM's sample is one word: shorter words from a splitting pipeline are measured once, as
    `token_length` (spacing), not again as characters per sample (length)."""
    rng = np.random.default_rng(2)
    words = ["alphabet", "betamax", "gammaray", "deltoid", "omegas", "sigmoid", "kappas"]
    a = [words[i] for i in rng.integers(0, 7, 1000)]
    b = [w[: len(w) // 2] if rng.random() < 0.5 else w for w in (words[i] for i in rng.integers(0, 7, 1000))]
    everything = df.compare_properties(tp.TEXT_PROPERTIES, tp.text_properties(a), tp.text_properties(b))
    assert {c["property"]: c["z"] for c in everything}["characters"] == pytest.approx(
        {c["property"]: c["z"] for c in everything}["token_length"])   # the same measurement twice
    ranked = df.rank(df.compare_properties(tp.properties_for("char"), tp.text_properties(a, vocabulary=words),
                                           tp.text_properties(b, vocabulary=words)))
    assert ranked[0]["property"] == "token_length" and ranked[0]["family"] == "spacing" and ranked[0]["significant"]
    assert "length" not in {c["family"] for c in ranked if c["significant"]}


def test_glued_words_are_two_frequent_words_run_together_out_of_the_vocabulary():
    vocabulary = [".", "the", ",", "of", "problem", "i", "have", "it's"] + [f"q{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(400)]
    vocabulary += ["zork", "w0"]
    assert tp.common_words(vocabulary, 4) == {"the", "of", "problem", "i"}   # letters only, most frequent first
    samples = ["ofthe", "Problemthe", "ihave", "it'sthe", "the", "i have", "zorkthe", "thex", "", "of.the", "w0the"]
    assert tp.glued_words(samples, vocabulary).tolist() == [1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]
    # "the" is in the vocabulary (not an OOV word), "i have" has its space, "zork" is rarer than the 300 most
    # frequent words, "thex" and "of.the" are not two words, "w0" is not made of letters
    values = tp.text_properties(samples, vocabulary=vocabulary)
    assert values["glued_words"].tolist() == tp.glued_words(samples, vocabulary).tolist()
    assert "glued_words" not in tp.text_properties(samples)   # measured only against a vocabulary
    assert "glued_words" in [p.name for p in tp.properties_for("char")]
    assert "glued_words" not in [p.name for p in tp.properties_for("word")] + [p.name for p in tp.properties_for(None)]


def test_a_pipeline_that_drops_spaces_shows_in_a_char_lms_words_as_glued_words_spacing():
    """Missing spaces glue frequent word pairs into OOV words ("ofthe"): longer tokens, and two known words."""
    rng = np.random.default_rng(3)
    vocabulary = ["the", "of", "to", "and", "is", "problem", "a", "in"]
    rare = ["zorbax", "quilp", "vendrix", "mogwash", "trelk", "pazas", "fucunu"]
    a = [rare[i] for i in rng.integers(0, len(rare), 1000)]
    glued = [vocabulary[i] + vocabulary[j] for i, j in rng.integers(0, len(vocabulary), (1000, 2))]
    b = [g if rng.random() < 0.1 else w for g, w in zip(glued, (rare[i] for i in rng.integers(0, len(rare), 1000)))]
    ranked = df.rank(df.compare_properties(tp.properties_for("char"), tp.text_properties(a, vocabulary=vocabulary),
                                           tp.text_properties(b, vocabulary=vocabulary)))
    assert ranked[0]["property"] == "glued_words" and ranked[0]["family"] == "spacing" and ranked[0]["significant"]
    assert ranked[0]["kind"] == "share" and ranked[0]["a"] == 0.0 and 0.07 < ranked[0]["b"] < 0.13


def test_slips_are_one_swap_of_adjacent_letters_or_one_letter_dropped():
    assert tp.slips("the") == {"he", "te", "th", "hte", "teh"}
    assert tp.slips("aab") == {"ab", "aa", "aba"}   # swapping the equal letters gives the word back: not a slip
    assert tp.slips("") == set()


def test_misspelt_words_are_one_slip_from_a_frequent_word_and_out_of_the_vocabulary():
    filler = ["q" + "".join(letters) for letters in itertools.product(string.ascii_lowercase, repeat=3)][:1000]
    vocabulary = [".", "the", ",", "problem", "i", "am", "thee"] + filler + ["zorkle"]
    samples = ["prolem", "Problme", "teh", "th", "problem", "thee", "probl em", "zorle", "a", "pzroblem", ""]
    assert tp.misspelt_words(samples, vocabulary).tolist() == [1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]
    # "problem" is a word of the vocabulary, and so is "thee" (one letter more than "the"); "probl em" holds
    # a space; "zorkle" is rarer than the 1,000 most frequent words; "i" and "am" are too short to misspell
    # ("a" is "am" with a letter dropped); "pzroblem" is two slips away
    values = tp.text_properties(samples, vocabulary=vocabulary)
    assert values["misspelt_words"].tolist() == tp.misspelt_words(samples, vocabulary).tolist()
    assert "misspelt_words" not in tp.text_properties(samples)   # measured only against a vocabulary
    assert {"misspelt_words": "characters"}.items() <= {p.name: p.family for p in tp.properties_for("char")}.items()
    assert "misspelt_words" not in [p.name for p in tp.properties_for("word")]


def test_a_pipeline_with_typos_shows_in_a_char_lms_words_as_misspelt_words_characters():
    """The catalog's typos fault on sentences of frequent words: the OOV words it makes are misspellings,
    ranked first as characters (no glued words, no spacing)."""
    from fedgen_debug.device.text_faults import Typos

    rng = np.random.default_rng(5)
    vocabulary = ["the", "problem", "answer", "question", "have", "this", "example", "result", "you", "and"]
    rare = ["zorbax", "quilp", "vendrix", "mogwash", "trelk", "pazas", "fucunu", "biwamoc", "sadidep"]
    sentences = [" ".join(vocabulary[i] for i in rng.integers(0, len(vocabulary), 8)) for _ in range(300)]
    fault = Typos(fraction=1.0, seed=1)
    typos = [w for i, s in enumerate(sentences) for w in fault.transform_sentence(s, np.random.default_rng(i)).split()
             if w not in vocabulary]
    a = [rare[i] for i in rng.integers(0, len(rare), 1000)]
    b = [typos[i % len(typos)] if rng.random() < 0.1 else w for i, w in enumerate(rare[j] for j in rng.integers(0, len(rare), 1000))]
    ranked = df.rank(df.compare_properties(tp.properties_for("char"), tp.text_properties(a, vocabulary=vocabulary),
                                           tp.text_properties(b, vocabulary=vocabulary)))
    assert ranked[0]["property"] == "misspelt_words" and ranked[0]["family"] == "characters" and ranked[0]["significant"]
    assert ranked[0]["a"] == 0.0 and 0.07 < ranked[0]["b"] < 0.13
    assert "spacing" not in {c["family"] for c in ranked if c["significant"]}


@pytest.mark.parametrize("sample, name, expected", [
    ("a-b", "punctuation_share", 1 / 3),          # a hyphen is punctuation ...
    ("a-b", "symbol_share", 0.0),                 # ... and not a symbol too
    ("a, b.", "symbol_share", 0.0),               # punctuation is never counted twice
    ("he said 'yes'", "unterminated", 0.0),       # a closing quote ends a sentence
    ("x &mu; y", "entities", 1.0),                # any named entity, not only the listed fragments
    ("a &lt b", "entities", 1.0),                 # an entity whose ; was lost
    ("Â£5", "mojibake", 1.0),                     # UTF-8's £ read as Latin-1
    ("yes , no", "space_before_punctuation", 1.0),
])
def test_each_character_class_holds_what_its_description_says(sample, name, expected):
    """One hand-built sample per rule of the module's docstring (mutations of these classes went unnoticed)."""
    assert tp.text_properties([sample])[name][0] == pytest.approx(expected)


def test_glued_and_misspelt_words_at_their_edges():
    assert tp.glued_words(["ofa"], ["of", "a"]).tolist() == [1.0]            # a one-letter second word
    assert tp.misspelt_words(["the"], ["thee", "the"]).tolist() == [0.0]     # a vocabulary word is no slip


def test_distinctive_terms_list_a_term_seen_three_times_and_never_one_both_sides_share_equally():
    b = tp.distinctive_terms(["y"] * 100, ["x"] * 3 + ["y"] * 97)["tokens"]["b"]
    assert [row["term"] for row in b] == ["x"]
    tokens = tp.distinctive_terms(["t u"] * 3, ["t v"] * 3)["tokens"]
    assert [row["term"] for row in tokens["a"]] == ["u"] and [row["term"] for row in tokens["b"]] == ["v"]
