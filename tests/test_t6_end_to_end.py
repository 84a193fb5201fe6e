"""T6 end to end: public text lacks a topic, private text has it. A DP-FedAvg auxiliary word-LM trained
on T6-selected sentences writes about the topic far more often than one trained on T1 (all) data."""

import json

from conftest import provision_secret
from fedgen_debug.experiments import t6_topic


def test_t6_auxiliary_generates_the_missing_topic_more_often_than_t1(tmp_path, fresh_ledger):
    fresh_ledger.set_budget("*", float("inf"), reason="z = 0.3 at N = 120: large ε")
    config = t6_topic.T6Config(users=120, public_users=150, rounds=12, clients_per_round=20, client_epochs=3,
                               samples=800)
    for name in ("vocabulary", "t1", "t6"):  # measured across secrets: see the privacy issue's note
        provision_secret(str(tmp_path / name), f"test_t6_end_to_end/{name}")
    report = t6_topic.run(config, str(tmp_path))
    t1, t6 = report["t1"], report["t6"]
    print(json.dumps({k: v for k, v in report.items() if k != "topic_words_in_vocab"}, indent=1))
    # Selection: T6 keeps a small, topic-dense part of the private data (measured: 4.5% vs 1.1% of tokens).
    assert t6["ground_truth"]["examples_kept"] < 0.15 * t1["ground_truth"]["examples_kept"]
    # The topic's words reach the vocabulary through DP heavy hitters of the T6-selected text.
    assert report["topic_words_in_vocab"]
    assert t6["training_data_topic_token_rate"] > 3 * t1["training_data_topic_token_rate"]
    # Generation: the T6 auxiliary writes topic words more often (the model's expected rate along its own
    # samples; counting ~10 sampled topic words is too noisy to compare).
    assert t6["expected_topic_token_rate"] > 1.5 * t1["expected_topic_token_rate"]
    assert report["topic_rate_ratio_t6_over_t1"] > 1.5
    # Both auxiliaries and the vocabulary spent the same population's privacy: the ledger composes them.
    (total,) = fresh_ledger.totals()
    assert sorted(r.label for r in total.releases) == ["DP vocabulary (heavy hitters)", "T6 experiment: t1 auxiliary",
                                                        "T6 experiment: t6 auxiliary"]
    assert t1["epsilon"] > 10 and total.population == fresh_ledger.population_key(f"synthetic-text:users=120,seed={config.seed}")
