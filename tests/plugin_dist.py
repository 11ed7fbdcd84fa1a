"""A backend plug-in installed the way pip would leave it: a module and a ``dist-info`` folder
declaring its entry points, put on the path. Used by the tests of tuner/measure/plugins.py."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tunebank.tuner.measure.plugins import ENTRY_POINTS


def install_plugin(site: Path, monkeypatch: pytest.MonkeyPatch, module: str, source: str,
                   backends: dict[str, str]) -> None:
    """Install ``source`` as module ``module`` under ``site``, declaring ``backends`` (entry
    point name -> attribute of the module) in the tunebank.backends group."""
    info = site / f"{module}-1.0.dist-info"
    info.mkdir(parents=True)
    (site / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    name = module.replace("_", "-")
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
                                   encoding="utf-8")
    points = "".join(f"{point} = {module}:{attribute}\n" for point, attribute in backends.items())
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINTS}]\n{points}", encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))
