"""
Kernel ridge regression over two processes
==========================================

:mod:`torchkern.distributed` spreads the rows of a Gram matrix over ``torch.distributed``
processes (gloo on CPUs, NCCL with one GPU per process): each rank holds its own rows of
the data, the solver's vectors are sharded the same way, and the inner products of
conjugate gradients are all-reduced, so the fit gives the single-process model.

This page launches ``examples/distributed_krr.py`` with two processes on this machine —
what ``torchrun --nproc_per_node=2 examples/distributed_krr.py`` does — and shows what
rank 0 prints: the rows each rank holds, the CG iterations, the predictions on five test
points and their largest difference to the same model fitted in one process.
"""

# %%
import re
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

# examples/distributed_krr.py: next to this script's folder (sphinx-gallery runs it from
# there, without __file__), or under the current directory (the repository root).
candidates = [Path("..", "distributed_krr.py"), Path("examples", "distributed_krr.py")]
if "__file__" in globals():
    candidates.insert(0, Path(__file__).resolve().parent.parent / "distributed_krr.py")
script = next(p for p in candidates if p.is_file()).resolve()
cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
       str(script)]
run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
if run.returncode != 0:
    raise RuntimeError(f"{' '.join(cmd)} failed:\n{run.stdout}\n{run.stderr}")
print(run.stdout)

# %%
# The rows per rank and the two processes' predictions, as rank 0 printed them, beside
# the difference to one process (the script fits the same model on all 2,000 rows in
# rank 0 alone): the sharded solve reproduces it to the CG tolerance.
counts = [int(c) for c in re.search(r"rows per rank \[([\d, ]+)\]", run.stdout)
          .group(1).split(",")]
pred = np.array(re.search(r"predictions: \[([^\]]+)\]", run.stdout).group(1).split(),
                dtype=float)
diff = float(re.search(r"largest difference to one process: (\S+)", run.stdout).group(1))

fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), width_ratios=[0.6, 1])
axes[0].bar([f"rank {r}" for r in range(len(counts))], counts, color=["C0", "C1"])
axes[0].set_ylabel("training rows held")
axes[0].set_title("the data, row-sharded")
axes[1].bar(np.arange(len(pred)), pred, color="C2")
axes[1].axhline(0, color="0.5", lw=0.8)
axes[1].set_xlabel("test point")
axes[1].set_ylabel("prediction (2 processes)")
axes[1].set_title(f"largest difference to one process: {diff:.1e}")
fig.tight_layout()
plt.show()
