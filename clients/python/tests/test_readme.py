"""The README's five-minute path: its Python blocks compile, and its module and its tests
run as written (pytest in a fresh directory, no daemon)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_python_blocks_compile() -> None:
    assert len(BLOCKS) >= 4
    for i, b in enumerate(BLOCKS):
        compile(b, "README block %d" % i, "exec")


def test_five_minute_module_and_its_tests_pass(tmp_path: Path) -> None:
    (module,) = [b for b in BLOCKS if "async def recall" in b]
    (tests,) = [b for b in BLOCKS if "from recall import recall" in b]
    (tmp_path / "recall.py").write_text(module)
    (tmp_path / "test_recall.py").write_text(tests)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_recall.py"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "3 passed" in res.stdout
