"""The card's layout never shadows the stdlib, and the installed package has its subpackages."""

import os
import subprocess
import sys

from conftest import REPO_ROOT


def _run_in_repo_root(*args):
    return subprocess.run([sys.executable, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def test_pip_runs_from_repo_root():
    result = _run_in_repo_root("-m", "pip", "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("pip ")


def test_asyncio_and_stdlib_selectors_import_from_repo_root():
    result = _run_in_repo_root("-c", "import asyncio, selectors; print(selectors.__file__); "
                               "print(hasattr(selectors, 'DefaultSelector'))")
    assert result.returncode == 0, result.stderr
    path, has_default_selector = result.stdout.split()
    assert not path.startswith(REPO_ROOT)
    assert has_default_selector == "True"


def test_venv_module_works_from_repo_root(tmp_path):
    result = _run_in_repo_root("-m", "venv", "--without-pip", str(tmp_path / "v"))
    assert result.returncode == 0, result.stderr


def test_card_folders_have_no_init_and_install_as_subpackages():
    for folder in ("models", "selectors", "app"):
        assert os.path.isdir(os.path.join(REPO_ROOT, folder))
        assert not os.path.exists(os.path.join(REPO_ROOT, folder, "__init__.py")), folder
    import fedgen_debug.models
    import fedgen_debug.selectors

    for module in (fedgen_debug.models, fedgen_debug.selectors):
        (path,) = list(module.__path__)
        assert "site-packages" in path, path


def _fake_python(directory, version: str):
    fake = directory / "python3"
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} -c \"import sys; sys.exit(0 if '{version}' == '3.11' else 1)\"\n")
    fake.chmod(0o755)


def test_missing_python311_gives_a_clear_message(tmp_path):
    _fake_python(tmp_path, "3.12")
    result = subprocess.run(["/bin/sh", os.path.join(REPO_ROOT, "scripts", "find-python311.sh")],
                            env={"PATH": str(tmp_path)}, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "fedgen-debug needs Python 3.11" in result.stderr
    assert "make PYTHON=/path/to/python3.11" in result.stderr


def test_python311_is_found_on_path(tmp_path):
    _fake_python(tmp_path, "3.11")
    result = subprocess.run(["/bin/sh", os.path.join(REPO_ROOT, "scripts", "find-python311.sh")],
                            env={"PATH": str(tmp_path)}, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(tmp_path / "python3")


# ---- The import drawing: floors, not a web (ARCHITECTURE.md) -------------------------------------------
# A package may import its own modules and any package on a lower floor; nothing imports upwards, so no
# two packages can form a cycle. Where this differs from ARCHITECTURE.md's list, why:
# - runs/ and privacy/ are floors under training/: training uses the DP queries and the ledger
#   (privacy/), and both write through the run store (runs/, which imports neither);
# - device/ sits above models/ and selectors/: on-device selection runs the primary model and a criterion;
# - analysis/ may use training/ only to rebuild a released model (NARROW below), never to train.
FLOORS = (
    ("util", "seeding progress kept disk_cache spec_grammar stats log_setup validation rng_streams runtime tff_workers "
             "tff_forwarder"),
    ("data", "data"),
    ("runs", "runs"),
    ("privacy", "privacy"),
    ("models", "models"),
    ("selectors", "selectors"),
    ("device", "device"),
    ("training", "training"),
    ("analysis", "analysis"),
    ("memorization", "memorization"),
    ("experiments", "experiments"),
    ("monitor", "monitor"),
    ("app", "app"),
    ("cli", "cli"),
)
# Arrows a floor allows in general but these packages must not draw (their module-level contract).
NARROW = {
    # The app reads the run store and the ledger; it never loads data, models or TensorFlow.
    "app": {"allowed": {"util", "runs", "privacy", "analysis"}},
    # Analysis rebuilds released models (their configs and loaders) and reads the store; it never trains.
    "analysis": {"training_modules": {"training.gan_run", "training.lm_run", "training.primary_cnn"}},
}
_SOURCE_ROOTS = {"fedgen_debug": "fedgen_debug", "models": "fedgen_debug.models",
                 "selectors": "fedgen_debug.selectors", "app": "fedgen_debug.app"}


def _floor_of_package() -> dict:
    return {package: floor for floor, (_, packages) in enumerate(FLOORS) for package in packages.split()}


def _package(dotted: str) -> str | None:
    """fedgen_debug.device.pixels -> device; fedgen_debug.stats -> stats; fedgen_debug -> None."""
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "fedgen_debug" else None


def import_edges() -> list[tuple[str, str, str]]:
    """(importing module, imported module, file) for every fedgen_debug import in the source tree,
    inside functions too (a lazy import is an arrow all the same)."""
    import ast

    edges = []
    for root, prefix in _SOURCE_ROOTS.items():
        for dirpath, _, files in os.walk(os.path.join(REPO_ROOT, root)):
            for name in sorted(f for f in files if f.endswith(".py")):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, os.path.join(REPO_ROOT, root))[:-3].replace(os.sep, ".")
                module = prefix if rel == "__init__" else f"{prefix}.{rel.removesuffix('.__init__')}"
                with open(path) as f:
                    tree = ast.parse(f.read())
                for node in ast.walk(tree):
                    targets = []
                    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                        targets = [f"{node.module}.{a.name}" for a in node.names]   # a name or a module
                    elif isinstance(node, ast.Import):
                        targets = [a.name for a in node.names]
                    edges += [(module, t, os.path.relpath(path, REPO_ROOT)) for t in targets
                              if t.startswith("fedgen_debug.")]
    return edges


def _drawing(edges) -> str:
    floor_of = _floor_of_package()
    arrows = {}
    for src, dst, _ in edges:
        a, b = _package(src), _package(dst)
        if a and b and a != b:
            arrows.setdefault(FLOORS[floor_of.get(a, 0)][0], set()).add(FLOORS[floor_of.get(b, 0)][0])
    lines = [f"{name:>13} -> {', '.join(sorted(arrows.get(name, set()) - {name}))}" for name, _ in reversed(FLOORS)]
    return "floors, top to bottom (each may import only the ones below it):\n" + "\n".join(lines)


def test_every_package_is_on_a_floor():
    floor_of = _floor_of_package()
    packages = {_package(m) for edge in import_edges() for m in edge[:2]} - {None}
    packages |= {n for n in os.listdir(os.path.join(REPO_ROOT, "fedgen_debug")) if not n.startswith("_")
                 and (n.endswith(".py") or os.path.isdir(os.path.join(REPO_ROOT, "fedgen_debug", n)))}
    packages = {p.removesuffix(".py") for p in packages} - {"__pycache__", "__version__"}
    assert packages <= set(floor_of), f"not on a floor of tests/test_layout.py: {sorted(packages - set(floor_of))}"


def violations(edges) -> list[str]:
    """Every arrow up a floor, and every arrow a narrow package must not draw."""
    floor_of, found = _floor_of_package(), []
    for src, dst, path in edges:
        a, b = _package(src), _package(dst)
        if not a or not b or a == b or a not in floor_of or b not in floor_of:
            continue
        if floor_of[b] > floor_of[a]:
            found.append(f"{path}: {src} -> {dst} (up from {a} to {b})")
        rules = NARROW.get(a, {})
        if "allowed" in rules and FLOORS[floor_of[b]][0] not in rules["allowed"]:
            found.append(f"{path}: {src} -> {dst} ({a} may import only {sorted(rules['allowed'])})")
        if b == "training" and "training_modules" in rules and \
                ".".join(dst.split(".")[1:3]) not in rules["training_modules"]:
            found.append(f"{path}: {src} -> {dst} ({a} uses training only to rebuild released models)")
    return found


def test_imports_point_down_the_floors_only():
    """No arrow up (so no cycle between packages), and no arrow a narrow package must not draw."""
    edges = import_edges()
    found = violations(edges)
    assert not found, "\n".join(found) + "\n\n" + _drawing(edges)


def test_the_floor_check_reports_upward_and_narrow_arrows():
    planted = [("fedgen_debug.device.pixels", "fedgen_debug.analysis.gan_analysis", "a.py"),    # up
               ("fedgen_debug.app.compare_page", "fedgen_debug.data.spec", "b.py"),            # app loads data
               ("fedgen_debug.analysis.gan_report", "fedgen_debug.training.loop", "c.py"),     # analysis trains
               ("fedgen_debug.analysis.gan_report", "fedgen_debug.training.gan_run", "d.py"),  # allowed
               ("fedgen_debug.experiments.gan", "fedgen_debug.device.pixels", "e.py")]          # allowed
    found = violations(planted)
    assert [f.split(":")[0] for f in found] == ["a.py", "b.py", "c.py"], found
    assert "analysis ->" in _drawing(import_edges())


def test_scenarios_is_gone_and_one_package_per_stage_exists():
    names = set(os.listdir(os.path.join(REPO_ROOT, "fedgen_debug")))
    assert "scenarios" not in names and "bugs" not in names
    assert {"device", "analysis", "experiments", "memorization", "runs", "privacy", "training"} <= names
