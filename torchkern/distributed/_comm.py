"""Collectives of torchkern.distributed: process groups, row gathers that carry a failure
flag, and the autograd rules of replicated and partial tensors.

Every rank holds two kinds of tensors. *Replicated* ones are equal on every rank (vectors
of the solvers, hyperparameters, the loss). *Partial* ones are a rank's share of a sum or
of a row-stacked whole (its rows of K @ V). The four moves between them and their adjoints:

================================  ==============================  =======================
forward                           from → to                       backward
================================  ==============================  =======================
:func:`gather_rows`               local rows → replicated rows    take own rows (no comm)
:func:`local_rows`                replicated → own rows           gather rows
:func:`all_reduce_sum`            partial sum → replicated        identity (no comm)
:func:`sum_grads`                 replicated, used partially      all-reduce of gradients
:func:`gather_shared`             local rows → replicated, used   all-reduce, own rows
                                  partially
================================  ==============================  =======================

With every rank computing the same replicated loss, these rules give every rank the
gradient of that loss — e.g. hyperparameter gradients all-reduced over the ranks' row
blocks, as in the multi-GPU products of Falkon (Meanti et al., "Kernel methods through
the roof", NeurIPS 2020).
"""
from __future__ import annotations

import datetime

import torch
import torch.distributed as dist

from .._validation import is_real

__all__ = ["RankFailedError", "init_process_group", "gather_rows", "gather_shared",
           "local_rows", "all_reduce_sum", "sum_grads", "agree", "note_failure"]


class RankFailedError(RuntimeError):
    """A rank of the process group failed; raised on every rank (with the rank and its
    error), instead of leaving the others waiting in a collective."""


def init_process_group(backend: str | None = None, *, timeout: float = 300.0,
                       init_method: str | None = None, rank: int | None = None,
                       world_size: int | None = None):
    """Start torch.distributed for torchkern: NCCL when CUDA is available, else gloo.

    Under ``torchrun`` the rank, world size and rendezvous come from the environment
    (``init_method="env://"``); one process per device, the CUDA device chosen by
    ``LOCAL_RANK``. ``timeout`` (seconds) bounds how long a collective waits for a rank
    that has stopped answering: past it the waiting ranks raise instead of hanging.

    Returns
    -------
    torch.device
        The device this rank should put its data on.
    """
    import os
    if not (is_real(timeout) and timeout > 0):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend not in ("nccl", "gloo"):
        raise ValueError(f"backend must be 'nccl' or 'gloo', got {backend!r}")
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    kw = {} if rank is None else {"rank": rank, "world_size": world_size}
    dist.init_process_group(backend, init_method=init_method or "env://",
                            timeout=datetime.timedelta(seconds=timeout), **kw)
    return device


# torch >= 2.12 names the flat all-gather all_gather_single (all_gather_into_tensor warns).
_ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def _comm_device(group):
    """Where collectives of ``group`` take their tensors (CUDA for NCCL)."""
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _collective(fn, *args, **kw):
    """Run a collective; a peer that died or timed out becomes a RankFailedError, and so
    does a peer that reported a failure (:func:`note_failure`) instead of joining it.

    Under gloo the collective is started asynchronously and waited for in slices of
    ``_POLL`` seconds; between slices the store is read for peers' failure reports, so
    a rank that raised outside a protected block and stays alive is named within about
    a slice instead of after the process-group timeout."""
    group = kw.get("group")
    key = _group_key(group)
    _SEQ[key] = _SEQ.get(key, 0) + 1
    try:
        if fn is dist.all_gather_object or dist.get_backend(group) != "gloo":
            return fn(*args, **kw)
        work = fn(*args, async_op=True, **kw)
        while True:
            try:
                work.wait(timeout=datetime.timedelta(seconds=_POLL))
                break
            except RuntimeError:
                if work.is_completed():
                    # either it failed (a closed peer, the process-group timeout) or it
                    # completed between the slice's time-out and this check: a completed
                    # work's wait returns at once or raises its own error
                    work.wait()
                    break
                _check_peers(group, key)
    except RuntimeError as exc:  # DistBackendError, gloo "Connection closed by peer", timeouts
        if isinstance(exc, RankFailedError):
            raise
        raise RankFailedError(
            f"a collective failed: another rank of the process group failed or stopped "
            f"answering within the process-group timeout ({type(exc).__name__}: "
            f"{str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''})") from exc
    if _REPORTED.pop(key, False):  # this rank is back in step: its old report is void
        # overwritten, not deleted: a peer between its store.check and store.get of the
        # key would otherwise block in get until the store's timeout
        _store().set(_report_key(key, dist.get_rank()), _VOID)


