"""The type stubs (_sandlet.pyi) describe what the extension really has."""
from __future__ import annotations

import ast
import os

import sandlet
from sandlet import _sandlet


def stub_names() -> dict:
    path = os.path.join(os.path.dirname(os.path.abspath(sandlet.__file__)), "_sandlet.pyi")
    tree = ast.parse(open(path).read())
    names: dict = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        elif isinstance(node, ast.FunctionDef):
            names[node.name] = set()
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = set()
    return names


def test_every_public_name_has_a_stub() -> None:
    stubs = stub_names()
    for name in dir(_sandlet):
        if name.startswith("__"):
            continue
        assert name in stubs, f"_sandlet.{name} has no stub in _sandlet.pyi"
        obj = getattr(_sandlet, name)
        if isinstance(obj, type) or name == "_bench":
            for member in vars(obj):
                if not member.startswith("_"):
                    assert member in stubs[name], f"_sandlet.{name}.{member} has no stub"


def test_stubs_name_nothing_that_does_not_exist() -> None:
    for name, members in stub_names().items():
        if name == "Completion":
            continue  # a type alias of the stub only
        assert hasattr(_sandlet, name), f"stub _sandlet.{name} does not exist"
        for member in members - {"__init__"}:
            assert hasattr(getattr(_sandlet, name), member), f"stub _sandlet.{name}.{member} does not exist"


def test_package_is_typed() -> None:
    assert os.path.isfile(os.path.join(os.path.dirname(os.path.abspath(sandlet.__file__)), "py.typed"))
