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
