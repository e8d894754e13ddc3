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


def module_graph(package: str) -> dict[str, set[str]]:
    """Module → the modules of the same layer it imports (relative or absolute, at the top of the file or inside
    a function: a deferred import is as much a dependency), e.g. ``ensemble.store`` → {``ensemble.plan``, …}."""
    paths = {".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): path
             for path in (ROOT / package).rglob("*.py")}
    graph = {}
    for module, path in paths.items():
        own_package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = own_package.split(".")[: len(own_package.split(".")) - node.level + 1]
                    origin = ".".join(base + ([node.module] if node.module else []))
                else:
                    origin = node.module
                # ``from x import y`` depends on the module x.y when y is one, else on x
                names = [f"{origin}.{alias.name}" if f"{origin}.{alias.name}".removeprefix("armillary.") in paths
                         else origin for alias in node.names]
            else:
                continue
            edges |= {name.removeprefix("armillary.") for name in names} & paths.keys()
        graph[module] = edges
    return graph


@pytest.mark.parametrize("package", ["kernels", "ensemble", "jobs"])
def test_modules_of_a_layer_import_without_a_cycle(package):
    graph = module_graph(package)

    def visit(node, stack):
        assert node not in stack, " → ".join(stack + [node])
        for target in graph[node]:
            if not target.startswith(node + "."):  # a package importing its submodules
                visit(target, stack + [node])

    for module in graph:
        visit(module, [])


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