# -- failure reports through the store --------------------------------------------------
# A rank that raises outside a protected block (estimator code between collectives, a
# target check) leaves its peers waiting in their next collective. The estimators' fit
# reports such an error (:func:`note_failure`, through ``ShardedInput.report_failure``):
# the rank writes "<seq>|<error>" under its key in the process group's store, <seq> being
# how many torchkern collectives of the group it had started. A peer waiting in its
# collective number k reads the reports between wait slices and raises naming the rank
# if that rank reported at a seq < k (it will not join) — unless this rank itself failed
# at that same seq (all ranks raised at one point: they are still in step). A rank's next
# successful collective withdraws its report (overwrites it with _VOID).
_POLL = 0.5            # seconds per wait slice (gloo)
_SEQ: dict = {}        # group key -> torchkern collectives started on this rank
_FAILED_AT: dict = {}  # group key -> seq of this rank's last failure
_REPORTED: dict = {}   # group key -> whether this rank's report is in the store
_VOID = "void"         # a report withdrawn (the rank is back in step)


def _store():
    return dist.distributed_c10d._get_default_store()


def _group_key(group) -> str:
    pg = dist.distributed_c10d._get_default_group() if group is None else group
    return str(getattr(pg, "group_name", "default"))


def _report_key(key: str, global_rank: int) -> str:
    return f"torchkern/failed/{key}/{global_rank}"


def note_failure(error: BaseException, group=None) -> None:
    """This rank's fit on sharded data raised ``error``: remember where, and unless every
    rank raised it together (:class:`RankFailedError`) tell the peers through the
    process group's store, so that they raise ``rank r failed: <error>`` within seconds
    instead of waiting out the timeout in a collective this rank will not join."""
    if not dist.is_initialized():
        return
    key = _group_key(group)
    seq = _SEQ.get(key, 0)
    _FAILED_AT[key] = seq
    if isinstance(error, RankFailedError):
        return
    text = f"{type(error).__name__}: {error}".strip().splitlines()[0][:500]
    try:
        store = _store()
        store.set(_report_key(key, dist.get_rank()), f"{seq}|{text}")
        store.add(f"torchkern/failures/{key}", 1)
        _REPORTED[key] = True
    except Exception:  # a broken store: the peers fall back on the timeout
        pass


def _check_peers(group, key: str) -> None:
    """Raise RankFailedError if a peer reported a failure that keeps it out of this
    rank's current collective."""
    store = _store()
    if store.add(f"torchkern/failures/{key}", 0) == 0:
        return
    me, seq = dist.get_rank(), _SEQ.get(key, 0)
    ranks = dist.get_process_group_ranks(group) if group is not None else \
        range(dist.get_world_size())
    for r in ranks:
        name = _report_key(key, r)
        if r == me or not store.check([name]):
            continue
        report = store.get(name).decode(errors="replace")
        if report == _VOID:
            continue
        at, _, text = report.partition("|")
        if int(at) < seq and _FAILED_AT.get(key) != int(at):
            raise RankFailedError(f"rank {dist.get_group_rank(group, r) if group is not None else r} "
                                  f"failed: {text} (it raised outside a collective and will not "
                                  f"join this one; the process group is out of step: destroy it)")


def _raise_failures(failed: torch.Tensor, group, error: BaseException | None):
    """Every rank in the error path: exchange the messages, raise the same error."""
    messages = [None] * dist.get_world_size(group)
    mine = None if error is None else f"{type(error).__name__}: {error}"
    _collective(dist.all_gather_object, messages, mine, group=group)
    bad = [(j, m) for j, m in enumerate(messages) if m is not None]
    text = "; ".join(f"rank {j} raised {m}" for j, m in bad)
    raise RankFailedError(f"{len(bad)} rank(s) failed: {text}") from error


def agree(error: BaseException | None, group=None) -> None:
    """A collective point where every rank learns whether some rank raised: if any did,
    all raise :class:`RankFailedError` naming the ranks and their errors."""
    flag = torch.tensor([0.0 if error is None else 1.0], device=_comm_device(group))
    _collective(dist.all_reduce, flag, group=group)
    if float(flag) > 0:
        _raise_failures(flag, group, error)


def _gather_flat(local: torch.Tensor, counts, group, error=None) -> torch.Tensor:
    """Row blocks of all ranks, rank after rank: (sum(counts), *local.shape[1:]).

    Blocks are padded to the largest count for one ``all_gather_into_tensor``; one more
    entry carries the rank's failure flag, so a rank whose local work raised makes every
    rank raise at this same collective instead of leaving them waiting.
    """
    world = len(counts)
    tail = tuple(local.shape[1:])
    width = 1
    for s in tail:
        width *= s
    most = max(counts)
    dev = _comm_device(group)
    buf = torch.zeros(most * width + 1, dtype=local.dtype, device=dev)
    if error is None:
        buf[:local.numel()] = local.reshape(-1).to(dev)
    else:
        buf[-1] = 1
    out = torch.empty(world * buf.numel(), dtype=local.dtype, device=dev)
    _collective(_ALL_GATHER, out, buf, group=group)
    out = out.view(world, -1)
    if bool((out[:, -1] != 0).any()):
        _raise_failures(out[:, -1], group, error)
    data = out[:, :-1].reshape(world, most, *tail)
    cnt = torch.as_tensor(counts, device=dev)
    valid = torch.arange(most, device=dev)[None, :] < cnt[:, None]
    return data[valid].to(local.device)


