"""The import graph of harness/: no circle among its modules, no import from a lower layer into a higher one, and
a core that imports only the standard library, numpy and itself.

The graph is read from the source with `ast`, so every import counts: top-level, function-local and under
`if TYPE_CHECKING:`. `from pkg import name` is an edge to pkg.name when that is a module, else to pkg. The fixture
tests build small package trees where each verdict must come out the other way.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

HARNESS = Path(__file__).resolve().parent.parent / "harness"

#: The layers of harness/, lowest first: a module may import its own layer or a lower one. "harness" is the root
#: package's own modules (__init__.py, offline.py, threads.py); "harness.cli" holds cli.py and __main__.py.
#: decide/ (a pure function from records to answers) sits below execute/: the scenario phase asks it which
#: configurations the answers name, rather than restating its rules (harness.execute.scenario_phase).
LAYERS = (
    ("harness.core",),
    ("harness",),
    ("harness.yolo",),
    ("harness.backends",),
    ("harness.accuracy",),
    ("harness.measure",),
    ("harness.diagnosis",),
    ("harness.scenarios",),
    ("harness.decide",),
    ("harness.plan",),
    ("harness.execute",),
    ("harness.history",),
    ("harness.report",),
    ("harness.exports",),
    ("harness.pytest_plugin",),
    ("harness.cli", "harness.__main__"),
)
#: What the core may import besides itself and the standard library. Nothing of the harness above the core, no
#: runtime (torch, ultralytics, onnxruntime, openvino, executorch, pynvml), and none of the libraries the layers above
#: bring for one job each (psutil: harness.threads and harness.measure.machine; scipy: harness.measure.stats;
#: filelock: the export cache).
CORE_ALLOWED = ("numpy",)


def modules(root: Path) -> dict[str, Path]:
    """Module name -> file of every .py file under the package directory `root` (a package is its __init__.py)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every name module `name` imports, anywhere in its file; relative imports resolved, `from pkg import x` taken
    as pkg.x where that is a module of `known`."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.add(sub if sub in known else target)
    return out


