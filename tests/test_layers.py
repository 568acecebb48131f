"""The layers of docs/architecture.md hold: this test reads every import under src/ (with `ast`,
without importing anything) and fails naming each one that breaks a rule.

The layers and their modules are read from the page's table, so the page and the code cannot
drift apart: a module missing from the table, or listed twice, fails too.

The rules:

- **order**: a module imports (at run time, function-local imports included) only modules of
  its own layer or of the layers below. Imports under `if TYPE_CHECKING:` never run and are
  exempt from the order (they still obey the "never" list).
- **never**, each a rule of its own below: no event loop under the drivers, no protocol SDK or
  web stack under the hosts, no SDK-internal import outside `mcp/_sdk.py`, no test tooling
  outside the testing kit.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import attrs

import mrtr_trio

SOURCE = Path(mrtr_trio.__file__).resolve().parent
ROOT = SOURCE.parents[1]
PAGE = ROOT / "docs" / "architecture.md"
PACKAGE = "mrtr_trio"


@attrs.frozen
class Import:
    module: str  # the importing module, e.g. "mrtr_trio._flow"
    line: int
    target: str  # the imported module, absolute, e.g. "mrtr_trio._journal" or "mcp.server.context"
    names: tuple[str, ...]  # the names imported from it (empty for `import x`)
    type_only: bool  # under `if TYPE_CHECKING:`

    def __str__(self) -> str:
        what = f"from {self.target} import {', '.join(self.names)}" if self.names else self.target
        return f"{self.module}:{self.line} imports {what}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SOURCE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(SOURCE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, type_only: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for inner in child.body:
                yield inner, True
                yield from _walk(inner, True)
            for inner in child.orelse:
                yield inner, type_only
                yield from _walk(inner, type_only)
            continue
        yield child, type_only
        yield from _walk(child, type_only)


def imports_of(module: str, text: str | None = None) -> list[Import]:
    """The imports of *module* (of *text* as if it were that module's source, when given)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node, type_only in _walk(ast.parse(path.read_text() if text is None else text)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Import(module, node.lineno, alias.name, (), type_only))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            names = tuple(alias.name for alias in node.names)
            submodules = [f"{target}.{name}" for name in names if f"{target}.{name}" in MODULES]
            if submodules:  # `from .. import _values`: the submodule is what is imported
                for submodule in submodules:
                    found.append(Import(module, node.lineno, submodule, (), type_only))
                names = tuple(n for n in names if f"{target}.{n}" not in MODULES)
                if not names:
                    continue
            found.append(Import(module, node.lineno, target, names, type_only))
    return found


ALL_IMPORTS = [found for module in MODULES for found in imports_of(module)]


# ----------------------------------------------------------------------------- the page's table

ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*\*\*(\w+)\*\*\s*\|(.*?)\|", re.MULTILINE)


def layers_from(page: str) -> dict[str, tuple[int, str]]:
    """`{module: (rank, layer)}` from the page's table; `mcp.*` covers a subpackage."""
    table = page.split("## The layers", 1)[1].split("\n## ", 1)[0]
    placed: dict[str, tuple[int, str]] = {}
    listed: list[str] = []
    for rank, layer, cell in ROW.findall(table):
        for pattern in re.findall(r"`([\w.*]+)`", cell):
            listed.append(pattern)
            name = PACKAGE if pattern == PACKAGE else f"{PACKAGE}.{pattern}"
            for module in MODULES:
                if module == name or (name.endswith(".*") and (module + ".").startswith(name[:-1])):
                    placed[module] = (int(rank), layer)
    twice = sorted({p for p in listed if listed.count(p) > 1})
    assert not twice, f"docs/architecture.md lists {twice} in more than one layer"
    return placed


LAYERS = layers_from(PAGE.read_text())


def layer_of(module: str) -> tuple[int, str] | None:
    return LAYERS.get(module)


def test_every_module_has_one_layer() -> None:
    unplaced = sorted(set(MODULES) - set(LAYERS))
    assert not unplaced, f"modules docs/architecture.md does not place in a layer: {unplaced}"


def test_the_table_names_real_modules() -> None:
    assert len({layer for _, layer in LAYERS.values()}) >= 9, "the page's table lost its layers"
    assert layer_of("mrtr_trio._replay") == (5, "machine")


# ---------------------------------------------------------------------------------- the rules


def test_each_module_imports_only_its_layer_and_below() -> None:
    broken = []
    for found in ALL_IMPORTS:
        here, there = layer_of(found.module), layer_of(found.target)
        if found.type_only or here is None or there is None:
            continue  # outside the package, or unplaced (the test above names it)
        if there[0] > here[0]:
            broken.append(f"{found} ({here[1]} must not import {there[1]})")
    assert not broken, "imports against the layers:\n" + "\n".join(broken)


def _below(layer: str) -> set[str]:
    rank = {name: rank for rank, name in LAYERS.values()}[layer]
    return {module for module, (r, _) in LAYERS.items() if r < rank}


def _top(target: str) -> str:
    return target.split(".", 1)[0]


#: No event loop below the drivers: values, journal, token, flow and machine are sans-IO.
EVENT_LOOPS = {"trio", "anyio", "asyncio", "sniffio"}
#: The protocol SDK and the web stack live in the hosts.
HOST_ONLY = {"mcp", "mcp_types", "starlette", "hypercorn", "pydantic", "pydantic_core", "httpx2"}
HOST_ONLY |= {"jwt"}
#: Test tooling is for the testing kit, never a runtime dependency.
KIT_ONLY = {"pytest", "hypothesis"}
#: The SDK's public API, importable anywhere in the hosts: its top level and the protocol's
#: types. Everything else from `mcp.<module>` is imported by `mcp/_sdk.py` only.
SDK_SEAM = "mrtr_trio.mcp._sdk"
#: The token-verifier interface `auth/` implements (the SDK's documented extension point for
#: verifiers); `auth` cannot import `mcp/_sdk.py`, whose package imports `auth`.
SDK_PUBLIC_NAMES = {("mcp.server.auth.provider", name) for name in ("AccessToken", "TokenVerifier")}
#: SDK-internal imports waiting to move into `mcp/_sdk.py` (none now). Listed exactly: the test
#: also fails when one is no longer there, so that the list only shrinks.
SDK_PENDING: set[tuple[str, str, str]] = set()


def test_never_an_event_loop_below_the_drivers() -> None:
    core = _below("drivers")
    broken = [str(f) for f in ALL_IMPORTS if f.module in core and _top(f.target) in EVENT_LOOPS]
    assert not broken, "the sans-IO core imports an event loop:\n" + "\n".join(broken)


def test_never_the_sdk_or_the_web_stack_below_the_hosts() -> None:
    core = _below("hosts")
    broken = [str(f) for f in ALL_IMPORTS if f.module in core and _top(f.target) in HOST_ONLY]
    assert not broken, "below the hosts, an SDK or web import:\n" + "\n".join(broken)


def test_never_test_tooling_outside_the_kit() -> None:
    kit = {module for module, (_, layer) in LAYERS.items() if layer == "kit"}
    broken = [
        str(f)
        for f in ALL_IMPORTS
        if f.module not in kit and not f.type_only and _top(f.target) in KIT_ONLY
    ]
    assert not broken, "test tooling imported outside the testing kit:\n" + "\n".join(broken)


def _sdk_internal(found: Import) -> list[tuple[str, str, str]]:
    if not found.target.startswith("mcp.") or found.module == SDK_SEAM:
        return []
    names = found.names or ("",)
    return [
        (found.module, found.target, name)
        for name in names
        if (found.target, name) not in SDK_PUBLIC_NAMES
    ]


def test_never_an_sdk_internal_import_outside_the_seam() -> None:
    where = {entry: found.line for found in ALL_IMPORTS for entry in _sdk_internal(found)}
    internal = set(where)
    broken = sorted(internal - SDK_PENDING)
    assert not broken, (
        "SDK-internal imports outside mcp/_sdk.py (import them there and re-export):\n"
        + "\n".join(
            f"{module}:{where[module, target, name]} imports {name} from {target}"
            for module, target, name in broken
        )
    )
    gone = sorted(SDK_PENDING - internal)
    assert not gone, f"no longer imported: take them off SDK_PENDING: {gone}"


def test_the_reader_sees_every_kind_of_import() -> None:
    """Lazy imports inside functions, relative imports of submodules and type-only imports are
    all found, each resolved to the module it names."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from .. import _values\n"
        "if TYPE_CHECKING:\n"
        "    from .._runtime import Runtime\n"
        "def later():\n"
        "    import trio\n"
        "    from ._sdk import Server\n"
    )
    found = {(f.target, f.type_only) for f in imports_of("mrtr_trio.mcp._host", source)}
    assert found == {
        ("typing", False),
        ("mrtr_trio._values", False),
        ("mrtr_trio._runtime", True),
        ("trio", False),
        ("mrtr_trio.mcp._sdk", False),
    }
