"""The README's examples run as tests, so they cannot rot."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)
SHELL_BLOCKS = re.findall(r"```bash\n(.*?)```", README, flags=re.S)


def test_readme_has_examples():
    assert PYTHON_BLOCKS, "README lost its Python example"


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=lambda b: b.splitlines()[0][:40])
def test_readme_python_block_runs(block):
    exec(compile(block, "README.md", "exec"), {"__name__": "__readme__"})


def test_readme_opens_with_the_two_commands():
    """First command: install + cluster the built-in data; second: install + the whole suite."""
    assert len(SHELL_BLOCKS) >= 2
    assert "softkmeans cluster" in SHELL_BLOCKS[0]
    assert "pytest" in SHELL_BLOCKS[1] and ".[test]" in SHELL_BLOCKS[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'pip install --quiet ".[test]"' in ci and "python -m pytest -q" in ci
