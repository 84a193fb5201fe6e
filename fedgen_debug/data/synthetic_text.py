"""Seeded, Stack-Overflow-like synthetic text: sentences grouped by user.

A sentence opens like Stack Overflow prose does ("i have", "is there", "you can", ...), continues
with function words, general words from a Zipfian lexicon and technical terms drawn from the user's
own topic mixture (a Dirichlet over topics such as python, web, databases), and ends in punctuation.
A realistic out-of-vocabulary tail comes from rare lexicon words, identifiers (`getUserById`,
`max_retries`), typos of common words and one-off jargon. With a 10K vocabulary built from the
data, about 5-8% of tokens are OOV (paper Table 6: 6.52%). Raw text is cased and punctuated like user
input, so the tokenizer has real work to do.

User u's sentences depend only on (seed, u), so a smaller dataset is a prefix of a larger one.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import numpy as np
from fedgen_debug import disk_cache, rng_streams
from fedgen_debug.kept import KeptArrays
from fedgen_debug.progress import progress

from fedgen_debug.data import client_data as cd

OPENERS = (
    "i have", "i am", "you can", "this is", "here is", "if you", "i want", "is there", "how can",
    "when i", "however ,", "i would", "if i", "for example", "i tried", "edit :", "i think",
    "the problem", "i don't", "i need", "it seems", "you should", "what is", "in my", "i get",
    "this will", "the following", "my question", "you need", "there is",
)
FUNCTION_WORDS = (
    "the to a is i and in of it that you this for with on my but not be if have can so as are "
    "when from an or do at what how which will there get use by all one like just then would it's "
    "also any some only need way should here your was me using code does no more than file other "
    "same want each into out same new now make work try still set call value data because these "
    "those them they we our its has been very where why after before again about over error "
    "method function class object string list array page user server app text type line name"
).split()
GENERAL_WORDS = (
    "problem question answer example result issue solution case time thing part way number "
    "field form table query request response button window view model image file folder path "
    "version library package module project build test run running works working change changed "
    "returns return display show shows load loaded save saved create created update updated delete "
    "add added remove removed find found check checked first second last next previous simple "
    "different correct wrong right left default custom current main local global static dynamic "
    "public private inside outside instead actually already always never maybe probably really "
    "something anything nothing everything someone another both either while until since though "
    "because unless within without between through under above below around across"
).split()
TOPICS = {
    "python": "python pandas numpy dataframe django flask pip virtualenv dict tuple lambda pytest "
              "matplotlib jupyter regex decorator generator asyncio",
    "web": "javascript jquery css html div onclick ajax json react angular node npm webpack dom "
           "jsfiddle bootstrap async promise callback",
    "java": "java android spring maven gradle jvm arraylist hashmap servlet hibernate intellij "
            "listview textview fragment activity intent",
    "databases": "sql mysql postgresql mongodb sqlite join index database schema linq orm "
                 "transaction cursor nosql redis",
    "devops": "linux bash docker nginx apache htaccess ssh git github jenkins kubernetes aws "
              "iis cron yaml",
    "dotnet": "c# .net asp.net xaml wpf visual studio textbox datagrid winforms entity enum "
              "params nuget",
    "ios": "ios swift xcode objective-c cocoa uiview storyboard iphone ipad plist",
    "native": "c c++ pointer malloc struct compiler gcc segfault cmake template vector stl",
}
ACCENTED_WORDS = ("café", "naïve", "résumé", "über", "señor", "déjà", "façade", "jalapeño", "crème", "zürich",
                  "müller", "josé", "garçon", "fiancé", "coöperate", "élan", "smörgåsbord", "año")
AMPERSANDS = ("&", "&&", "R&D", "Q&A", "AT&T", "&nbsp")
RICH_KINDS = ("number", "quoted", "ampersand", "accented")
_CONSONANTS = "bcdfghklmnprstvwz"
_VOWELS = "aeiou"


@dataclasses.dataclass(frozen=True)
class SyntheticTextConfig:
    users: int = 1000
    seed: int = 0
    median_sentences: float = 40.0
    min_sentences: int = 5
    max_sentences: int = 400
    lexicon_size: int = 30000
    zipf_exponent: float = 1.07
    tail_rate: float = 0.055
    # The share of words that are numbers, quoted code, "&" or accented words, as real posts hold them
    # (`RICH_KINDS`): the characters the text faults of the catalog act on (entities, mojibake,
    # number_format, strip_accents, smart_quotes). 0 (the default) leaves every user's text unchanged.
    rich: float = 0.0

    def __post_init__(self):
        if self.users < 1:
            raise ValueError(f"users must be >= 1. Found {self.users}.")
        if not 1 <= self.min_sentences <= self.max_sentences:
            raise ValueError(
                f"need 1 <= min_sentences <= max_sentences. Found {self.min_sentences}, {self.max_sentences}."
            )
        if not 0.0 <= self.tail_rate < 1.0:
            raise ValueError(f"tail_rate must be in [0, 1). Found {self.tail_rate}.")
        if not 0.0 <= self.rich < 1.0:
            raise ValueError(f"rich must be in [0, 1). Found {self.rich}.")


def _letter(letters: str, rng: np.random.Generator) -> str:
    # The draw `rng.choice(list(letters))` makes (one bounded int64), without its per-call list-to-array
    # conversion and checks: the same letters from the same stream, faster.
    return letters[rng.integers(len(letters))]


def _pseudo_word(rng: np.random.Generator) -> str:
    syllables = rng.integers(1, 4)
    return "".join(_letter(_CONSONANTS, rng) + _letter(_VOWELS, rng) for _ in range(syllables)) + (
        _letter(_CONSONANTS, rng) if rng.random() < 0.5 else ""
    )


@functools.lru_cache(maxsize=4)
def _lexicon(seed: int, size: int) -> tuple[str, ...]:
    """General words ranked by frequency: real words first, then seeded pseudo-words."""
    rng = np.random.default_rng([seed, rng_streams.SYNTHETIC_LEXICON])
    words, seen = list(dict.fromkeys(GENERAL_WORDS)), set(GENERAL_WORDS) | set(FUNCTION_WORDS)
    seen.update(w for t in TOPICS.values() for w in t.split())
    while len(words) < size:
        w = _pseudo_word(rng)
        if w not in seen:
            seen.add(w)
            words.append(w)
    return tuple(words)


@functools.lru_cache(maxsize=16)
def _zipf_cdf(n: int, exponent: float) -> np.ndarray:
    # Cached (every user of a dataset draws from the same few): read-only, so no caller can change it.
    p = 1.0 / np.arange(1, n + 1) ** exponent
    cdf = np.cumsum(p / p.sum())
    cdf.setflags(write=False)
    return cdf


def _draw(cdf: np.ndarray, rng: np.random.Generator) -> int:
    # Inverse-CDF sampling: O(log n) per draw, where rng.choice(p=...) is O(n).
    return min(int(cdf.searchsorted(rng.random(), side="right")), len(cdf) - 1)


def _typo(word: str, rng: np.random.Generator) -> str:
    if len(word) < 4:
        return word + word[-1]
    i = int(rng.integers(len(word) - 1))
    kind = rng.integers(3)
    if kind == 0:  # swap two neighbours
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    if kind == 1:  # drop a letter
        return word[:i] + word[i + 1:]
    return word[:i] + word[i] + word[i:]  # double a letter


_IDENTIFIER_PARTS = GENERAL_WORDS + FUNCTION_WORDS[60:]


def _identifier(words: list[str], rng: np.random.Generator) -> str:
    parts = [words[i] for i in rng.integers(len(words), size=int(rng.integers(2, 4)))]
    if rng.random() < 0.5:
        return parts[0] + "".join(p.capitalize() for p in parts[1:])
    return "_".join(parts)


class _UserWriter:
    def __init__(self, config: SyntheticTextConfig, user: int):
        self.rng = np.random.default_rng([config.seed, user])
        self.config = config
        self.lexicon = _lexicon(config.seed, config.lexicon_size)
        self.lexicon_cdf = _zipf_cdf(len(self.lexicon), config.zipf_exponent)
        self.function_cdf = _zipf_cdf(len(FUNCTION_WORDS), 1.0)
        self.opener_cdf = _zipf_cdf(len(OPENERS), 0.9)
        names = sorted(TOPICS)
        self.topic_words = [TOPICS[n].split() for n in names]
        self.topic_cdf = np.cumsum(self.rng.dirichlet(np.full(len(names), 0.3)))
        self.typo_rate = self.rng.uniform(0.2, 1.8)  # this user's typo-proneness, relative

    def _tail_token(self) -> str:
        rng = self.rng
        kind = int(rng.integers(3))
        if kind == 0:
            return _identifier(_IDENTIFIER_PARTS, rng)
        if kind == 1 and rng.random() < min(1.0, 0.6 * self.typo_rate):
            return _typo(self.lexicon[int(rng.integers(3000))], rng)
        return _pseudo_word(rng) + _pseudo_word(rng)  # one-off jargon

    def _rich_token(self) -> str:
        rng = self.rng
        kind = RICH_KINDS[int(rng.integers(len(RICH_KINDS)))]
        if kind == "number":
            form = int(rng.integers(3))
            if form == 0:
                return str(int(rng.integers(2, 10000)))
            if form == 1:
                return f"{rng.integers(0, 100)}.{rng.integers(1, 100)}"
            return f"{int(rng.integers(1, 1000)) * 1000 + int(rng.integers(0, 1000)):,}"   # 12,345
        if kind == "quoted":
            word = FUNCTION_WORDS[_draw(self.function_cdf, rng)]
            return f"'{word}'" if rng.random() < 0.5 else f'"{word}"'
        if kind == "ampersand":
            return AMPERSANDS[int(rng.integers(len(AMPERSANDS)))]
        return ACCENTED_WORDS[int(rng.integers(len(ACCENTED_WORDS)))]

    def _word(self) -> str:
        rng = self.rng
        if self.config.rich and rng.random() < self.config.rich:   # no draw at rich = 0: the same text as before
            return self._rich_token()
        r = rng.random()
        if r < self.config.tail_rate:
            return self._tail_token()
        if r < 0.42:
            return FUNCTION_WORDS[_draw(self.function_cdf, rng)]
        if r < 0.55:
            words = self.topic_words[_draw(self.topic_cdf, rng)]
            return words[int(rng.integers(len(words)))]
        return self.lexicon[_draw(self.lexicon_cdf, rng)]

    def sentence(self) -> str:
        rng = self.rng
        if rng.random() < 0.65:
            words = OPENERS[_draw(self.opener_cdf, rng)].split()
        else:
            words = [self._word()]
        length = 3 + int(rng.poisson(7))
        for _ in range(length):
            words.append(self._word())
            if rng.random() < 0.06:
                words.append(",")
        words.append("?" if rng.random() < 0.2 else ".")
        text = " ".join(words).replace(" ,", ",").replace(" .", ".").replace(" ?", "?").replace(" :", ":")
        return text[0].upper() + text[1:]

    def sentences(self) -> list[str]:
        c = self.config
        n = int(np.clip(np.round(self.rng.lognormal(np.log(c.median_sentences), 0.6)),
                        c.min_sentences, c.max_sentences))
        return [self.sentence() for _ in range(n)]


def user_id(user: int) -> str:
    return f"user_{user:06d}"


def generate_user(config: SyntheticTextConfig, user: int) -> list[str]:
    return _UserWriter(config, user).sentences()


# A process often loads the same users again (a test file's runs, an evaluation's replicates): a user's
# sentences are kept, read-only, as `synthetic_images` keeps its writers. The budget counts the arrays'
# nbytes, 8 bytes a sentence (object arrays hold pointers): 4 MiB is about half a million sentences,
# some 50 MB with the strings.
USER_CACHE_BYTES = 4 << 20
_users = KeptArrays(lambda: USER_CACHE_BYTES)


def _kept_user(config: SyntheticTextConfig, user: int):
    """`text_examples` of `generate_user`, read-only, generated once per process within `USER_CACHE_BYTES`."""
    key = (dataclasses.replace(config, users=1), user)   # every field but the population's size
    # The array is kept, not the dict: a caller may change its own dict, never the shared array.
    return {"text": _users.get(key, lambda: cd.text_examples(_stored_user(*key))["text"])}


def generator_version() -> str:
    """What a user's sentences depend on besides the config: this module's code and numpy's streams."""
    return disk_cache.code_version((__file__,), ("numpy",))


