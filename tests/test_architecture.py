"""The rules of the house (docs/architecture.md), checked on the import graph of `policies`.

Every import statement counts, also those inside functions (a lazy import is still a
dependency); only imports under `if TYPE_CHECKING:` are left out, as they never run. Importing a
module also runs its parent packages' `__init__`, so those are edges too.
"""

from __future__ import annotations

import ast
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "policies"

# Third-party packages the pure engine may use (it must run without Django or a cluster):
# PyYAML for documents, Google's RE2 binding for CEL's regular expressions (issue 15).
ENGINE_THIRD_PARTY = {"yaml", "re2"}
# The DEBUG-only component gallery: only the URLconf may import it.
GALLERY = "policies.ui.gallery"
URLCONFS = {"policies.urls", "policies.ui.urls"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for path in sorted(PACKAGE.rglob("*.py"))
        if "migrations" not in path.parts
    }


class _Imports(ast.NodeVisitor):
    """Absolute names of everything a module imports (relative imports resolved)."""

    def __init__(self, module: str, is_package: bool) -> None:
        self.package = module if is_package else module.rpartition(".")[0]
        self.names: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.names.update(alias.name for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")[: len(self.package.split(".")) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            self.names.add(submodule if submodule in modules() else source)


@cache
def imported_names(module: str) -> frozenset[str]:
    """Every absolute module name `module` imports, third-party ones included."""
    path = modules()[module]
    visitor = _Imports(module, path.name == "__init__.py")
    visitor.visit(ast.parse(path.read_text(encoding="utf-8")))
    return frozenset(visitor.names)


def _owning_module(name: str) -> str | None:
    """The `policies` module an imported name refers to (a function's module, say)."""
    while name and name not in modules():
        name = name.rpartition(".")[0]
    return name or None


@cache
def graph() -> dict[str, frozenset[str]]:
    """policies module -> the policies modules importing it runs (parent packages included)."""
    edges: dict[str, frozenset[str]] = {}
    for module in modules():
        targets: set[str] = set()
        for name in imported_names(module):
            target = _owning_module(name)
            if target is None or target == module:
                continue
            parts = target.split(".")
            for depth in range(1, len(parts) + 1):
                parent = ".".join(parts[:depth])
                # a module's own ancestors are already running when it is imported
                if parent in modules() and not module.startswith(parent + "."):
                    targets.add(parent)
        targets.discard(module)
        edges[module] = frozenset(targets)
    return edges


def cycles(edges: dict[str, frozenset[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for other in edges.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in edges:
        if node not in index:
            visit(node)
    return found


def importers_of(prefix: str) -> dict[str, set[str]]:
    """Modules outside `prefix` that import something inside it, with what they import."""
    found: dict[str, set[str]] = {}
    for module, targets in graph().items():
        if module == prefix or module.startswith(prefix + "."):
            continue
        hits = {t for t in targets if t == prefix or t.startswith(prefix + ".")}
        if hits:
            found[module] = hits
    return found


def _in(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


# --- the rules -------------------------------------------------------------------------------


def test_no_import_cycle_among_policies_modules():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"})}) == [
        ["a", "b", "c"]
    ]
    assert cycles({"a": frozenset({"b"}), "b": frozenset()}) == []


def test_the_engine_imports_only_itself_the_standard_library_and_yaml():
    stdlib = sys.stdlib_module_names
    for module in modules():
        if not _in(module, "policies.engine"):
            continue
        for name in imported_names(module):
            top = name.partition(".")[0]
            if top == "policies":
                assert _in(name, "policies.engine"), f"{module} imports {name}"
            else:
                assert top in stdlib or top in ENGINE_THIRD_PARTY or top == "__future__", (
                    f"{module} imports {name}: the engine stays pure"
                )


def test_the_scheduler_model_imports_only_the_engine_the_standard_library_and_yaml():
    stdlib = sys.stdlib_module_names
    for module in modules():
        if not _in(module, "policies.schedmodel"):
            continue
        for name in imported_names(module):
            top = name.partition(".")[0]
            if top == "policies":
                assert _in(name, "policies.engine", "policies.schedmodel"), (
                    f"{module} imports {name}"
                )
            else:
                assert top in stdlib or top in ENGINE_THIRD_PARTY or top == "__future__", (
                    f"{module} imports {name}: the scheduler model stays pure"
                )


def test_the_errors_module_imports_nothing_of_schedweb():
    assert not [n for n in imported_names("policies.errors") if n.startswith("policies")]


def test_the_cluster_package_depends_only_on_the_engine_errors_models_and_redis():
    allowed = (
        "policies.cluster",
        "policies.engine",
        "policies.errors",
        "policies.models",
        "policies.redis",
        "policies.background",
    )
    for module, targets in graph().items():
        if _in(module, "policies.cluster"):
            wrong = {t for t in targets if not _in(t, *allowed) and t != "policies"}
            assert not wrong, f"{module} imports {sorted(wrong)}"


def test_only_the_cluster_package_imports_kubernetes():
    for module in modules():
        if _in(module, "policies.cluster"):
            continue
        assert not [n for n in imported_names(module) if _in(n, "kubernetes")], module


def test_selectors_read_only_the_database_and_services_reach_no_entry_point():
    selectors = graph()["policies.selectors"]
    assert selectors <= {"policies", "policies.models", "policies.errors"} | {
        m for m in selectors if _in(m, "policies.engine")
    }
    for module in ("policies.services", "policies.selectors", "policies.evaluation"):
        wrong = {
            t
            for t in graph()[module]
            if _in(t, "policies.api", "policies.ui", "policies.tasks", "policies.extender")
        }
        assert not wrong, f"{module} imports {sorted(wrong)}"


def test_nothing_imports_the_task_modules_writers_queue_tasks_by_name():
    importers = importers_of("policies.tasks")
    assert importers == {}, importers


def test_nothing_but_the_urlconf_imports_the_debug_gallery():
    importers = set(importers_of(GALLERY))
    assert importers <= URLCONFS, importers


def test_the_api_and_the_pages_are_the_top_layer():
    for prefix in ("policies.api", "policies.ui"):
        for module, hits in importers_of(prefix).items():
            allowed = module in URLCONFS or (
                # the pages map service errors to statuses with the API's one table
                _in(module, "policies.ui") and hits <= {"policies.api", "policies.api.errors"}
            )
            assert allowed, f"{module} imports {sorted(hits)}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from policies.errors import NotFound\n", {"policies.errors"}),
        ("def f():\n    from policies import services\n", {"policies.services"}),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from policies import api\n",
            {"typing"},
        ),
    ],
)
def test_the_import_reader_counts_lazy_imports_and_skips_type_checking_ones(source, expected):
    visitor = _Imports("policies.x", is_package=False)
    visitor.visit(ast.parse(source))
    assert visitor.names == expected
