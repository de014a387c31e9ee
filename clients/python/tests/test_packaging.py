"""What a Python user expects of the package: its version on the command line, a
typed-package marker, and a wheel with the metadata, py.typed and the pytest plugin."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import cycled

ROOT = Path(__file__).resolve().parents[1]


def test_python_m_cycled_version() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    res = subprocess.run([sys.executable, "-m", "cycled", "--version"], capture_output=True, text=True, env=env, check=True)
    assert res.stdout.strip() == "cycled (Python SDK) %s" % cycled.__version__
    assert cycled.__version__.count(".") == 2


def test_typed_marker_is_shipped() -> None:
    assert (ROOT / "src" / "cycled" / "py.typed").is_file()


HAS_BUILD = all(importlib.util.find_spec(m) is not None for m in ("pip", "setuptools", "wheel"))


@pytest.mark.skipif(not HAS_BUILD, reason="pip, setuptools and wheel are needed to build the wheel (Debian: python3-pip python3-setuptools python3-wheel)")
def test_wheel_metadata(tmp_path: Path) -> None:
    project = tmp_path / "project"  # a copy: a build leaves build/ and egg-info behind
    project.mkdir()
    shutil.copy(ROOT / "pyproject.toml", project)
    shutil.copy(ROOT / "README.md", project)
    shutil.copytree(ROOT / "src", project / "src", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w", str(tmp_path), str(project)],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("cycled-*.whl")
    assert wheel.name.startswith("cycled-%s-py3-none-any" % cycled.__version__)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = z.read("cycled-%s.dist-info/METADATA" % cycled.__version__).decode()
        entry_points = z.read("cycled-%s.dist-info/entry_points.txt" % cycled.__version__).decode()
    assert {"cycled/py.typed", "cycled/testing.py", "cycled/aio.py", "cycled/__main__.py"} <= names
    assert not any(n.startswith("tests/") for n in names)
    assert "Requires-Python: >=3.10" in meta and "Classifier: Typing :: Typed" in meta
    assert "Requires-Dist" not in meta.split("Provides-Extra")[0]  # no runtime dependency
    assert "pytest11" in entry_points and "cycled = cycled.pytest_plugin" in entry_points
