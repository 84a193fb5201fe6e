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
