"""Imports point down (shared/STYLE.md, principle 18): no two modules of litebert import each other, directly or
through others, counting the imports made inside functions (an import hidden in a function to dodge a cycle is a
cycle all the same). The graph is read from the source with `ast`; a cycle is a strongly connected component of more
than one module (Tarjan's algorithm), checked here on small graphs whose answer is known."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def modules(root: Path = SRC / "litebert") -> dict[str, Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The litebert modules ``name`` imports anywhere in its file (``from P import m`` counts as P.m when that is a
    module, else as P)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            for a in node.names:
                found.add(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base)
    return {m for m in found if m in known and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_cycles_of_known_graphs():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert sorted(cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": {"d"}})) == [["a", "b", "c"], ["d", "e"]]


def test_imports_inside_functions_are_read(tmp_path):
    pkg = tmp_path / "litebert"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("def f():\n    from litebert.sub import b\n")
    (pkg / "sub" / "b.py").write_text("from . import a\n")
    found = modules(pkg)
    graph = {n: imports_of(n, p, set(found)) for n, p in found.items()}
    assert graph["litebert.sub.a"] == {"litebert.sub.b"} and graph["litebert.sub.b"] == {"litebert.sub.a"}
    assert cycles(graph) == [["litebert.sub.a", "litebert.sub.b"]]


def test_litebert_has_no_import_cycle():
    found = modules()
    graph = {n: imports_of(n, p, set(found)) for n, p in found.items()}
    assert len(graph) > 100 and any(graph.values())
    assert cycles(graph) == []


def test_the_rooms_import_downwards():
    """`tasks/` (what a task is) imports neither `finetuning/` nor `inference/`; `inference/` does not import
    `finetuning/`: the three rooms stack finetuning > inference > tasks."""
    found = modules()
    graph = {n: imports_of(n, p, set(found)) for n, p in found.items()}
    for room, below in (("litebert.tasks", ("litebert.finetuning", "litebert.inference")),
                        ("litebert.inference", ("litebert.finetuning",))):
        up = {(n, m) for n, ms in graph.items() if n.startswith(room) for m in ms if m.startswith(below)}
        assert not up, up
