"""Data whose rows are spread over the processes of a torch.distributed group."""
from __future__ import annotations

import torch
import torch.distributed as dist

from .._validation import as_tensor
from ..inputs import KernelInput, as_index
from ._comm import (_ALL_GATHER, _collective, _comm_device, _gather_flat, _raise_failures,
                    RankFailedError, agree, gather_rows, note_failure)

__all__ = ["Sharding", "ShardedInput", "shard_rows"]


class _Group:
    """A process group that deep copies (estimators copy their kernel) as itself."""

    def __init__(self, group=None):
        self.group = group

    def __deepcopy__(self, memo):
        return self


class Sharding:
    """Which global rows each rank holds.

    ``counts[j]`` rows on rank j; ``positions`` (n,) the global index of every row, rank
    after rank (``None``: rank j holds the contiguous rows offsets[j]:offsets[j + 1]).
    ``known``: the global order is the caller's (each rank said which rows it holds), so
    that values given whole, in that order (targets ``y``), can be matched to the rows.
    """

    def __init__(self, counts, group=None, positions: torch.Tensor | None = None,
                 known: bool = False):
        self.counts = [int(c) for c in counts]
        self.group = group
        self.rank = dist.get_rank(group)
        self.n = sum(self.counts)
        self.offset = sum(self.counts[:self.rank])
        self.n_local = self.counts[self.rank]
        self.positions = positions  # None: identity
        self.known = known

    def __deepcopy__(self, memo):
        return self

    def mine(self) -> torch.Tensor | slice:
        """Global indices of this rank's rows."""
        if self.positions is None:
            return slice(self.offset, self.offset + self.n_local)
        return self.positions[self.offset:self.offset + self.n_local]

    def place(self, stacked: torch.Tensor) -> torch.Tensor:
        """Rows stacked rank after rank, put in global order."""
        if self.positions is None:
            return stacked
        out = torch.empty_like(stacked)
        out[self.positions.to(stacked.device)] = stacked
        return out

    def own(self, full: torch.Tensor) -> torch.Tensor:
        """This rank's rows of a replicated (n, ...) tensor."""
        idx = self.mine()
        if isinstance(idx, slice):
            return full[idx]
        return full[idx.to(full.device)]

    def owners(self) -> torch.Tensor:
        """(n,) the rank holding each global row, and (n,) its index on that rank."""
        rank_of = torch.repeat_interleave(torch.arange(len(self.counts)),
                                          torch.as_tensor(self.counts))
        local_of = torch.cat([torch.arange(c) for c in self.counts]) if self.n else \
            torch.zeros(0, dtype=torch.long)
        if self.positions is None:
            return rank_of, local_of
        r, i = torch.empty_like(rank_of), torch.empty_like(local_of)
        r[self.positions.cpu()] = rank_of
        i[self.positions.cpu()] = local_of
        return r, i


