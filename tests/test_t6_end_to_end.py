"""T6 end to end: public text lacks a topic, private text has it. A DP-FedAvg auxiliary word-LM trained
on T6-selected sentences writes about the topic far more often than one trained on T1 (all) data."""

import json

from fedgen_debug.privacy.ledger import PrivacyLedger
from fedgen_debug.scenarios import t6_topic


def test_t6_auxiliary_generates_the_missing_topic_more_often_than_t1(tmp_path):
    config = t6_topic.T6Config(users=120, public_users=150, rounds=20, clients_per_round=20, client_epochs=3,
                               samples=800)
    report = t6_topic.run(config, str(tmp_path))
    t1, t6 = report["t1"], report["t6"]
    print(json.dumps({k: v for k, v in report.items() if k != "topic_words_in_vocab"}, indent=1))
    # Selection: T6 keeps a small, topic-dense part of the private data (measured: 4.5% vs 1.1% of tokens).
    assert t6["population"]["examples_kept"] < 0.15 * t1["population"]["examples_kept"]
    assert t6["training_data_topic_token_rate"] > 3 * t1["training_data_topic_token_rate"]
    # Generation: the T6 auxiliary writes topic words about twice as often (measured: 2.17x).
    assert t6["topic_token_rate"] > 1.5 * t1["topic_token_rate"]
    assert t6["sentences_with_topic"] > 1.5 * t1["sentences_with_topic"]
    # Both auxiliaries spent the same population's privacy: the ledger composes them.
    (total,) = PrivacyLedger(str(tmp_path)).totals(delta=1e-3)
    assert total.runs == ("t1", "t6")
