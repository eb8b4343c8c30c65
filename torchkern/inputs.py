"""What a kernel input is — the one place that says it.

A *kernel input* is whatever a kernel knows how to compare: an (n, d) tensor or array for
the vector kernels of :mod:`torchkern.kernels`, a set of graphs for the graph kernels of
:mod:`torchkern.graphs`, a set of strings for :mod:`torchkern.sequences`, the nodes of one
graph for node kernels. Estimators, approximations and tests never assume (n, d); they

- validate data through the kernel: :func:`check_input` (``kernel.check_input``),
- ask its length (``X.shape[0]``, :func:`n_samples`),
- index it with an index tensor (CV splits, Nyström centres, SMO rows, permutations):
  :func:`take`, and concatenate samples: :func:`concat`,
- check predict-time data against the fitted data: :func:`check_fitted_input`,

and hand it to the kernel, ``kernel(X, Y) -> KernelMatrix``.

Tensors are kernel inputs as they are. Other inputs are :class:`KernelInput` objects,
which look enough like a tensor for that protocol: ``len``, ``shape == (n,)``, ``dtype``
(the floating dtype of the Gram matrices computed from them), ``device``, ``X[idx]`` and
``X.to(device, dtype)``.
"""
from __future__ import annotations

import torch

from ._validation import as_tensor, check_symmetric, index_tensor

__all__ = ["KernelInput", "check_input", "check_fitted_input", "check_precomputed",
           "n_samples", "n_features", "take", "concat", "as_index"]


def as_index(idx, n: int, name: str = "idx", device=None) -> torch.Tensor:
    """A 1-D int64 index tensor from an int, a slice, a boolean mask, a list, an array or a
    tensor, checked against the length ``n`` (:func:`torchkern._validation.index_tensor`,
    which the KernelMatrix's rows and columns share)."""
    return index_tensor(idx, n, name, device)


def as_device(device, name: str = "device") -> torch.device:
    """``torch.device(device)``, or a TypeError naming ``name`` (torch's RuntimeError for
    'gpu0' does not)."""
    try:
        return torch.device(device)
    except (RuntimeError, TypeError):
        raise TypeError(f"{name} must be a torch.device, a device string such as 'cpu' or "
                        f"'cuda:0', or a CUDA index, got {device!r}") from None


