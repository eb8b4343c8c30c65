"""Imports run downward only: no module of torchkern imports a module of a layer above its
own, counting imports inside functions (a lazy import that reaches up is still a circle).

The layers, lowest first, are written out below (``LAYERS``); they are the layer order of
DESIGN.md. A module belongs to the layer of the longest entry that names it or a package
above it; a package's ``__init__`` is named ``<package>.__init__`` (it re-exports its
submodules, so it sits with the highest of them). An import of a submodule counts against
that submodule (``from ..stats.hsic import hsic_biased`` reaches ``torchkern.stats.hsic``),
``from .. import _optimize`` against ``torchkern._optimize``, and an import of a package's
names against its ``__init__``. Imports within one layer are allowed.
"""
from __future__ import annotations

import ast
import pathlib

import torchkern

ROOT = pathlib.Path(torchkern.__file__).parent

LAYERS = [
    # helpers every layer uses: settings, argument checks, threads, progress bars,
    # compiled extensions, the record of sharded fits under way
    ("foundation", ["torchkern._config", "torchkern._validation", "torchkern._threads",
                    "torchkern._progress", "torchkern._compiled", "torchkern._sharding"]),
    ("linalg", ["torchkern.linalg"]),
    ("gram", ["torchkern.gram"]),
    ("inputs", ["torchkern.inputs"]),
    ("kernels", ["torchkern.kernels"]),
    ("structured kernels", ["torchkern.graphs", "torchkern.sequences", "torchkern.ntk"]),
    # the statistics on Gram matrices (MMD, HSIC, mean embeddings); the permutation tests,
    # which build Nystroem features, sit with the estimators
    ("statistics", ["torchkern.stats"]),
    ("optimizer", ["torchkern._optimize"]),
    # differentiable objectives, the GP likelihood, fit_kernel / learn_kernel, kernel layers
    ("learning", ["torchkern.learning"]),
    ("estimator base", ["torchkern._estimator"]),
    ("approximations", ["torchkern.approx"]),
    ("estimators", ["torchkern.supervised", "torchkern.unsupervised",
                    "torchkern.stats.permutation", "torchkern.stats.__init__"]),
    ("distributed", ["torchkern.distributed"]),
    ("adapters", ["torchkern.datasets", "torchkern.integrations"]),
    ("package", ["torchkern.__init__"]),
]

# Known upward imports, each with the reason it is still there (none today).
EXCEPTIONS: set = set()


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts)


def _modules() -> dict:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _resolve(name: str, modules: dict) -> str | None:
    """The module an import of the dotted ``name`` executes last: itself or its
    package's ``__init__``; None outside torchkern."""
    if name in modules:
        return name
    if name + ".__init__" in modules:
        return name + ".__init__"
    return None


def _imports(module: str, path: pathlib.Path, modules: dict):
    """(imported module, line) for every torchkern import in the file, at any depth."""
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = _resolve(alias.name, modules)
                if target:
                    yield target, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            for alias in node.names:
                target = _resolve(f"{name}.{alias.name}", modules) or _resolve(name, modules)
                if target:
                    yield target, node.lineno


def layer_of(module: str) -> int:
    best, rank = -1, None
    for i, (_, names) in enumerate(LAYERS):
        for entry in names:
            if (module == entry or module.startswith(entry + ".")) and len(entry) > best:
                best, rank = len(entry), i
    if rank is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS in {__file__}")
    return rank


def _violations():
    modules = _modules()
    found, used = set(), set()
    for module, path in modules.items():
        own = layer_of(module)
        for target, line in _imports(module, path, modules):
            if layer_of(target) > own:
                if (module, target) in EXCEPTIONS:
                    used.add((module, target))
                    continue
                found.add(f"{path.relative_to(ROOT.parent)}:{line}: {module} "
                             f"({LAYERS[own][0]}) imports {target} "
                             f"({LAYERS[layer_of(target)][0]})")
    return sorted(found), used


def test_every_module_has_a_layer():
    for module in _modules():
        layer_of(module)


def test_no_module_imports_a_layer_above_its_own():
    found, _ = _violations()
    assert not found, "imports upward:\n" + "\n".join(found)


def test_known_exceptions_are_still_needed():
    _, used = _violations()
    assert used == EXCEPTIONS, f"no longer imported upward, remove from EXCEPTIONS: " \
                               f"{sorted(EXCEPTIONS - used)}"


def test_the_check_sees_function_level_and_relative_imports(tmp_path):
    """The parser finds an import inside a function, resolves ``..`` and submodules."""
    modules = _modules()
    src = "def f():\n    from ..supervised.gp import GaussianProcessRegressor\n" \
          "from .. import _estimator\nfrom ..stats import mmd2\n"
    fake = tmp_path / "objectives.py"
    fake.write_text(src)
    got = sorted(t for t, _ in _imports("torchkern.learning.objectives", fake, modules))
    assert got == ["torchkern._estimator", "torchkern.stats.__init__",
                   "torchkern.supervised.gp"]
    assert layer_of("torchkern.supervised.gp") > layer_of("torchkern.learning.objectives")
