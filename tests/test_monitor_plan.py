"""Monitoring plans (monitor/plan.py): TOML and JSON load to the same frozen plan; every bad key or value
is refused with its name."""

import json
import os

import pytest

from fedgen_debug.monitor.plan import cadence_seconds, load_plan, plan_from_dict

TOML = """
data = "synthetic-images:writers=20,seed=4"
periods = 8
rounds_per_period = 5
rollout = "invert:3=0.05,4=0.2,5=0.5,7=0"
cadence = "24h"
seed = 4
[fleet]
initial = 0.7
window = 0.5
[privacy]
noise_multiplier = 1.0
clients_per_round = 5
clip = 0.1
[budget]
epsilon = 40
[alerts]
persistence = 2
window = 3
calibration_periods = 2
[[auxiliaries]]
kind = "gan"
select = "by-user-accuracy:low"
preset = "test"
[[auxiliaries]]
kind = "gan"
select = "by-user-accuracy:high"
preset = "test"
"""


def _raw():
    import tomllib

    return tomllib.loads(TOML)


def test_toml_and_json_plans_load_to_the_same_validated_plan(tmp_path):
    (tmp_path / "plan.toml").write_text(TOML)
    (tmp_path / "plan.json").write_text(json.dumps(_raw()))
    plan = load_plan(str(tmp_path / "plan.toml"))
    assert plan == load_plan(str(tmp_path / "plan.json"))
    assert [a.name for a in plan.auxiliaries] == ["gan-by-user-accuracy-low", "gan-by-user-accuracy-high"]
    assert plan.fleet.initial == 0.7 and plan.fleet.window == 0.5 and plan.fleet.seed == 4  # the plan's seed
    assert plan.fleet.join_rate == 0.1  # defaults fill what the section leaves out
    assert plan.budget_epsilon == 40.0 and plan.privacy.clients_per_round == 5
    assert cadence_seconds(plan.cadence) == 86400
    assert json.loads(json.dumps(plan.to_json()))["auxiliaries"][0]["select"] == "by-user-accuracy:low"


def _with(**changes):
    raw = _raw()
    for path, value in changes.items():
        *parents, key = path.split("__")
        node = raw
        for parent in parents:
            node = node[parent] if not parent.isdigit() else node[int(parent)]
        if value is None:
            del node[key]
        else:
            node[key] = value
    return raw


@pytest.mark.parametrize("changes, message", [
    ({"colour": "red"}, "plan: unknown key"),
    ({"periods": None}, "plan: missing periods"),
    ({"fleet__seed": 3}, "fleet: unknown key"),
    ({"privacy__clip": 0.0}, "clip must be > 0"),
    ({"privacy__noise": 1.0}, "privacy: unknown key"),
    ({"budget__epsilon": -1.0}, "budget: epsilon must be > 0"),
    ({"alerts__persistence": 4}, "persistence must be in"),
    ({"alerts__calibration_periods": 8}, "must be fewer than periods"),
    ({"auxiliaries__0__kind": "vae"}, "kind must be one of"),
    ({"auxiliaries__1__select": "by-user-accuracy:low"}, "each must differ"),
    ({"rollout": "concat:3=0.1"}, "concat needs a char-lm or word-lm auxiliary"),
    ({"rollout": "invert:3"}, "PERIOD=FRACTION"),
    ({"cadence": "daily"}, "cadence must look like"),
    ({"data": "nosuch:thing"}, "nosuch"),
    ({"fleet__window": 0.0}, "window must be in"),
    # Missing keys and values of the wrong type: each was a TypeError's traceback.
    ({"privacy__noise_multiplier": None}, r"^privacy: missing noise_multiplier.$"),
    ({"privacy__noise_multiplier": "0.1"}, r"^privacy: noise_multiplier must be a number. Found '0.1'.$"),
    ({"periods": "3"}, r"^plan: periods must be an integer. Found '3'.$"),
    ({"periods": 3.5}, r"^plan: periods must be an integer. Found 3.5.$"),
    ({"privacy__clients_per_round": True}, r"^privacy: clients_per_round must be an integer. Found True.$"),
    ({"budget__epsilon": "lots"}, r"^budget: epsilon must be a number. Found 'lots'.$"),
    ({"fleet__window": 1.5}, r"^fleet: window must be in"),   # [alerts] has a window too
    ({"auxiliaries": {"kind": "gan"}}, r"^auxiliaries: must be a list of tables"),
    ({"budget": 40}, r"^budget: must be a table of keys"),
    ({"auxiliaries__0__preset": 3}, r"^auxiliaries: preset must be a string. Found 3.$"),
])
def test_bad_plans_are_refused_naming_the_problem(changes, message):
    with pytest.raises(ValueError, match=message):
        plan_from_dict(_with(**changes))


