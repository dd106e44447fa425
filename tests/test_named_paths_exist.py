"""Docs that stay true: every repository path and every `python -m` module that the library, the docs, the
Makefile and the configs name exists (a renamed or moved file leaves no dangling name behind)."""
from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READ = re.compile(r"^(lib/.*\.(py|j2)|docs/.*\.md|README\.md|Makefile|nbgrader_config\.py|\.ci/run|"
                  r"deploy/.*|jupyter-config/.*|bench/.*\.py|environment\.yml|requirements.*\.txt)$")
PATH = re.compile(r"(?<![\w/.-])((?:lib|docs|tests|bench|deploy|source|release|notebooks|jupyter-config|\.ci)"
                  r"/[A-Za-z0-9_./*<>{}-]*[A-Za-z0-9_/*>}])")
MODULE = re.compile(r"python -m ((?:lmpolicy|lmpolicy_grader)(?:\.\w+)*)")
PLACEHOLDER = re.compile(r"NN|<|\*|\{")  # a pattern (source/ch11/NN_name.ipynb, bench/bench_*.py), not a file


def _names_a_file(named: str) -> bool:
    """A file with its extension or a folder with its slash: `notebooks/s` in "0.5 notebooks/s" is neither."""
    return named.endswith("/") or "." in named.rsplit("/", 1)[-1]


def _read_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / name for name in listed if READ.match(name)]


def test_every_named_repository_path_exists():
    missing = []
    for path in _read_files():
        text = path.read_text(errors="ignore")
        for match in PATH.finditer(text):
            named = match.group(1).rstrip(".")
            if _names_a_file(named) and not PLACEHOLDER.search(named) and not (ROOT / named).exists():
                missing.append(f"{path.relative_to(ROOT)}: {named}")
    assert missing == []


def test_every_named_python_module_exists():
    missing = []
    for path in _read_files():
        for match in MODULE.finditer(path.read_text(errors="ignore")):
            if importlib.util.find_spec(match.group(1)) is None:
                missing.append(f"{path.relative_to(ROOT)}: python -m {match.group(1)}")
    assert missing == []
