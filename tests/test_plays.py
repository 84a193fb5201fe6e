"""Play scripts (Tiny Shakespeare format) as federated text: speakers are users."""

import numpy as np
import pytest

from fedgen_debug.data import client_data as cd
from fedgen_debug.data.errors import DataError
from fedgen_debug.data.plays import read_play
from fedgen_debug.data.spec import load_client_data

PLAY = """First Citizen:
Before we proceed any further, hear me speak.

All:
Speak, speak.

First Citizen:
You are all resolved rather to die than to famish? Resolved:
Let us kill him!

MENENIUS:
What work's, my countrymen, in hand?
"""


def test_speakers_are_users_and_sentences_are_examples(tmp_path):
    path = tmp_path / "play.txt"
    path.write_text(PLAY)
    data = read_play(str(path))
    assert sorted(data.client_ids) == ["All", "First Citizen", "MENENIUS"]
    texts = [t.decode() for t in cd.client_numpy(data, "First Citizen")["text"]]
    # A verse line ending in ':' inside a speech is not a new speaker.
    assert texts == ["Before we proceed any further, hear me speak.",
                     "You are all resolved rather to die than to famish?", "Resolved: Let us kill him!"]
    assert cd.num_examples(data, "All") == 1
    kept = load_client_data(f"play:{path},min_sentences=2")
    assert list(kept.client_ids) == ["First Citizen"]
    assert np.array_equal(cd.client_numpy(kept, "First Citizen")["text"], cd.client_numpy(data, "First Citizen")["text"])


@pytest.mark.parametrize("content, message", [
    ("just some text\n", "text before the first speaker line"),
    ("ROMEO:\nHi.\n", "no speaker has 2 or more"),
])
def test_bad_play_files_name_the_problem(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    with pytest.raises(DataError, match=message):
        read_play(str(path), min_sentences=2)
    with pytest.raises(DataError, match="file not found"):
        read_play(str(tmp_path / "missing.txt"))
