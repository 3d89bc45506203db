"""The example in docs/PYTHON.md runs as written."""

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "PYTHON.md"


@pytest.mark.december  # the example is the window protocol's (the default build)
def test_python_md_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) == 1
    assert len(blocks[0].splitlines()) <= 22
    exec(compile(blocks[0], str(DOC), "exec"), {})
    assert "\nok, using " in capsys.readouterr().out