class ShardedInput(KernelInput):
    r"""An (n, d) data set whose rows are spread over the ranks of a process group.

    Each rank passes its own rows ``local`` (n_j × d, possibly none); the data set is the
    ranks' rows one rank after the other (rank 0 first), or, with ``rows``, the rows in
    the global order the ranks give. Pass it, with a
    :class:`~torchkern.distributed.ShardedKernel`, wherever a torchkern estimator takes X:
    Gram matrices built from it are row-sharded
    (:class:`~torchkern.distributed.ShardedKernelMatrix`).

    Targets (``y``, ``sample_weight``) of a fit on it are each rank's own: ``fit(X, y_local)``
    with ``y_local`` the (n_j, ...) targets of this rank's rows, in the same order. Targets
    given whole (n rows) are accepted only when every rank said which global rows it
    holds (``rows``); otherwise a whole ``y`` is ambiguous — rows taken as ``X[rank::p]``
    would meet ``y``'s contiguous blocks — and the fit raises ValueError.

    Building one is collective: the ranks exchange their row counts and check that they
    agree on the width, the dtype and the device type; a rank whose rows are invalid
    (NaN, wrong width) makes every rank raise.

    Parameters
    ----------
    local : Tensor or array of shape (n_j, d)
        This rank's rows (n_j may be 0).
    group : ProcessGroup, optional
        Default: the world.
    rows : slice, range, or array of int of length n_j, optional
        The global indices of this rank's rows (e.g. ``slice(rank, None, p)`` for rows
        taken as ``X[rank::p]``, ``range(start, stop)`` for a contiguous block); given on
        every rank or on none, together a permutation of 0..n-1. The data set is then in
        that global order, and whole targets are matched to the rows by it.

    Attributes
    ----------
    local : Tensor
        This rank's rows (detached: gradients reach kernel hyperparameters, not the data).
    sharding : Sharding
        Row counts of all ranks and the global position of each row.
    """

    def __init__(self, local, group=None, *, rows=None, _sharding: Sharding | None = None):
        self._group = group if isinstance(group, _Group) else _Group(group)
        if _sharding is not None:
            self.local, self.sharding = local, _sharding
        else:
            self.local, self.sharding = _exchange(local, self._group.group, rows)
        self.dtype, self.device = self.local.dtype, self.local.device

    def align_rows(self, values, name: str = "y"):
        """Per-row values of a fit (targets, sample weights) as the estimators read them:
        all n rows, in this data set's order, on every rank (collective).

        ``values`` holds this rank's rows (n_j, ...) — or all n rows in the global order
        of ``rows`` when every rank gave it. A whole ``values`` without ``rows`` raises
        ValueError (its order cannot be told from the shards'); a rank whose values are
        invalid makes every rank raise (that rank its ValueError, the others
        RankFailedError naming it). Scalars, None and a ShardedInput paired with this one
        (same counts and ``rows``) are returned as they are. Tensors come back as tensors
        on this data's device, anything else as a NumPy array. Also pairs the samples of
        ``HSICTest.test(X, Y)`` and the views of ``KernelCCA.fit(X, y)``.
        """
        import numpy as np
        sh = self.sharding
        if isinstance(values, ShardedInput):  # a second view, sharded: paired row by row
            other = values.sharding
            same = other.counts == sh.counts and (
                (other.positions is None and sh.positions is None) or
                (other.positions is not None and sh.positions is not None
                 and torch.equal(other.positions.cpu(), sh.positions.cpu())))
            if not same:
                raise ValueError(f"{name} is a ShardedInput whose rows are not paired with "
                                 f"X's: each rank must hold as many rows of both (counts "
                                 f"{other.counts} and {sh.counts}), with the same rows=")
            return values
        if values is None or (values.dim() == 0 if isinstance(values, torch.Tensor)
                              else np.ndim(values) == 0):
            return values
        error, mine = None, None
        try:
            T = values if isinstance(values, torch.Tensor) else np.asarray(values)
            if T.shape[0] == sh.n_local:
                mine = T
            elif T.shape[0] == sh.n and sh.known:
                idx = sh.mine()
                if not isinstance(idx, slice):
                    idx = idx.to(T.device) if isinstance(T, torch.Tensor) else idx.cpu().numpy()
                mine = T[idx]
            elif T.shape[0] == sh.n:
                raise ValueError(
                    f"{name} has the length of the whole data set ({sh.n}), but the "
                    f"ShardedInput does not say which global rows each rank holds, so "
                    f"{name}'s order cannot be matched to the rows: pass this rank's own "
                    f"{name} ({sh.n_local} rows, in the order of its X rows), or give "
                    f"ShardedInput(X_local, rows=...) the global indices of this rank's rows")
            else:
                raise ValueError(
                    f"{name} has {T.shape[0]} rows; expected this rank's {sh.n_local} "
                    f"(its rows of the ShardedInput)"
                    + (f" or all {sh.n} in the global order of rows=" if sh.known else ""))
        except (TypeError, ValueError) as exc:
            error = exc
        try:
            agree(error, self.group)
        except RankFailedError:
            if error is not None:
                raise error from None  # this rank's own error, as it would be alone
            raise
        if isinstance(mine, torch.Tensor):
            mine = mine.detach().cpu()
        parts = [None] * len(sh.counts)
        _collective(dist.all_gather_object, parts, mine, group=self.group)
        if len({(tuple(p.shape[1:]), str(p.dtype)) for p in parts}) > 1:
            raise ValueError(f"{name}: the ranks' rows differ in shape or dtype: "
                             + ", ".join(f"rank {j} {tuple(p.shape)} {p.dtype}"
                                         for j, p in enumerate(parts)))
        if isinstance(mine, torch.Tensor):
            return sh.place(torch.cat(parts)).to(self.device)
        stacked = np.concatenate(parts)
        if sh.positions is None:
            return stacked
        out = np.empty_like(stacked)
        out[sh.positions.cpu().numpy()] = stacked
        return out

    def report_failure(self, error: BaseException) -> None:
        """This rank's fit on this data raised ``error`` outside a collective: tell the
        other ranks (through the process group's store), so that they raise
        ``RankFailedError("rank r failed: ...")`` within seconds instead of waiting out
        the process-group timeout. Called by every estimator's ``fit``."""
        note_failure(error, self.group)

    @property
    def group(self):
        return self._group.group

    def __len__(self) -> int:
        return self.sharding.n

    @property
    def shape(self) -> tuple:
        return (self.sharding.n, self.local.shape[1])

    def detach(self) -> "ShardedInput":
        return self

    def to(self, *args, device=None, dtype=None) -> "ShardedInput":
        """This data on another device and/or in another floating dtype (``to(dtype)``
        as tensors take it)."""
        for a in args:
            if isinstance(a, torch.dtype):
                dtype = a
            else:
                device = a
        return ShardedInput(self.local.to(device=device, dtype=dtype), self._group,
                            _sharding=self.sharding)

    def gather(self) -> torch.Tensor:
        """All rows, (n, d), on every rank (collective)."""
        return gather_rows(self.local, self.sharding)

    def take(self, idx) -> torch.Tensor:
        """The rows ``idx`` (global positions) as an ordinary tensor on every rank
        (collective: each rank sends those it holds)."""
        idx = as_index(idx, len(self))
        rank_of, local_of = self.sharding.owners()
        idx = idx.cpu()
        owner = rank_of[idx]
        mine = owner == self.sharding.rank
        sub = Sharding(torch.bincount(owner, minlength=len(self.sharding.counts)).tolist(),
                       self.group, positions=torch.argsort(owner, stable=True))
        rows = self.local[local_of[idx[mine]].to(self.device)]
        return gather_rows(rows, sub)

    @classmethod
    def concat(cls, parts) -> "ShardedInput":
        """The data sets one after the other; each rank keeps its rows (no communication)."""
        parts = list(parts)
        groups = {id(p._group.group) for p in parts}
        if len(groups) > 1:
            raise ValueError("cannot concatenate ShardedInputs of different process groups")
        world = len(parts[0].sharding.counts)
        counts = [sum(p.sharding.counts[j] for p in parts) for j in range(world)]
        pieces, start = [[] for _ in range(world)], 0
        for p in parts:
            pos = p.sharding.positions
            pos = torch.arange(p.sharding.n) if pos is None else pos.cpu()
            for j, block in enumerate(pos.split(p.sharding.counts)):
                pieces[j].append(block + start)
            start += p.sharding.n
        positions = torch.cat([torch.cat(b) for b in pieces])
        local = torch.cat([p.local for p in parts])
        known = all(p.sharding.known for p in parts)
        return cls(local, parts[0]._group,
                   _sharding=Sharding(counts, parts[0].group, positions, known=known))

    def check_compatible(self, other, name: str = "X") -> None:
        width = other.shape[1] if len(other.shape) == 2 else None
        if width != self.local.shape[1]:
            raise ValueError(f"{name} has {width} features, but the fitted data has "
                             f"{self.local.shape[1]}")

    def __repr__(self) -> str:
        return (f"ShardedInput(n={len(self)}, d={self.local.shape[1]}, "
                f"n_local={self.sharding.n_local}, ranks={len(self.sharding.counts)}, "
                f"dtype={self.dtype}, device={self.device})")


