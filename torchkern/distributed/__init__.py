"""Kernel matrices, solvers and estimators over processes with torch.distributed.

One process per device (``torchrun``; NCCL on GPUs, gloo on CPUs). Each rank holds its
rows of the data; the switch is two wrappers around what an estimator already takes::

    import torchkern
    from torchkern import distributed as tkd

    device = tkd.init_process_group()            # from torchrun's environment
    X = tkd.ShardedInput(X_local.to(device))     # this rank's rows
    kernel = tkd.ShardedKernel(torchkern.RBF(1.0))
    model = torchkern.KernelRidge(kernel, alpha=1e-2, random_state=0)
    model.fit(X, y_local)                        # every rank: the same fit, its own targets

Gram matrices of sharded data are :class:`ShardedKernelMatrix`: each rank holds its rows
of X and of every vector; a product evaluates the rank's row block with the kernel's own
backend against the all-gathered V, and the solvers of :mod:`torchkern.linalg` all-reduce
every inner product and norm, with the same iterates on every rank and the single-process
results to solver tolerance (``ShardedKernel(..., vectors="replicated")`` holds vectors
whole instead, for estimators that read them whole; the default ``"auto"`` shards them in
KernelRidge and holds them whole elsewhere). See ``docs/distributed.md``.
"""
from ._comm import RankFailedError, agree, init_process_group
from .gram import ShardedKernelMatrix
from .input import ShardedInput, Sharding, shard_rows
from .kernel import ShardedKernel

__all__ = ["RankFailedError", "ShardedInput", "ShardedKernel", "ShardedKernelMatrix",
           "Sharding", "agree", "init_process_group", "shard_rows"]