class _GatherRows(torch.autograd.Function):
    """All ranks' rows, gathered; the gradient of a value every rank computes alike is
    this rank's rows of its gradient."""

    @staticmethod
    def forward(ctx, local, sh):
        ctx.sh = sh
        return sh.place(_gather_flat(local, sh.counts, sh.group))

    @staticmethod
    def backward(ctx, grad):
        return ctx.sh.own(grad), None


class _GatherShared(_GatherRows):
    """The same gather, for a value each rank computes its own part of: the gradient is
    summed over the ranks before this rank keeps its rows."""

    @staticmethod
    def backward(ctx, grad):
        total = grad.contiguous().clone()
        dev = total.device
        total = total.to(_comm_device(ctx.sh.group))
        _collective(dist.all_reduce, total, group=ctx.sh.group)
        return ctx.sh.own(total.to(dev)), None


class _LocalRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, full, sh):
        ctx.sh = sh
        return sh.own(full)

    @staticmethod
    def backward(ctx, grad):
        return gather_rows(grad.contiguous(), ctx.sh), None


class _AllReduceSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, part, group):
        out = part.clone()
        _collective(dist.all_reduce, out, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class _SumGrads(torch.autograd.Function):
    @staticmethod
    def forward(ctx, group, *tensors):
        ctx.group = group
        ctx.shapes = [t.shape for t in tensors]
        return tuple(t.view_as(t) for t in tensors)

    @staticmethod
    def backward(ctx, *grads):
        flat = torch.cat([(torch.zeros(s, dtype=g.dtype, device=g.device) if g is None
                           else g).reshape(-1) for s, g in zip(ctx.shapes, _fill(grads, ctx))])
        dev = flat.device
        flat = flat.to(_comm_device(ctx.group))
        _collective(dist.all_reduce, flat, group=ctx.group)
        out = list(flat.to(dev).split([s.numel() for s in ctx.shapes]))
        return (None, *[o.view(s) for o, s in zip(out, ctx.shapes)])


def _fill(grads, ctx):
    like = next((g for g in grads if g is not None), None)
    return [g if g is not None else torch.zeros(s, dtype=like.dtype, device=like.device)
            for s, g in zip(ctx.shapes, grads)]


def _tracks(t: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and t.requires_grad


def gather_rows(local: torch.Tensor, sh, error: BaseException | None = None) -> torch.Tensor:
    """The rows of every rank, in the global order of ``sh`` (a :class:`Sharding`):
    (n, ...) replicated on every rank from each rank's (n_local, ...) block.

    ``error``: this rank's local work raised; every rank then raises RankFailedError here.
    Backward: each rank keeps the gradient of its own rows (no communication).
    """
    if error is not None:
        _gather_flat(local, sh.counts, sh.group, error)  # raises on every rank
    if _tracks(local):
        return _GatherRows.apply(local, sh)
    return sh.place(_gather_flat(local, sh.counts, sh.group))


def gather_shared(local: torch.Tensor, sh) -> torch.Tensor:
    """The rows of every rank (as :func:`gather_rows`), for a tensor each rank then uses
    in its *partial* share of a sum (the columns V of its row block's product): backward
    sums the ranks' gradients of the whole and keeps this rank's rows."""
    if _tracks(local):
        return _GatherShared.apply(local, sh)
    return sh.place(_gather_flat(local, sh.counts, sh.group))


def local_rows(full: torch.Tensor, sh) -> torch.Tensor:
    """This rank's rows of a replicated (n, ...) tensor; backward gathers the gradient."""
    if _tracks(full):
        return _LocalRows.apply(full, sh)
    return sh.own(full)


def all_reduce_sum(part: torch.Tensor, group, error: BaseException | None = None) -> torch.Tensor:
    """Σ over ranks of each rank's ``part`` (replicated result; backward: identity).

    ``error``: this rank's part could not be computed; every rank raises RankFailedError.
    """
    dev = part.device
    buf = torch.cat([part.reshape(-1), part.new_tensor([0.0 if error is None else 1.0])])
    buf = buf.to(_comm_device(group))
    if _tracks(part):
        buf = _AllReduceSum.apply(buf, group)
    else:
        _collective(dist.all_reduce, buf, group=group)
    if float(buf[-1]) > 0:
        _raise_failures(buf[-1:], group, error)
    return buf[:-1].to(dev).view(part.shape)


def sum_grads(tensors, group):
    """The replicated ``tensors`` unchanged, with their gradients all-reduced in backward:
    for tensors each rank uses in its partial share (hyperparameters in its row block).
    One all-reduce for all of them."""
    tensors = list(tensors)
    if not tensors or not torch.is_grad_enabled() or not any(t.requires_grad for t in tensors):
        return tensors
    return list(_SumGrads.apply(group, *tensors))
