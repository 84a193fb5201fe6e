"""Play scripts as federated text: each speaker is a user, each sentence of their lines an example.

The format is Tiny Shakespeare's: a speaker line ending in ':' (`First Citizen:`) at the start of the
file or after a blank line (verse lines may end in ':' too), then that speech's lines, then a blank line. Speeches are joined and split into sentences after `.`, `?` or `!`, so
a user's examples look like the sentences a phone keyboard sees.
"""

from __future__ import annotations

import collections
import re

from fedgen_debug.data import client_data as cd
from fedgen_debug.data.errors import DataError

_SPEAKER_RE = re.compile(r"^([A-Z][\w' .-]*):$")
_SENTENCE_END_RE = re.compile(r"(?<=[.?!])\s+")


def read_play(path: str, min_sentences: int = 1) -> cd.ArrayClientData:
    """Speakers with at least `min_sentences` sentences, as a ClientData in the text element format."""
    if min_sentences < 1:
        raise ValueError(f"min_sentences must be >= 1. Found {min_sentences}.")
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise DataError(path, "file not found.") from None
    except UnicodeDecodeError as e:
        raise DataError(path, f"invalid UTF-8 at byte {e.start}.") from None
    sentences = collections.defaultdict(list)
    speaker, speech = None, []

    def flush():
        if speaker is not None and speech:
            text = " ".join(speech)
            sentences[speaker].extend(s for s in _SENTENCE_END_RE.split(text) if s.strip())

    previous_blank = True
    for line in lines:
        match = _SPEAKER_RE.match(line.strip()) if previous_blank else None
        previous_blank = not line.strip()
        if match:
            flush()
            speaker, speech = match.group(1), []
        elif line.strip():
            if speaker is None:
                raise DataError(path, f"text before the first speaker line: {line.strip()[:40]!r}.")
            speech.append(line.strip())
        else:
            flush()
            speech = []
    flush()
    kept = {s: v for s, v in sentences.items() if len(v) >= min_sentences}
    if not kept:
        raise DataError(path, f"no speaker has {min_sentences} or more sentences.")
    return cd.ArrayClientData({s: cd.text_examples(v) for s, v in kept.items()})