def owner(name: str, known: dict[str, Path]) -> str | None:
    """The module of `known` that `name` is, or lies in (a.b.c -> a.b when only that is a module)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def graph(root: Path, exclude: tuple[str, ...] = ()) -> dict[str, set[str]]:
    """Module -> the package's modules it imports, for the package at `root`; modules under `exclude` (and edges to
    them) left out."""
    known = modules(root)

    def kept(m: str) -> bool:
        return not any(m == e or m.startswith(e + ".") for e in exclude)

    out = {}
    for name, path in known.items():
        if kept(name):
            targets = {owner(t, known) for t in imports(name, path, known)}
            out[name] = {t for t in targets if t and t != name and kept(t)}
    return out


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(g):
        if start in index:
            continue
        work = [(start, iter(sorted(g[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(g.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def layer_of(module: str, layers: tuple[tuple[str, ...], ...]) -> int | None:
    """The index of the layer whose group holds `module` (the longest matching group name wins)."""
    best, best_len = None, -1
    for i, group in enumerate(layers):
        for g in group:
            if (module == g or module.startswith(g + ".")) and len(g) > best_len:
                best, best_len = i, len(g)
    return best


def upward(g: dict[str, set[str]], layers: tuple[tuple[str, ...], ...]) -> list[str]:
    """Each import from a lower layer into a higher one (or from/to a module no layer names), as "a -> b"."""
    out = []
    for a in sorted(g):
        for b in sorted(g[a]):
            la, lb = layer_of(a, layers), layer_of(b, layers)
            if la is None or lb is None or lb > la:
                out.append(f"{a} -> {b}")
    return out


def foreign(root: Path, core: str, allowed: tuple[str, ...]) -> list[str]:
    """Each import of a module under `core` that is neither the standard library, `allowed`, nor `core` itself."""
    known = modules(root)
    out = []
    for name, path in known.items():
        if name != core and not name.startswith(core + "."):
            continue
        for t in sorted(imports(name, path, known)):
            top = t.partition(".")[0]
            if top == "__future__" or top in sys.stdlib_module_names or top in allowed:
                continue
            if t == core or t.startswith(core + "."):
                continue
            out.append(f"{name} imports {t}")
    return out


def circle_text(found: list[list[str]]) -> str:
    return "; ".join(" <-> ".join(c) for c in found)


# -- harness/ ------------------------------------------------------------------------------------------------------
def test_every_module_of_harness_is_in_a_layer():
    assert [m for m in modules(HARNESS) if layer_of(m, LAYERS) is None] == []


def test_no_import_circle_in_harness():
    found = circles(graph(HARNESS))
    assert not found, f"import circles: {circle_text(found)}"


def test_no_import_from_a_lower_layer_into_a_higher_one():
    assert upward(graph(HARNESS), LAYERS) == []


def test_core_imports_only_the_standard_library_numpy_and_itself():
    assert foreign(HARNESS, "harness.core", CORE_ALLOWED) == []


# -- the other way: fake package trees -----------------------------------------------------------------------------
def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


FAKE_LAYERS = (("pkg.core",), ("pkg",), ("pkg.high",))


def test_a_circle_is_found_and_named_through_relative_and_function_local_imports(tmp_path):
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "high/__init__.py": "",
            "high/a.py": "from pkg.high import b\n",
            "high/b.py": "def f():\n    from . import c\n",
            "high/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import X\n",
            "high/d.py": "from pkg.high import a\n",
        },
    )
    found = circles(graph(root))
    assert found == [["pkg.high.a", "pkg.high.b", "pkg.high.c"]]
    assert "pkg.high.a <-> pkg.high.b <-> pkg.high.c" in circle_text(found)
    # the same tree with the TYPE_CHECKING edge gone has no circle
    (root / "high/c.py").write_text("import json\n")
    assert circles(graph(root)) == []


def test_excluding_a_package_leaves_its_circle_out(tmp_path):
    root = _tree(
        tmp_path, {"__init__.py": "", "high/__init__.py": "", "high/a.py": "from pkg.high import b\n"}
    )
    (root / "high/b.py").write_text("import pkg.high.a\n")
    assert circles(graph(root)) == [["pkg.high.a", "pkg.high.b"]]
    assert circles(graph(root, exclude=("pkg.high",))) == []


def test_an_upward_import_is_reported_and_a_downward_one_is_not(tmp_path):
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "core/__init__.py": "",
            "core/low.py": "import numpy\n",
            "core/record.py": "def f():\n    from pkg.high.top import thing\n",
            "high/__init__.py": "",
            "high/top.py": "from pkg.core import low\nfrom pkg import VERSION\n",
        },
    )
    assert upward(graph(root), FAKE_LAYERS) == ["pkg.core.record -> pkg.high.top"]
    (root / "core/record.py").write_text("from pkg.core import low\n")
    assert upward(graph(root), FAKE_LAYERS) == []


def test_a_core_importing_a_third_party_library_or_a_higher_layer_is_reported(tmp_path):
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "core/__init__.py": "",
            "core/ok.py": "from __future__ import annotations\nimport json, os.path\nimport numpy as np\nfrom . import other\n",
            "core/other.py": "def f():\n    import torch\n    import psutil\n",
            "core/up.py": "from pkg import VERSION\n",
        },
    )
    assert foreign(root, "pkg.core", CORE_ALLOWED) == [
        "pkg.core.other imports psutil",
        "pkg.core.other imports torch",
        "pkg.core.up imports pkg",
    ]
    (root / "core/other.py").write_text("import math\n")
    (root / "core/up.py").write_text("from pkg.core.ok import x\n")
    assert foreign(root, "pkg.core", CORE_ALLOWED) == []