def test_a_missing_plan_file_is_named(tmp_path):
    with pytest.raises(ValueError, match="no such plan file"):
        load_plan(str(tmp_path / "absent.toml"))
    (tmp_path / "bad.toml").write_text("data = synthetic\n")
    with pytest.raises(ValueError, match=r"bad.toml: not TOML \(Invalid value"):
        load_plan(str(tmp_path / "bad.toml"))
    (tmp_path / "plan.yaml").write_text("data: x\n")
    with pytest.raises(ValueError, match=r"plan.yaml: a plan is a .toml or a .json file."):
        load_plan(str(tmp_path / "plan.yaml"))
    (tmp_path / "short.toml").write_text(TOML.replace("clip = 0.1\n", ""))
    with pytest.raises(ValueError, match=r"short.toml: privacy: missing clip."):
        load_plan(str(tmp_path / "short.toml"))


def test_the_docs_example_plan_loads(tmp_path):
    """The plan docs/monitoring.md shows is a valid plan (copied by users as it stands)."""
    import os
    import re

    repository = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    page = open(os.path.join(repository, "docs", "monitoring.md"), encoding="utf-8").read()
    (block,) = re.findall(r"```toml\n(.*?)```", page, re.S)[:1]
    path = tmp_path / "plan.toml"
    path.write_text(block)
    from fedgen_debug.monitor.plan import load_plan

    plan = load_plan(str(path))
    assert plan.periods == 12 and plan.rounds(1) == 200 and plan.rounds(2) == 40
    assert plan.auxiliaries[0].name == "gan-by-user-accuracy-low" and plan.fleet.window == 0.5


def test_a_plans_relative_paths_are_read_beside_it_from_any_working_directory(tmp_path, monkeypatch):
    """A plan names its data, primary model and vocabulary as its neighbours; resumed from another working
    directory it must find the same files, not other ones or none."""
    import tomllib

    plans = tmp_path / "plans"
    (plans / "models").mkdir(parents=True)
    (plans / "models" / "users_model.keras").write_text("")   # the plan checks it exists; loaded later
    images = _raw() | {"data": "npz:fleet.npz,background=black", "primary": "models/users_model.keras"}
    del images["rollout"]
    text = tomllib.loads(TOML.replace("synthetic-images:writers=20,seed=4", "jsonl:../shared/users.jsonl"))
    del text["rollout"]
    text["auxiliaries"] = [{"kind": "char-lm", "preset": "test", "vocab": "file:vocab.txt"},
                           {"kind": "word-lm", "preset": "test", "vocab": "file:/abs/vocab.txt"}]
    (plans / "images.json").write_text(json.dumps(images))
    (plans / "text.json").write_text(json.dumps(text))
    monkeypatch.chdir(tmp_path)
    for working_directory in (tmp_path, plans / "models"):
        monkeypatch.chdir(working_directory)
        plan = load_plan(os.path.relpath(plans / "images.json"))
        assert plan.data == f"npz:{plans / 'fleet.npz'},background=black"
        assert plan.primary == str(plans / "models" / "users_model.keras")
        plan = load_plan(str(plans / "text.json"))
        assert plan.data == f"jsonl:{tmp_path / 'shared' / 'users.jsonl'}"
        assert [a.vocab for a in plan.auxiliaries] == [f"file:{plans / 'vocab.txt'}", "file:/abs/vocab.txt"]
    images["primary"] = "absent.keras"
    (plans / "images.json").write_text(json.dumps(images))
    with pytest.raises(ValueError, match=f"primary: no such file or model directory '{plans / 'absent.keras'}'"):
        load_plan(str(plans / "images.json"))


def test_a_monitor_stored_with_relative_paths_resumes_from_where_it_read_them_and_nowhere_else(tmp_path, monkeypatch):
    """A monitor started before plans read their paths beside the plan file stored them relative, read from its
    working directory. Resumed from that directory, its plan file now loads them absolute: the same plan (its
    periods may change), not "another plan"; resumed from elsewhere, they named other files: another plan."""
    from fedgen_debug.monitor.plan import paths_beside_plan, stored_plan_read_here

    def as_stored(raw):
        return json.loads(json.dumps(plan_from_dict(raw).to_json()))

    raw = _raw() | {"data": "npz:fleet.npz,background=black", "primary": "models/users_model.keras"}
    del raw["rollout"]
    plans = tmp_path / "plans"
    (plans / "models").mkdir(parents=True)
    (plans / "models" / "users_model.keras").write_text("")   # the plan checks it exists
    monkeypatch.chdir(plans)
    stored = as_stored(raw)                                   # what an older monitor wrote, started here
    now = as_stored(paths_beside_plan(raw, str(plans)))       # the same file, loaded today
    assert stored_plan_read_here(stored, now, str(plans)) == now
    assert stored_plan_read_here(stored, {**now, "periods": now["periods"] + 2}, str(plans)) == now
    assert stored_plan_read_here(stored, now, str(tmp_path)) is None           # other files from there
    assert stored_plan_read_here(now, now, str(plans)) is None                 # nothing relative: nothing to do
    assert stored_plan_read_here(stored, {**now, "samples": 7}, str(plans)) is None   # another plan still
    assert stored_plan_read_here(None, now, str(plans)) is None
