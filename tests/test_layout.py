"""The package's shape, held as issue 30 drew it: the import map's contracts (pyproject.toml's
[tool.importlinter], checked by import-linter), no folder with more than 12 modules on one floor,
and no class with more than 20 public methods."""

from __future__ import annotations

import ast
import contextlib
import io
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tunebank"
MAX_MODULES = 12
MAX_PUBLIC_METHODS = 20


def test_the_import_map_keeps_its_contracts(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlinter.cli import lint_imports

    monkeypatch.chdir(PACKAGE.parent)  # where pyproject.toml is; no cache is written there
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = lint_imports(no_cache=True)
    assert code == 0, out.getvalue()


def test_no_folder_has_more_than_twelve_modules() -> None:
    crowded = {str(folder.relative_to(PACKAGE.parent)): count
               for folder in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir())]
               if (count := len(list(folder.glob("*.py")))) > MAX_MODULES}
    assert not crowded


def public_methods(tree: ast.Module) -> dict[str, list[str]]:
    """Each class of a module with its public methods (properties included)."""
    return {node.name: [item.name for item in node.body
                        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                        and not item.name.startswith("_")]
            for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}


def test_no_class_has_more_than_twenty_public_methods() -> None:
    wide = {f"{path.relative_to(PACKAGE.parent)}:{name}": len(methods)
            for path in PACKAGE.rglob("*.py")
            for name, methods in public_methods(ast.parse(path.read_text())).items()
            if len(methods) > MAX_PUBLIC_METHODS}
    assert not wide


def test_the_counter_sees_a_wide_class() -> None:
    source = "class Wide:\n" + "".join(f"    def m{i}(self): ...\n" for i in range(21))
    source += "    def _private(self): ...\n"
    assert len(public_methods(ast.parse(source))["Wide"]) == 21
