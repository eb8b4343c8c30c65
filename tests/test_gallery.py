"""The example gallery's scripts run, and every figure they show is complete.

Each script of ``examples/gallery`` runs in a fresh process the way sphinx-gallery runs it
during the documentation build: split into its ``# %%`` cells by sphinx-gallery's own
parser, the cells executed one after the other in one namespace, the open figures taken
(and closed) at the end of each cell, the value of a cell's last expression shown, in the
script's folder and with no ``__file__``.
The test fails when

- a figure taken at the end of a cell has an empty Axes (no lines, collections, patches,
  images, texts or tables) — a figure begun in one cell and finished in the next shows
  empty panels on the page;
- a cell ends in an expression whose printed value is an object address
  (``<matplotlib.legend.Legend object at 0x...>`` on the page);
- a script shows no figure, or takes more than 60 s of CPU time (one thread each, as on a
  shared 2-core machine).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GALLERY = ROOT / "examples" / "gallery"
SCRIPTS = sorted(GALLERY.glob("plot_*.py"))
CPU_LIMIT_S = 60

# Runs one script cell by cell and prints one JSON report on its last line of stdout.
DRIVER = r'''
import ast, json, os, re, resource, sys, time
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from sphinx_gallery.py_source_parser import split_code_and_text_blocks

path = sys.argv[1]
os.chdir(os.path.dirname(path))          # as sphinx-gallery runs an example
_, blocks = split_code_and_text_blocks(path)[:2]
ns = {"__name__": "__main__"}            # sphinx-gallery defines no __file__
report = {"figures": 0, "empty": [], "reprs": []}
address = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")
t0 = time.perf_counter()
cell = 0
for block in blocks:
    label, code = block[0], block[1]
    if label != "code":
        continue
    cell += 1
    tree = ast.parse(code)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, path, "exec"), ns)
    if last is not None:
        value = eval(compile(ast.Expression(last.value), path, "eval"), ns)
        if value is not None and address.search(repr(value)):
            report["reprs"].append(f"cell {cell}: {repr(value)[:80]}")
    for num in plt.get_fignums():
        fig = plt.figure(num)
        report["figures"] += 1
        for i, ax in enumerate(fig.axes):
            if not (ax.has_data() or ax.texts or ax.tables or ax.artists):
                report["empty"].append(f"cell {cell}, figure {num}, axes {i} "
                                       f"({ax.get_title()!r})")
    plt.close("all")
usage = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
report["cpu_s"] = sum(u.ru_utime + u.ru_stime for u in usage)
report["wall_s"] = time.perf_counter() - t0
print(json.dumps(report))
'''


def test_gallery_has_the_examples():
    assert len(SCRIPTS) >= 9, [p.name for p in SCRIPTS]


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.stem for p in SCRIPTS])
def test_gallery_script_figures_are_complete(script):
    env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", DRIVER, str(script)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{script.name} failed:\n{proc.stdout[-2000:]}\n" \
                                 f"{proc.stderr[-4000:]}"
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"{script.name}: {report['cpu_s']:.1f} s CPU, {report['wall_s']:.1f} s wall, "
          f"load average {os.getloadavg()}")
    assert report["figures"] >= 1, f"{script.name} shows no figure"
    assert not report["empty"], f"{script.name}: empty axes in {report['empty']}"
    assert not report["reprs"], f"{script.name}: a cell prints an object address: " \
                                f"{report['reprs']}"
    assert report["cpu_s"] < CPU_LIMIT_S, f"{script.name} took {report['cpu_s']:.0f} s CPU"
