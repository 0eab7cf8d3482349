"""The README's programs print what the README says (device names and `*` are wildcards)."""

import os
import re
import subprocess
import sys

import pytest

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def programs():
    text = open(README, encoding="utf-8").read()
    pairs = re.findall(r"```python\n(.*?)```\n\n```text\n(.*?)```", text, re.S)
    assert len(pairs) == 5, "the README has five programs, each followed by its output"
    return pairs


DEVICE = re.compile(r"^(gpu:\d+|cpu:0):")


@pytest.mark.parametrize("index", range(5))
def test_program(index, tmp_path):
    code, want = programs()[index]
    # A file, not `-c`: @vectorize reads the function's source.
    script = tmp_path / f"program{index + 1}.py"
    script.write_text(code)
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert out.returncode == 0, out.stderr
    got = out.stdout.splitlines()
    want = want.splitlines()
    assert len(got) == len(want), out.stdout
    for g, w in zip(got, want):
        g, w = DEVICE.sub("DEVICE:", g), DEVICE.sub("DEVICE:", w)
        pattern = ".*".join(re.escape(part) for part in w.split("*"))
        assert re.fullmatch(pattern, g), f"{g!r} does not match {w!r}"
