"""Check that isolab's imports go one way: down the layers, no cycles, no library → CLI.

    python scripts/check_layers.py        # exit 1 and one line per violation

Every `import` and `from … import` of an isolab module counts, at any depth (inside functions
too: a lazy import is still a dependency), and so does a module named as a string constant
(`sys.modules.get("isolab.rl.train")`, `importlib.import_module("isolab.…")`): reaching a
module by name is a dependency that the import statements would hide. Layers, from the top (a module may import its own
layer, if that makes no cycle, and any layer below):

    cli → study → verdicts → sweep, frontier, plots, synthetic → rl, planning → models, compute,
        tracking, difficulty → config, trl_args, typed_fields, table, vocab, stop, tasks, paths,
        logs, metrics, userinput, hub, deadline

Two more rules keep the studies apart: no module under `isolab/verdicts/` imports `isolab.study`
(the statistics know no study), and no study folder (`isolab/study/<study>/`, one with a
`claims.py`) imports another study's folder; the shared study infrastructure (registry,
pipeline, pages, summaries, the hubs `isolab.study.claims` and `isolab.study.calibration`) may
be imported by any of them.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "isolab"

#: Top layer first. A module's layer is that of its first path component under isolab/.
LAYERS: list[set[str]] = [
    {"cli"},
    {"study"},
    {"verdicts"},  # tests the papers' claims on sweeps' results, with frontier's fits
    {"sweep", "frontier", "plots", "synthetic"},
    {"rl", "planning"},  # planning reads rl.engines' choice of engine (an old-policy forward)
    {"models", "compute", "tracking", "difficulty"},
    {
        "config",
        "trl_args",
        "typed_fields",
        "table",
        "vocab",
        "stop",
        "tasks",
        "paths",
        "logs",
        "metrics",
        "userinput",
        "hub",
        "deadline",
        "__init__",
    },
]


def module_name(path: Path, package: Path = PACKAGE) -> str:
    rel = path.relative_to(package.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """isolab modules that `path` imports, resolved to the modules that exist."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from isolab.x import y`: y is a submodule, or a name defined in isolab.x
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        else:
            targets = _by_name(node)
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target.startswith("isolab") and target != "isolab" and target != name:
                out.add(target)
    return out


def _by_name(node: ast.AST) -> list[str]:
    """Modules reached by a string: `sys.modules[…]`, `sys.modules.get(…)`, `import_module(…)`."""
    arg: ast.AST | None = None
    if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "sys.modules":
        arg = node.slice
    elif isinstance(node, ast.Call) and node.args:
        func = ast.unparse(node.func)
        if func in ("sys.modules.get", "import_module", "importlib.import_module"):
            arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    return []


def layer_of(module: str) -> int:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    for i, layer in enumerate(LAYERS):
        if top in layer:
            return i
    raise KeyError(f"{module}: not in any layer of scripts/check_layers.py; add it")


def study_folders(package: Path = PACKAGE) -> set[str]:
    """The curated studies' folders: the packages under isolab/study/ that state claims
    (a `claims.py`); the rest of isolab/study/ (registry, pipeline, pages, the hubs) is their
    shared infrastructure."""
    return {p.parent.name for p in (package / "study").glob("*/claims.py")}


def folder_of(module: str, folders: set[str]) -> str | None:
    """The study folder `module` lies in (`isolab.study.<folder>[.…]`), or None."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "study" and parts[2] in folders else None


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check(package: Path = PACKAGE) -> list[str]:
    """Every violation, one sentence each (empty when the layering holds)."""
    files = {module_name(p, package): p for p in package.rglob("*.py")}
    known = set(files)
    graph = {name: imports_of(path, name, known) for name, path in files.items()}
    folders = study_folders(package)
    problems = []
    for name, deps in sorted(graph.items()):
        for dep in sorted(deps):
            mine, theirs = folder_of(name, folders), folder_of(dep, folders)
            if dep.startswith("isolab.cli") and not name.startswith("isolab.cli"):
                problems.append(f"{name} imports the command line {dep}: move the helper lower")
            elif name.startswith("isolab.verdicts") and dep.startswith("isolab.study"):
                problems.append(
                    f"{name} imports the study module {dep}: verdicts/ holds the reusable "
                    "statistics; move what names a study into its folder isolab/study/<study>/"
                )
            elif mine and theirs and mine != theirs:
                problems.append(
                    f"{name} (study {mine}) imports {dep} of another study's folder ({theirs}): "
                    "move the shared helper to isolab/study/ (summaries, report) or isolab/verdicts/"
                )
            elif layer_of(dep) < layer_of(name):
                problems.append(
                    f"{name} (layer {layer_of(name)}) imports {dep} (layer {layer_of(dep)})"
                )
    for cycle in find_cycles(graph):
        problems.append("import cycle: " + " → ".join(cycle))
    return problems


if __name__ == "__main__":
    found = check()
    for line in found:
        print(line)
    print(f"{len(found)} layering problem(s)" if found else "layers: ok, no cycles")
    sys.exit(1 if found else 0)
