"""The library's layout (issue 34): no import cycle between its modules, nor between its
folders, counting every import wherever it is written (a function-level import is an
edge too), and no two library modules with the same file name.

Read from the AST of every module under python/softkmeans (the experiments included):
an edge a -> b for each `import`/`from ... import` of a softkmeans module b in a
(a `from P import name` where P.name is a module counts as P.name).

Folders: a package (softkmeans.fit, softkmeans.sources, ...) is one node; each module
at the top (softkmeans.estimator, ...) its own. A cycle there is a loop through a folder:
fit/driver -> phase -> fit/annealing was one.
"""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import softkmeans

ROOT = Path(softkmeans.__file__).parent


def _modules():
    """{dotted name: path} of every softkmeans module (a package by its __init__)."""
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _package_of(name, path):
    return name if path.name == "__init__.py" else name.rsplit(".", 1)[0]


def _imports(name, path, modules):
    """The softkmeans modules that module `name` imports, anywhere in its file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _package_of(name, path)
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in modules:
                    out.add(sub)
                elif target in modules:
                    out.add(target)
    out.discard(name)
    return out


def _graph():
    """{module: the modules it imports}, without the edges to its own packages (a module
    is imported after its packages' __init__ anyway, so they close no loop)."""
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    return {a: {b for b in bs if not a.startswith(b + ".")} for a, bs in graph.items()}


def _cycle(graph):
    """A cycle of the directed graph as a list of nodes, or None (depth-first search)."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _folder(name):
    """softkmeans.fit.driver -> softkmeans.fit; softkmeans.estimator stays itself."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 else name


def test_no_import_cycle_between_modules():
    cycle = _cycle(_graph())
    assert cycle is None, " -> ".join(cycle)


def test_no_import_cycle_between_folders():
    folders = collections.defaultdict(set)
    for a, bs in _graph().items():
        for b in bs:
            if _folder(a) != _folder(b):
                folders[_folder(a)].add(_folder(b))
    cycle = _cycle(folders)
    assert cycle is None, " -> ".join(cycle)


def test_no_two_library_modules_share_a_file_name():
    names = collections.defaultdict(list)
    for name, path in _modules().items():
        if path.name != "__init__.py":
            names[path.name].append(name)
    shared = {file: mods for file, mods in names.items() if len(mods) > 1}
    assert shared == {}