def _exchange(local, group, rows=None):
    """Validate this rank's rows and agree with the others on counts, width and dtype
    (and, with ``rows``, on the global position of every row)."""
    error = None
    try:
        if isinstance(local, KernelInput):
            raise TypeError("ShardedInput holds vector data: local must be an (n_j, d) "
                            f"tensor or array, got a {type(local).__name__}")
        T = as_tensor(local, "local", min_rows=0).detach()
        if rows is not None and not isinstance(rows, slice):
            rows = torch.as_tensor(list(rows) if isinstance(rows, range) else rows)
            if rows.dim() != 1 or rows.shape[0] != T.shape[0] or (
                    rows.numel() and (rows.is_floating_point() or rows.dtype == torch.bool)):
                raise ValueError(f"rows must hold the global index of each of this rank's "
                                 f"{T.shape[0]} rows (integers), got shape "
                                 f"{tuple(rows.shape)}, dtype {rows.dtype}")
        meta = [T.shape[0], T.shape[1], _DTYPES.index(T.dtype) if T.dtype in _DTYPES else -1,
                int(T.is_cuda), 0, int(rows is not None)]
    except (TypeError, ValueError) as exc:
        error, T, meta = exc, None, [0, 0, 0, 0, 1, 0]
    world = dist.get_world_size(group)
    dev = _comm_device(group)
    out = torch.empty(world * 6, dtype=torch.long, device=dev)
    _collective(_ALL_GATHER, out,
                torch.tensor(meta, dtype=torch.long, device=dev), group=group)
    out = out.view(world, 6).cpu()
    if bool(out[:, 4].any()):
        _raise_failures(out[:, 4], group, error)
    for col, what in ((1, "number of features"), (2, "dtype"), (3, "device type")):
        if len(set(out[:, col].tolist())) > 1:
            raise ValueError(f"ShardedInput: the ranks' rows differ in {what} "
                             f"(per rank: {out[:, col].tolist()})")
    counts, n = out[:, 0].tolist(), int(out[:, 0].sum())
    if n == 0:
        raise ValueError("ShardedInput: no rank holds any rows (empty data)")
    given = out[:, 5].tolist()
    if not any(given):
        return T, Sharding(counts, group)
    if not all(given):
        raise ValueError(f"ShardedInput: rows= must be given on every rank or on none "
                         f"(given on ranks {[j for j, g in enumerate(given) if g]})")
    error = None
    if isinstance(rows, slice):
        try:  # a bad slice (step 0, a float) must fail every rank, not leave them waiting
            rows = torch.arange(*rows.indices(n))  # negative steps too
        except (TypeError, ValueError) as exc:
            error, rows = ValueError(f"rows: {exc}"), None
    if error is None and rows.shape[0] != T.shape[0]:
        error = ValueError(f"rows selects {rows.shape[0]} global rows, but this rank holds "
                           f"{T.shape[0]}")
    positions = _gather_flat(rows.to(torch.long).reshape(-1, 1) if error is None else
                             torch.zeros(T.shape[0], 1, dtype=torch.long), counts, group,
                             error)[:, 0].cpu()
    if not torch.equal(torch.sort(positions).values, torch.arange(n)):
        raise ValueError(f"ShardedInput: the ranks' rows= together must be a permutation "
                         f"of 0..{n - 1} (each global row on exactly one rank)")
    return T, Sharding(counts, group, positions=positions, known=True)


_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def shard_rows(X, group=None) -> torch.Tensor:
    """This rank's contiguous share of a data set every rank holds (rows
    ⌊jn/p⌋ to ⌊(j+1)n/p⌋ on rank j of p): for examples and tests; real data is read
    shard by shard."""
    n = X.shape[0]
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    return X[rank * n // world:(rank + 1) * n // world]
