"""The architecture's rules, checked on the source: imports run kernels ← ensemble ← jobs ← armillary (the
package's top, which gathers the everyday calls) with no cycle inside a layer, and nothing in ensemble/ or
jobs/ names a state variable of a space."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {"kernels": set(), "ensemble": {"kernels"}, "jobs": {"kernels", "ensemble"},
          "armillary": {"kernels", "ensemble", "jobs"}}


def layer(name: str) -> str:
    """The layer an absolute import names: ``armillary.kernels.x`` → kernels, ``armillary`` → armillary."""
    parts = name.split(".")
    return parts[1] if parts[0] == "armillary" and len(parts) > 1 else parts[0]


def imports(path: Path) -> set[str]:
    """Top-level packages and (for relative imports) sibling modules a file imports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module == "armillary":  # from armillary import ensemble
            found |= {"armillary." + alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module is None:  # from . import a, b
            found |= {"." * node.level + alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add("." * node.level + node.module)
    return found


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_imports_never_go_up_a_layer(package):
    for path in (ROOT / package).rglob("*.py"):
        for name in imports(path):
            top = layer(name)
            if top in LAYERS and top != package:
                assert top in LAYERS[package], f"{path.relative_to(ROOT)} imports {name}"


def module_graph(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Module → the modules of the same layer that importing it runs (relative or absolute, at the top of the file
    or inside a function: a deferred import is as much a dependency), e.g. ``ensemble.store`` → {``ensemble.plan``,
    …}.  A package counts as its ``__init__``: one that imports its submodules runs them, and importing a submodule
    of another package runs that package's ``__init__`` first, so both are edges; a module's own packages are not,
    since they have started before it does."""
    paths = {".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): path
             for path in (root / package).rglob("*.py")}
    graph = {}
    for module, path in paths.items():
        own_package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # ``from ..x import y`` in a.b.c names a.x: one package up per dot after the first
                    parts = own_package.split(".")[: len(own_package.split(".")) - node.level + 1]
                    origin = ".".join(parts + ([node.module] if node.module else []))
                else:
                    origin = node.module
                # ``from x import y`` imports the module x.y when y is one, else a name of x's __init__
                names |= {f"{origin}.{alias.name}" if f"{origin}.{alias.name}".removeprefix("armillary.") in paths
                          else origin for alias in node.names}
        named = {name.removeprefix("armillary.") for name in names} & paths.keys()
        packages = {".".join(name.split(".")[:end]) for name in named for end in range(1, name.count(".") + 1)}
        graph[module] = (named | {name for name in packages if not (module + ".").startswith(name + ".")}) - {module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan 1972): modules each of which imports,
    through the others, every other; each sorted, the largest first."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found, key=lambda component: (-len(component), component))


@pytest.mark.parametrize("package", ["kernels", "ensemble", "jobs"])
def test_modules_of_a_layer_import_without_a_cycle(package):
    graph = module_graph(package)
    found = circles(graph)
    assert not found, "\n".join(f"a circle of {len(component)} modules: {', '.join(component)}" for component in found)


def test_a_circle_through_package_inits_and_a_deferred_import_is_found(tmp_path):
    """The shape of the circle kernels/ had: a space's function imports the top module, which imports the systems
    package, whose ``__init__`` imports a system, which imports a module of the spaces package (running its
    ``__init__``, which imports the first space).  No edge in it is a module importing another directly."""
    files = {"spaces/__init__.py": "from .generalised import GENERALISED\n",
             "spaces/generalised.py": "def seed():\n    from ..integration import integrate\n",
             "spaces/rotation.py": "",
             "systems/__init__.py": "from . import heavy\n",
             "systems/heavy.py": "from ..spaces.rotation import ROTATION\n",
             "integration.py": "from .systems import SYSTEMS\n",
             "__init__.py": ""}
    for name, text in files.items():
        (tmp_path / "layer" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "layer" / name).write_text(text)
    assert circles(module_graph("layer", tmp_path)) == [["layer.integration", "layer.spaces", "layer.spaces.generalised",
                                                         "layer.systems", "layer.systems.heavy"]]


def test_no_state_variable_literal_outside_the_kernels():
    names = {"q", "omega", "R", "Omega", "q0", "omega0"}
    for package in ("ensemble", "jobs"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    assert node.value not in names, f"{path.relative_to(ROOT)}: literal {node.value!r}"
                if isinstance(node, ast.Attribute):
                    assert node.attr not in names, f"{path.relative_to(ROOT)}: attribute .{node.attr}"
            assert not re.search(r"""\[["'](q|omega)["']\]""", path.read_text()), path
