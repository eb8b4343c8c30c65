"""Every ```python block of README.md and docs/*.md runs as written.

The blocks of one file run in order in one fresh interpreter and one namespace (a block
may use what an earlier block of its file defined), under a time limit, from a scratch
directory. A block that cannot run here — it needs a GPU, several processes under
``torchrun`` or data that is not shipped — is preceded by an HTML comment that says why::

    <!-- no-run: needs torchrun (several processes) -->
    ```python
    ...

Such blocks are listed by :func:`test_no_run_blocks_are_few_and_explained`, which also pins
them: marking another block no-run means editing the list below.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# One file's blocks, all together. Measured on a shared 2-core machine (load 4-5): 3-15 s
# of CPU time per file with its interpreter start and import, 119 s for all 14 files
# (190 s wall); per-block wall times and each file's CPU time are printed (-s).
TIMEOUT_S = 180

_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
_NO_RUN = re.compile(r"<!--\s*no-run:\s*(.*?)\s*-->\s*$")

# The blocks that do not run here, by file: (first line of the block, reason).
EXPECTED_NO_RUN = {
    "docs/distributed.md": [
        ("import torchkern",
         "needs torchrun (one process per rank; examples/distributed_krr.py runs it)")],
}


def blocks(path):
    """[(line number, source, no-run reason or None)] for each ```python block of path."""
    text = path.read_text("utf-8")
    out = []
    for m in _FENCE.finditer(text):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        reason = _NO_RUN.search(before)
        out.append((text.count("\n", 0, m.start()) + 2, m.group(1),
                    reason.group(1) if reason else None))
    return out


# Runs in the child: exec each block (file, line, source) in one namespace, timing each.
_DRIVER = r"""
import json, sys, time, traceback
blocks = json.loads(sys.stdin.read())
ns = {"__name__": "__main__"}
for name, line, src in blocks:
    t = time.perf_counter()
    code = compile("\n" * (line - 1) + src, name, "exec")
    try:
        exec(code, ns)
    except BaseException:
        traceback.print_exc()
        print(f"FAILED {name}:{line}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps([name, line, time.perf_counter() - t]), flush=True)
import resource
r = resource.getrusage(resource.RUSAGE_SELF)
print("CPU", r.ru_utime + r.ru_stime)
"""


def _runnable(path):
    return [(str(path.relative_to(ROOT)), line, src)
            for line, src, reason in blocks(path) if reason is None]


@pytest.mark.parametrize("path", [p for p in FILES if _runnable(p)],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_python_blocks_run(path, tmp_path):
    todo = _runnable(path)
    env = dict(os.environ, MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", _DRIVER], input=json.dumps(todo),
                          capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=TIMEOUT_S)
    done = [json.loads(l) for l in proc.stdout.splitlines() if l.startswith("[")]
    for name, line, seconds in done:
        print(f"{name}:{line}: {seconds:.2f} s")
    print(*[l for l in proc.stdout.splitlines() if l.startswith("CPU")], "s (whole file, with import)")
    assert proc.returncode == 0, proc.stderr[-6000:]
    assert len(done) == len(todo)


def test_no_run_blocks_are_few_and_explained():
    found = {}
    for path in FILES:
        for line, src, reason in blocks(path):
            if reason is not None:
                assert reason, f"{path.name}:{line}: a no-run comment needs a reason"
                found.setdefault(str(path.relative_to(ROOT)), []).append(
                    (src.strip().splitlines()[0], reason))
    total = sum(len(b) for b in blocks_by_file().values())
    skipped = sum(len(v) for v in found.values())
    print(f"{skipped} of {total} python blocks are not run:")
    for name, items in found.items():
        for first, reason in items:
            print(f"  {name}: {first!r}: {reason}")
    assert found == EXPECTED_NO_RUN


def blocks_by_file():
    return {p: blocks(p) for p in FILES}
