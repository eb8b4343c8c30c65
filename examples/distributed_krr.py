"""Kernel ridge regression with the training rows spread over processes.

Run with ``torchrun --nproc_per_node=2 examples/distributed_krr.py`` (gloo on CPUs, NCCL
with one GPU per process). Each rank reads only its rows; the fit runs on every rank with
the Gram matrix and the solver's vectors row-sharded (each rank its rows, CG's inner
products all-reduced), and gives the single-process model.
"""
import torch

import torchkern
from torchkern import distributed as tkd

device = tkd.init_process_group(timeout=120)
rank = torch.distributed.get_rank()

# Each rank holds its own rows (here: its share of one synthetic data set).
g = torch.Generator().manual_seed(0)
X = torch.randn(2000, 3, generator=g, dtype=torch.float64)
y = X.sin().sum(1) + 0.1 * torch.randn(2000, generator=g, dtype=torch.float64)
X_local, y_local = tkd.shard_rows(X).to(device), tkd.shard_rows(y).to(device)

Xs = tkd.ShardedInput(X_local)                       # the switch: sharded data ...
kernel = tkd.ShardedKernel(torchkern.RBF(1.0))       # ... and a sharded kernel
model = torchkern.KernelRidge(kernel, alpha=1e-2, n_centers=200, tol=1e-8,
                              random_state=0)        # an int seed: same centres on all ranks
model.fit(Xs, y_local)                               # targets: this rank's own
# solver "auto" is CG on sharded data; model.dual_coef_ holds this rank's rows of the
# coefficients, and predict all-reduces.

X_test = torch.randn(5, 3, generator=g, dtype=torch.float64).to(device)
pred = model.predict(X_test)
if rank == 0:
    one = torchkern.KernelRidge(torchkern.RBF(1.0), alpha=1e-2, solver="cg", n_centers=200,
                                tol=1e-8, random_state=0).fit(X.to(device), y.to(device))
    print(f"{torch.distributed.get_world_size()} ranks, rows per rank "
          f"{Xs.sharding.counts}, solver {model.solver_!r}, {model.n_iter_} CG iterations")
    print("predictions:", pred.cpu().numpy().round(4))
    print(f"largest difference to one process: "
          f"{float((pred - one.predict(X_test)).abs().max()):.1e}")
torch.distributed.destroy_process_group()