class KernelInput:
    """Base class of non-vector kernel inputs (a set of graphs, of strings, of nodes).

    Subclasses implement ``__len__``, :meth:`take` and :meth:`concat`, and set
    ``dtype`` / ``device`` (the floating dtype and device of the Gram matrices a kernel
    builds from them). Everything else an estimator needs follows from those.
    """

    dtype: torch.dtype = torch.float64
    device: torch.device = torch.device("cpu")

    def __len__(self) -> int:
        raise NotImplementedError

    def take(self, idx: torch.Tensor) -> "KernelInput":
        """The sub-collection at the positions ``idx`` (an int64 tensor), in that order."""
        raise NotImplementedError

    @classmethod
    def concat(cls, parts) -> "KernelInput":
        """The collections ``parts`` one after the other."""
        raise NotImplementedError

    def to(self, device=None, dtype=None) -> "KernelInput":
        """A view with another device and/or output dtype (the data is moved if needed)."""
        import copy
        out = copy.copy(self)
        if dtype is not None:
            out.dtype = gram_dtype(dtype)
        if device is not None:
            device = as_device(device)
            if device.type == "cuda" and device.index is None:  # as tensors report it
                device = torch.device("cuda", torch.cuda.current_device())
            out.device = device
            out._move(out.device)
        return out

    def _move(self, device) -> None:
        """Move the stored tensors to ``device`` in place (a copy made by :meth:`to`)."""

    def check_compatible(self, other: "KernelInput", name: str = "X") -> None:
        """Raise ValueError if ``other`` (data met at predict time) cannot be compared with
        this (fitted) input."""
        if type(other) is not type(self):
            raise TypeError(f"{name} is a {type(other).__name__} but the model was fitted on "
                            f"a {type(self).__name__}")

    @property
    def shape(self) -> tuple:
        return (len(self),)

    def __getitem__(self, idx):
        if isinstance(idx, tuple):  # X[idx, ...] (scikit-learn's _safe_indexing): 1-D
            if not (len(idx) == 1 or (len(idx) == 2 and idx[1] is Ellipsis)):
                raise IndexError(f"a {type(self).__name__} is indexed along its samples "
                                 f"only, got the index {idx!r}")
            idx = idx[0]
        return self.take(as_index(idx, len(self)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n={len(self)}, dtype={self.dtype}, device={self.device})"


def _is_precomputed(kernel) -> bool:
    return isinstance(kernel, str) and kernel == "precomputed"


def check_input(kernel, X, name: str = "X", **kw):
    """``X`` validated as an input of ``kernel``.

    ``kernel="precomputed"``: X is a Gram matrix (a KernelMatrix passes through; a tensor
    or array must be 2-D). Otherwise the kernel says what it takes
    (``kernel.check_input``): vector kernels return a 2-D float tensor (keyword arguments
    go to :func:`torchkern._validation.as_tensor`; a 1-D array is an error unless
    ``allow_1d=True``), structured kernels a :class:`KernelInput`.
    """
    from .gram import KernelMatrix
    if _is_precomputed(kernel):
        if isinstance(X, KernelMatrix):
            return X
        kw.pop("allow_1d", None)
        return as_tensor(X, name, allow_1d=False, **kw)
    kw.setdefault("allow_1d", False)  # estimators: scikit-learn's "Reshape your data"
    if kernel is None:
        return as_tensor(X, name, **kw)
    if not hasattr(kernel, "check_input"):
        raise TypeError(f"kernel must be a torchkern Kernel or 'precomputed', got {kernel!r}")
    if not getattr(kernel, "vector_input", True):
        return kernel.check_input(X, name)  # structured inputs: the kernel decides alone
    return kernel.check_input(X, name, **kw)


def check_fitted_input(kernel, X, X_fit, name: str = "X", estimator=None, **kw):
    """Predict-time data validated against the fitted data ``X_fit``: same kind, same
    number of features, cast to the fitted dtype and device. ``estimator`` (an estimator
    or its name) makes the messages scikit-learn's; ``kw`` go to :func:`check_input`.
    A kernel with a ``_check_fitted(X_fit, X, name)`` hook (the graph kernels), or a sum
    or scaling of such kernels, compares only the fields its terms read; otherwise
    ``X_fit.check_compatible(X, name)``."""
    X = check_input(kernel, X, name, **kw)
    if isinstance(X_fit, KernelInput):
        hooks = None if kernel is None or _is_precomputed(kernel) else _fitted_checks(kernel)
        if hooks is None:
            X_fit.check_compatible(X, name)
        for hook in hooks or ():
            hook(X_fit, X, name)
        # moved only when on another device: a move reads every field (a graph set's
        # unread fields, which its kernel may never read)
        return X.to(device=None if X.device == X_fit.device else X_fit.device,
                    dtype=X_fit.dtype)
    if isinstance(X, KernelInput):
        raise TypeError(f"{name} is a {type(X).__name__} but the model was fitted on a tensor")
    if X.shape[1] != X_fit.shape[1]:
        who = estimator if isinstance(estimator, str) or estimator is None else \
            type(estimator).__name__
        raise ValueError(f"{name} has {X.shape[1]} features, but {who or 'the model'} is "
                         f"expecting {X_fit.shape[1]} features as input")
    return X.to(dtype=X_fit.dtype, device=X_fit.device)


def _fitted_checks(kernel):
    """The ``_check_fitted`` hooks of ``kernel``: its own, else those of every term of a
    kernel made of others (a sum's ``kernels``, a scaled kernel's ``base``); None when
    one has none (then the input's own, full check applies)."""
    hook = getattr(kernel, "_check_fitted", None)
    if hook is not None:
        return [hook]
    terms = getattr(kernel, "kernels", None)
    if terms is None and getattr(kernel, "base", None) is not None:
        terms = [kernel.base]
    if not terms or not all(hasattr(t, "check_input") for t in terms):
        return None
    hooks = []
    for t in terms:
        h = _fitted_checks(t)
        if h is None:
            return None
        hooks += h
    return hooks


def check_precomputed(X, n_fit: int | None = None, name: str = "X", square: bool = False):
    """A precomputed Gram matrix: square at fit time, (m, n_fit) against the training
    samples at predict time."""
    X = check_input("precomputed", X, name)
    if square and X.shape[0] != X.shape[1]:
        raise ValueError(f"with kernel='precomputed', {name} must be the square (n, n) Gram "
                         f"matrix of the training data, got shape {tuple(X.shape)}")
    if square and isinstance(X, torch.Tensor):
        check_symmetric(X, name)
    if n_fit is not None and X.shape[1] != n_fit:
        raise ValueError(f"with kernel='precomputed', {name} must have one column per "
                         f"training sample ({n_fit}), got shape {tuple(X.shape)}")
    return X


def n_samples(X) -> int:
    """The number of samples of a kernel input (or rows of a Gram matrix)."""
    return int(X.shape[0])


def n_features(X) -> int | None:
    """The width of a vector input; ``None`` for structured inputs."""
    return None if isinstance(X, KernelInput) else int(X.shape[1])


def take(X, idx):
    """The samples ``idx`` of a kernel input (rows of a tensor, items of a KernelInput)."""
    if isinstance(X, KernelInput):
        return X.take(as_index(idx, len(X)))
    # checked as for a KernelInput: X[[0.5]] would read row 0, silently
    return X[as_index(idx, X.shape[0], device=X.device)]


def gram_dtype(dtype, name: str = "dtype") -> torch.dtype:
    """The dtype of the Gram matrices of a structured input: a floating torch dtype (a
    TypeError naming ``name`` otherwise), float16 / bfloat16 read as float32 as the vector
    kernels upcast half-precision data (counts past 65504 were inf in float16, and the
    sparse products refused it)."""
    if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise TypeError(f"{name} must be a floating torch dtype, got {dtype!r}")
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def nonempty_parts(parts) -> list:
    """``parts`` as a list, a ValueError if it holds none (a concatenation of nothing was an
    IndexError, or torch.cat's error)."""
    parts = list(parts)
    if not parts:
        raise ValueError("parts is empty: give at least one input to concatenate")
    return parts


def concat(parts):
    """Kernel inputs of one kind, one after the other (``torch.cat`` for tensors)."""
    parts = nonempty_parts(parts)
    if isinstance(parts[0], KernelInput):
        kinds = {type(p) for p in parts}
        if len(kinds) > 1:
            raise TypeError(f"cannot concatenate inputs of kinds {sorted(k.__name__ for k in kinds)}")
        return type(parts[0]).concat(parts)
    if any(isinstance(p, KernelInput) for p in parts):
        raise TypeError("cannot concatenate a tensor with a structured kernel input")
    widths = {tuple(p.shape[1:]) for p in parts}
    if len(widths) > 1:
        raise ValueError(f"cannot concatenate inputs of different widths: sample shapes "
                         f"{sorted(widths)}")
    return torch.cat(parts)