def _stored_user(config: SyntheticTextConfig, user: int) -> list[str]:
    """`generate_user`, generated once per machine (`disk_cache`): the sentences' UTF-8 bytes end to end
    and where each ends (a unicode array would drop trailing NULs)."""
    def arrays():
        encoded = [s.encode("utf-8") for s in generate_user(config, user)]
        return {"utf8": np.frombuffer(b"".join(encoded), np.uint8),
                "ends": np.cumsum([len(e) for e in encoded], dtype=np.int64)}

    key = disk_cache.digest("synthetic-text user", generator_version(), config, user)
    stored = disk_cache.cached_arrays("synthetic", key, arrays,
                                      valid=lambda a: set(a) == {"utf8", "ends"} and a["ends"].dtype == np.int64
                                      and (len(a["ends"]) == 0 or a["ends"][-1] == len(a["utf8"])))
    data, ends = stored["utf8"].tobytes(), stored["ends"].tolist()
    return [data[start:end].decode("utf-8") for start, end in zip([0] + ends[:-1], ends)]


def generate(config: SyntheticTextConfig) -> cd.ArrayClientData:
    examples = {}
    for u in progress(range(config.users), desc="synthesizing text", unit="user"):
        examples[user_id(u)] = _kept_user(config, u)
    return cd.ArrayClientData(examples)


def all_sentences(client_data) -> itertools.chain:
    return itertools.chain.from_iterable(
        (t.decode("utf-8") for t in cd.client_numpy(client_data, cid)["text"]) for cid in client_data.client_ids
    )
