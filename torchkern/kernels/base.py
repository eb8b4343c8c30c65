"""The kernel base class, positive hyperparameters, and kernel algebra."""
from __future__ import annotations

import copy
import functools
import inspect
import io
import math
import numbers
import operator
import reprlib

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .._config import _check_backend, config
from .._validation import as_tensor, is_int, is_real, real_tensor
from ..inputs import KernelInput
from ..gram import (DenseKernelMatrix, Formula, FormulaKernelMatrix, KernelMatrix,
                    ScaledKernelMatrix, SumKernelMatrix, _finite_gram, combine_formulas,
                    lazy_sum)
from ._ops import center, fast_form_dtype, in_precision

__all__ = ["Kernel", "SumKernel", "ProductKernel", "ScaleKernel", "inv_softplus"]


def inv_softplus(value: torch.Tensor) -> torch.Tensor:
    """The raw parameter r with softplus(r) = value (value > 0), computed stably."""
    return value + torch.log(-torch.expm1(-value))


_HALF = (torch.float16, torch.bfloat16)


def upcast_half(X: torch.Tensor) -> torch.Tensor:
    """float16 / bfloat16 ``X`` as float32 (other dtypes as they are): kernel formulas in
    half precision overflow (‖x − y‖² > 65504 in float16 made Matérn Gram matrices NaN at
    distances of 256 lengthscales, Linear and Polynomial inf) and keep two or three digits
    (the arc-cosine kernel was off by 97 % on unit data), so vector kernels compute on
    half-precision data in float32 and return float32 matrices, as the eigensolvers need
    anyway."""
    return X.float() if X.dtype in _HALF else X


def _from_bytes(cls, data: bytes):
    """An object of ``cls`` with the state that :class:`PicklesByValue` saved."""
    obj = cls.__new__(cls)
    obj.__setstate__(torch.load(io.BytesIO(data), weights_only=False))
    return obj


class PicklesByValue:
    """Pickling that depends on the values of an object's tensors only.

    The default pickle of a tensor names its storage by memory address, so two equal
    kernels (one a deep copy of the other) pickle to different bytes: ``joblib.hash``
    differs, ``joblib.Memory`` misses its cache, and scikit-learn's
    ``check_estimators_overwrite_params`` sees a parameter change where there is none.
    Here the state (``__getstate__``) is written by :func:`torch.save`, which numbers
    storages in the order it meets them; the pickle is the class and those bytes. Deep
    copies keep Python's own (memo-sharing) behaviour."""

    def __reduce_ex__(self, protocol):
        buf = io.BytesIO()
        torch.save(self.__getstate__(), buf)
        return _from_bytes, (type(self), buf.getvalue())

    def __deepcopy__(self, memo):
        obj = type(self).__new__(type(self))
        memo[id(self)] = obj
        obj.__setstate__(copy.deepcopy(self.__getstate__(), memo))
        return obj


def _fmt(t: torch.Tensor) -> str:
    t = t.detach().cpu()
    if t.numel() == 1:
        return f"{t.item():.4g}"
    return "[" + ", ".join(f"{v:.4g}" for v in t.reshape(-1).tolist()) + "]"


def _attribute(name: str):
    """closure(module) = module.<name>."""
    def closure(module):
        return getattr(module, name)
    closure.__name__ = name
    return closure


def _in_dtype(prior, dtype, device, _depth=0):
    """``prior`` with its floating-point tensors in ``dtype`` on ``device`` (a shallow copy;
    torch.distributions keep their parameters as tensors in ``__dict__``, TransformedDistribution
    its base and transforms): ``Gamma(3.0, 6.0)`` is float32 and would evaluate a float64
    hyperparameter in float32. An ``nn.Module`` prior (GPyTorch's) is converted by ``.to``
    on a copy, and its distribution attributes as above. Anything else is returned as it
    is."""
    if not dtype.is_floating_point or _depth > 4:
        return prior
    if isinstance(prior, nn.Module):
        tensors = list(prior.parameters()) + list(prior.buffers())
        if not all(t.dtype == dtype and t.device == device
                   for t in tensors if t.is_floating_point()):
            prior = copy.deepcopy(prior).to(dtype=dtype, device=device)
        # and on to its plain attributes: GPyTorch's HalfCauchyPrior evaluates with its
        # base_dist's scale, a float32 tensor that .to (buffers only) does not reach
    state = getattr(prior, "__dict__", None)
    if state is None:
        return prior
    changed = {}
    for key, value in state.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and \
                (value.dtype != dtype or value.device != device):
            changed[key] = value.to(dtype=dtype, device=device)
        elif isinstance(value, (torch.distributions.Distribution, torch.distributions.Transform)):
            new = _in_dtype(value, dtype, device, _depth + 1)
            if new is not value:
                changed[key] = new
        elif isinstance(value, (list, tuple)) and any(
                isinstance(v, torch.distributions.Transform) for v in value):
            items = [_in_dtype(v, dtype, device, _depth + 1) for v in value]
            if any(a is not b for a, b in zip(items, value)):
                changed[key] = type(value)(items)
    if not changed:
        return prior
    out = copy.copy(prior)
    out.__dict__.update(changed)
    return out


class Kernel(PicklesByValue, nn.Module):
    r"""Base class of torchkern kernels.

    A kernel is an ``nn.Module``: ``k(X, Y=None, *, backend=None)`` returns a lazy
    :class:`~torchkern.gram.KernelMatrix` of shape (n, m) (``Y=None`` means ``Y = X``),
    ``k.diag(X)`` the values k(x_i, x_i) without computing the matrix.

    Subclasses write their formula once, in :meth:`_k`, with operations that torch tensors
    and KeOps LazyTensors both support; the dense, blocked and KeOps backends all evaluate
    that one definition. Hyperparameters are registered with
    :meth:`register_hyperparameter`: each is stored as an unconstrained ``nn.Parameter``
    ``raw_<name>`` and read as ``softplus(raw)``, so it stays positive under gradient steps.
    Every constructor also takes ``<name>_prior=`` (a ``torch.distributions``
    distribution on that hyperparameter, GPyTorch's convention; :meth:`register_prior`).

    Backends (``backend=``): ``"dense"`` materializes the matrix; ``"blocked"`` evaluates
    row blocks with torch; ``"keops"`` builds a KeOps reduction; ``"auto"`` (the default
    setting, see :func:`torchkern.set_backend`) is dense when n·m ≤
    ``config.dense_max_entries``, otherwise KeOps on CUDA and blocked on the CPU (where
    blocked torch matches KeOps' speed without its compile time), falling back to blocked
    with one warning when KeOps cannot be used.

    Kernels pickle by value (:class:`PicklesByValue`): equal kernels give equal
    ``joblib.hash`` values, whatever the tensors' addresses.
    """

    #: False for kernels on structured inputs (graphs, strings, nodes): they have no
    #: vector formula (scikit-learn's ``requires_vector_input``).
    vector_input = True
    #: :meth:`check_input` makes float16 / bfloat16 data float32 (:func:`upcast_half`).
    _upcast_half = True
    # NumPy defers to our operators: np.array([2.0]) * k was an object array holding 2·k
    __array_ufunc__ = None

    def __init__(self, *, active_dims=None):
        super().__init__()
        object.__setattr__(self, "_hypers", {})
        object.__setattr__(self, "_priors", {})
        self.register_buffer("active_dims", None)
        if active_dims is not None:
            self.set_active_dims(active_dims)

    def __init_subclass__(cls, **kw):
        # Every kernel constructor takes ``active_dims=`` (GPyTorch's convention) without
        # each subclass declaring it: the keyword is taken here and applied after __init__.
        super().__init_subclass__(**kw)
        init = cls.__dict__.get("__init__")
        if init is None or getattr(init, "_takes_active_dims", False):
            return

        sig = inspect.signature(init)

        @functools.wraps(init)
        def __init__(self, *args, active_dims=None, **kwargs):
            # ``<hyperparameter>_prior=`` keywords (GPyTorch's ``lengthscale_prior=``) are
            # taken here too and registered once the hyperparameters exist
            priors = {k: kwargs.pop(k) for k in list(kwargs)
                      if k.endswith("_prior") and k not in sig.parameters}
            init(self, *args, **kwargs)
            if active_dims is not None:
                self.set_active_dims(active_dims)
            for key, prior in priors.items():
                if key[:-len("_prior")] not in self.__dict__.get("_hypers", {}):
                    raise TypeError(f"{type(self).__name__}() got an unexpected keyword "
                                    f"argument {key!r}: it has no hyperparameter "
                                    f"{key[:-len('_prior')]!r} (its hyperparameters: "
                                    f"{sorted(self.__dict__.get('_hypers', {}))})")
                self.set_prior(key[:-len("_prior")], prior)

        if "active_dims" not in sig.parameters:
            extra = inspect.Parameter("active_dims", inspect.Parameter.KEYWORD_ONLY, default=None)
            params = list(sig.parameters.values())
            at = next((i for i, p in enumerate(params) if p.kind == p.VAR_KEYWORD), len(params))
            __init__.__signature__ = sig.replace(parameters=params[:at] + [extra] + params[at:])
        __init__._takes_active_dims = True
        cls.__init__ = __init__

    def set_active_dims(self, active_dims) -> "Kernel":
        """Make the kernel read only the columns ``active_dims`` of its inputs.

        ``k = RBF(active_dims=[0, 2])`` compares x[[0, 2]] with y[[0, 2]] (GPyTorch's
        convention), so kernels on feature groups or data sources combine by ``+`` and
        ``*`` (e.g. one kernel per feature in :class:`torchkern.learning.MultipleKernel`).
        ``ard_dims`` then counts the active columns. ``None`` reads every column.
        """
        if active_dims is None:
            self.active_dims = None
            return self
        if not self.vector_input or type(self).formula is not Kernel.formula:
            raise TypeError(f"{type(self).__name__} does not take active_dims: it is not a "
                            f"kernel on vectors with a formula of its own")
        try:
            dims = torch.as_tensor(active_dims)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(f"active_dims must be a non-empty list of distinct non-negative "
                             f"column indices, got {active_dims!r}") from None
        if dims.dim() == 0:
            dims = dims.reshape(1)
        if (dims.dim() != 1 or dims.numel() == 0 or dims.is_floating_point()
                or dims.dtype == torch.bool or bool((dims < 0).any())
                or dims.unique().numel() != dims.numel()):
            raise ValueError(f"active_dims must be a non-empty list of distinct non-negative "
                             f"column indices, got {active_dims!r}")
        self.active_dims = dims.long()
        return self

    # -- hyperparameters ---------------------------------------------------------------
    def register_hyperparameter(self, name: str, value, *, allow_zero: bool = False,
                                learnable: bool = True, scalar: bool = False) -> None:
        """Register a positive hyperparameter readable as ``self.<name>``.

        A value of exactly zero (where ``allow_zero``) or ``learnable=False`` is stored as
        a fixed buffer instead of a parameter. ``scalar``: a single number is required (a
        formula that reads one value a pair; a vector failed in torch's broadcasting when
        the kernel was evaluated).
        """
        t = real_tensor(value, f"{type(self).__name__}: {name}").detach().clone()
        if scalar and t.numel() != 1:
            raise ValueError(f"{type(self).__name__}: {name} must be a single number, got "
                             f"shape {tuple(t.shape)}")
        bad = (t < 0) if allow_zero else (t <= 0)
        if not bool(torch.isfinite(t).all()) or bool(bad.any()):
            bound = ">= 0" if allow_zero else "> 0"
            raise ValueError(f"{type(self).__name__}: {name} must be finite and {bound}, "
                             f"got {value!r}")
        if learnable and bool((t > 0).all()):
            self.register_parameter("raw_" + name, nn.Parameter(inv_softplus(t)))
            self._hypers[name] = "softplus"
        else:
            self.register_buffer("fixed_" + name, t)
            self._hypers[name] = "fixed"

    def __getattr__(self, name):
        hypers = self.__dict__.get("_hypers")
        if hypers is not None and name in hypers:
            if hypers[name] == "softplus":
                return F.softplus(super().__getattr__("raw_" + name))
            return super().__getattr__("fixed_" + name)
        priors = self.__dict__.get("_priors")
        if priors is not None and name in priors:
            return priors[name][0]
        return super().__getattr__(name)

    def __setattr__(self, name, value):
        hypers = self.__dict__.get("_hypers")
        if hypers is not None and name in hypers and not isinstance(value, nn.Parameter):
            t = real_tensor(value, f"{type(self).__name__}: {name}")
            if not bool(torch.isfinite(t).all()) or bool((t <= 0).any()):
                raise ValueError(f"{type(self).__name__}: {name} must be finite and > 0, "
                                 f"got {value!r}")
            have = super().__getattr__(("raw_" if hypers[name] == "softplus" else "fixed_")
                                       + name)
            if t.numel() not in (1, have.numel()):
                raise ValueError(f"{type(self).__name__}: {name} must be a float or have "
                                 f"{have.numel()} entries, got {t.numel()}")
            with torch.no_grad():
                if hypers[name] == "softplus":
                    raw = super().__getattr__("raw_" + name)
                    raw.copy_(inv_softplus(t).to(raw.dtype).expand_as(raw))
                else:
                    buf = super().__getattr__("fixed_" + name)
                    buf.copy_(t.to(buf.dtype).expand_as(buf))
            return
        super().__setattr__(name, value)

    def hyperparameters(self) -> dict:
        """The current values of this kernel's own hyperparameters, by name."""
        return {name: getattr(self, name) for name in self._hypers}

    # -- priors on hyperparameters (GPyTorch's register_prior / named_priors) -----------
    def register_prior(self, name: str, prior, param_or_closure) -> "Kernel":
        r"""Put the prior distribution ``prior`` on a hyperparameter, or on a function of
        the kernel's hyperparameters, as GPyTorch's ``Module.register_prior`` does.

        ``k.register_prior("lengthscale_prior", Gamma(3.0, 6.0), "lengthscale")`` is
        what ``RBF(lengthscale_prior=Gamma(3.0, 6.0))`` and
        ``k.set_prior("lengthscale", Gamma(3.0, 6.0))`` do. The prior's density is of
        the hyperparameter's positive value (the lengthscale ℓ, not its raw parameter),
        summed over its entries for ARD: log p(θ) = Σ log p(ℓ_i). It enters the MAP
        objectives — :func:`torchkern.learning.log_posterior`, the ``"lml"`` and
        ``"map"`` objectives of :func:`torchkern.learning.learn_kernel`, and
        :class:`torchkern.GaussianProcessRegressor`'s ``fit(optimize=True)`` —, as the
        priors of a GPyTorch model enter ``ExactMarginalLogLikelihood``.

        Parameters
        ----------
        name : str
            The prior's name (``"<hyperparameter>_prior"`` by convention); readable as
            ``k.<name>``. Registering a name again replaces the prior.
        prior : torch.distributions.Distribution
            Or anything with a ``log_prob(value)`` method (a GPyTorch prior). Its
            parameters are cast to the hyperparameter's dtype (float64) when evaluated,
            so ``Gamma(3.0, 6.0)`` built in float32 gives a float64 log density.
            Typical: ``Gamma(concentration, rate)`` or ``LogNormal(loc, scale)`` on
            lengthscales, ``HalfCauchy(scale)`` on variances.
        param_or_closure : str or callable
            The name of one of this kernel's hyperparameters, or ``closure(kernel)``
            returning the tensor the prior is evaluated at (e.g.
            ``lambda k: k.lengthscale.log()`` for a Normal prior on log ℓ).

        Returns
        -------
        self
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"name must be a non-empty str, got {name!r}")
        if not callable(getattr(prior, "log_prob", None)):
            raise TypeError(f"prior must be a torch.distributions.Distribution (or have a "
                            f"log_prob method), got {type(prior).__name__}")
        if isinstance(param_or_closure, str):
            if param_or_closure not in self._hypers:
                raise ValueError(f"param_or_closure: {type(self).__name__} has no "
                                 f"hyperparameter {param_or_closure!r}; it has "
                                 f"{sorted(self._hypers)}")
        elif not callable(param_or_closure):
            raise TypeError(f"param_or_closure must be a hyperparameter name or a callable "
                            f"closure(kernel), got {type(param_or_closure).__name__}")
        if name in self._hypers or name in self._parameters or name in self._buffers \
                or name in self._modules:
            raise ValueError(f"name {name!r} is taken by a hyperparameter, parameter or "
                             f"sub-module of {type(self).__name__}")
        self.__dict__.setdefault("_priors", {})[name] = (prior, param_or_closure)
        return self

    def set_prior(self, hyperparameter: str, prior) -> "Kernel":
        """``register_prior(hyperparameter + "_prior", prior, hyperparameter)``; a prior of
        None removes the hyperparameter's prior. Returns the kernel."""
        if prior is None:
            if hyperparameter not in self._hypers:
                raise ValueError(f"hyperparameter: {type(self).__name__} has no "
                                 f"hyperparameter {hyperparameter!r}; it has "
                                 f"{sorted(self._hypers)}")
            self.__dict__.get("_priors", {}).pop(hyperparameter + "_prior", None)
            return self
        return self.register_prior(hyperparameter + "_prior", prior, hyperparameter)

    def named_priors(self):
        """(qualified name, kernel, prior, closure) for every prior of this kernel and of
        the kernels inside it (GPyTorch's ``named_priors`` without the setting closure):
        ``closure(kernel)`` is the value the prior is evaluated at."""
        for prefix, module in self.named_modules():
            if not isinstance(module, Kernel):
                continue
            for name, (prior, target) in module.__dict__.get("_priors", {}).items():
                closure = _attribute(target) if isinstance(target, str) else target
                yield (f"{prefix}.{name}" if prefix else name), module, prior, closure

    def log_prior(self) -> torch.Tensor:
        r"""log p(θ): the sum of the log densities of every prior of this kernel and of the
        kernels inside it at the current hyperparameters, Σ_priors Σ_entries
        log p(closure(kernel)), a 0-d float64 tensor differentiable in the
        hyperparameters (0 without priors)."""
        total = torch.zeros((), dtype=torch.float64)
        for _, module, prior, closure in self.named_priors():
            value = closure(module)
            value = torch.as_tensor(value)
            if value.is_floating_point():
                value = value.to(torch.float64)
            lp = _in_dtype(prior, value.dtype, value.device).log_prob(value)
            total = total.to(lp.device) + lp.to(torch.float64).sum()
        return total

    # -- scikit-learn interplay: nested `kernel__lengthscale` grid searches, clone ------
    def get_params(self, deep: bool = True) -> dict:
        """Hyperparameter values (floats, or tensors for ARD) and, if ``deep``, those of
        sub-kernels as ``child__name`` — what scikit-learn's ``set_params`` looks for."""
        out = {}
        for name, value in self.hyperparameters().items():
            v = value.detach()
            out[name] = v.item() if v.numel() == 1 else v.clone()
        if deep:
            for child_name, child in self.named_children():
                if isinstance(child, Kernel) or isinstance(child, nn.ModuleList):
                    out[child_name] = child
                    sub = child.get_params(deep=True) if isinstance(child, Kernel) else {
                        f"{i}__{k}": v for i, c in enumerate(child)
                        if isinstance(c, Kernel) for k, v in c.get_params(deep=True).items()}
                    out.update({f"{child_name}__{k}": v for k, v in sub.items()})
        return out

    def set_params(self, **params) -> "Kernel":
        """Set hyperparameters by name; ``child__name`` reaches a sub-kernel (``k1__name``
        the first term of a sum or product; the older ``kernels__0__name`` still works)
        and ``child=kernel`` replaces one."""
        for key, value in params.items():
            head, _, rest = key.partition("__")
            if rest:
                child = self._sub_kernel(head)
                if isinstance(child, nn.ModuleList):
                    idx, _, rest = rest.partition("__")
                    child = child[int(idx)] if idx.isdigit() and int(idx) < len(child) else None
                if not isinstance(child, Kernel):
                    raise ValueError(f"{type(self).__name__} has no sub-kernel {head!r}")
                child.set_params(**{rest: value})
            elif head in self._hypers:
                setattr(self, head, value)
            elif isinstance(self._sub_kernel(head), Kernel):
                if not isinstance(value, Kernel):
                    raise TypeError(f"{head} must be a Kernel, got {type(value).__name__}")
                self._replace_sub_kernel(head, value)
            elif head in self._structural_args():
                self._rebuild(head, value)
            else:
                raise ValueError(f"{type(self).__name__} has no hyperparameter {head!r}; "
                                 f"it has {sorted(self._hypers)}"
                                 + (f" and the arguments {sorted(self._structural_args())}"
                                    if self._structural_args() else ""))
        return self

    def _structural_args(self) -> dict:
        """Constructor arguments that are not hyperparameters and that the kernel keeps
        under their own name (``n_iter`` of Weisfeiler–Lehman, ``nu`` of Matérn, ``k`` of
        a spectrum kernel, …), with their current values."""
        init = type(self).__init__
        if init is object.__init__ or init is nn.Module.__init__:
            return {}
        out = {}
        for name, par in inspect.signature(init).parameters.items():
            if (name == "self" or name in self._hypers or name == "active_dims"
                    or par.kind in (par.VAR_POSITIONAL, par.VAR_KEYWORD)):
                continue
            if name in self.__dict__:  # a plain attribute: not a parameter, buffer or module
                out[name] = self.__dict__[name]
        return out

    def _rebuild(self, name: str, value) -> None:
        """Set constructor argument ``name`` (GridSearchCV over ``kernel__n_iter``): the
        kernel is built anew with it — the constructor checks it and derives what depends
        on it — keeping the current values of the other arguments and hyperparameters."""
        args = self._structural_args()
        args.update({k: v.detach().clone() for k, v in self.hyperparameters().items()})
        args[name] = value
        fresh = type(self)(**args)
        if self.active_dims is not None:
            fresh.set_active_dims(self.active_dims)
        priors = {k: v for k, v in self.__dict__.get("_priors", {}).items()
                  if not isinstance(v[1], str) or v[1] in fresh._hypers}
        self.__dict__.update(fresh.__dict__)
        object.__setattr__(self, "_priors", priors)

    def _sub_kernel(self, name: str):
        """The child module called ``name`` (None if there is none)."""
        return self._modules.get(name)

    def _replace_sub_kernel(self, name: str, value: "Kernel") -> None:
        setattr(self, name, value)

    def __sklearn_clone__(self):
        return copy.deepcopy(self)

    def _param(self, name: str, like: torch.Tensor) -> torch.Tensor:
        return getattr(self, name).to(dtype=like.dtype, device=like.device).reshape(-1)

    def extra_repr(self) -> str:
        parts = [f"{k}={_fmt(v)}" for k, v in self.hyperparameters().items()]
        if self.active_dims is not None:
            parts.append(f"active_dims={self.active_dims.tolist()}")
        return ", ".join(parts)

    # -- what a kernel writes ----------------------------------------------------------
    def _inputs(self, X: torch.Tensor) -> torch.Tensor:
        """Transform of the inputs applied before the formula (e.g. X / lengthscale)."""
        return X

    def _params(self, like: torch.Tensor) -> tuple:
        """The hyperparameters the formula reads, as 1-D tensors of the data's dtype."""
        return ()

    def _k(self, x, y, *params):
        """The formula: x, y broadcast variables (see ``kernels._ops``); result of width 1."""
        raise NotImplementedError

    def _radial_profile(self) -> str | None:
        """The name of φ when ``_k`` is φ(‖x − y‖²) of a profile the compiled backend
        evaluates natively (:attr:`torchkern.gram.Formula.profile`); None otherwise."""
        return None

    def _check_input(self, X: torch.Tensor, name: str) -> None:
        """Kernel-specific input checks (domain, ARD dimension)."""

    def accepts_dtype(self, dtype: torch.dtype) -> bool:
        """Whether this kernel evaluates inputs of ``dtype`` (a floating torch dtype). True
        unless a part of it has parameters that fix the inputs' dtype (a
        :class:`~torchkern.kernels.FeatureKernel`'s network): estimators that evaluate the
        kernel in float64 on float32 data for accuracy ask first."""
        parts = list(self.children())  # the kernels inside, through ModuleLists and the like
        while parts:
            m = parts.pop()
            if isinstance(m, Kernel):
                if not m.accepts_dtype(dtype):
                    return False
            else:
                parts.extend(m.children())
        return True

    def check_input(self, X, name: str = "X", **kw):
        """``X`` as this kernel takes it (see :mod:`torchkern.inputs`): for vector kernels
        a floating 2-D tensor of shape (n, d) (a 1-D input is n samples of one feature);
        keyword arguments go to :func:`torchkern._validation.as_tensor`. float16 and
        bfloat16 data become float32 (:func:`upcast_half`)."""
        if isinstance(X, KernelInput):
            raise TypeError(f"{type(self).__name__} is a kernel on vectors; {name} is a "
                            f"{type(X).__name__}")
        X = as_tensor(X, name, **kw)
        return upcast_half(X) if self._upcast_half else X

    # -- evaluation --------------------------------------------------------------------
    def formula(self, X: torch.Tensor, Y: torch.Tensor | None = None) -> Formula:
        """This kernel's :class:`~torchkern.gram.Formula` bound to (X, Y), on the columns
        ``active_dims`` when they are set."""
        if self.active_dims is not None:
            same = Y is None or Y is X
            X = self._active_columns(X, "X")
            Y = X if same else self._active_columns(Y, "Y")
        return self._formula(X, Y)

    def _active_columns(self, X: torch.Tensor, name: str) -> torch.Tensor:
        dims = self.active_dims
        if int(dims.max()) >= X.shape[1]:
            raise ValueError(f"{type(self).__name__} has active_dims={dims.tolist()} but "
                             f"{name} has {X.shape[1]} features")
        return X.index_select(1, dims.to(X.device))

    def _formula(self, X: torch.Tensor, Y: torch.Tensor | None = None) -> Formula:
        self._check_input(X, "X")
        x = self._inputs(X)
        if Y is None or Y is X:
            y = x
        else:
            self._check_input(Y, "Y")
            y = self._inputs(Y)
        ps = tuple(self._params(X))
        k = self._k
        return Formula((x,), (y,), ps, lambda xs, ys, ps_: k(xs[0], ys[0], *ps_),
                       self._radial_profile())

    @staticmethod
    def _check_pair(X: torch.Tensor, Y: torch.Tensor) -> None:
        """X and Y (checked inputs) of one width, dtype and device."""
        if Y.shape[1] != X.shape[1]:
            raise ValueError(f"X has {X.shape[1]} features but Y has {Y.shape[1]}")
        if Y.dtype != X.dtype:
            raise TypeError(f"X and Y must have the same dtype, got {X.dtype} and {Y.dtype}")
        if Y.device != X.device:
            raise ValueError(f"X and Y must be on the same device, got {X.device} and {Y.device}")

    def forward(self, X, Y=None, *, backend: str | None = None) -> KernelMatrix:
        X = self.check_input(X, "X")
        if Y is not None:
            Y = self.check_input(Y, "Y")
            self._check_pair(X, Y)
        n, m = X.shape[0], (X if Y is None else Y).shape[0]
        name = _check_backend(config.backend if backend is None else backend)
        if name == "auto" and n * m <= config.dense_max_entries:
            name = "dense"
        f = self.formula(X, Y)
        if name == "dense":
            return DenseKernelMatrix(f.evaluate(native_float32=True))
        return self._lazy_matrix(X, Y, f, name)

    def _lazy_matrix(self, X, Y, f: Formula, backend: str) -> KernelMatrix:
        """The lazy matrix of this kernel's formula ``f`` on X, Y (``"auto"`` picks its
        lazy backend from f)."""
        return FormulaKernelMatrix(f, backend)

    def diag(self, X) -> torch.Tensor:
        """k(x_i, x_i) for every row of X, shape (n,), without forming the matrix."""
        X = self.check_input(X, "X")
        return _finite_gram(self.formula(X).evaluate_pairs())

    def pairs(self, X, Y) -> torch.Tensor:
        """k(x_i, y_i) for paired samples (X and Y of equal length), shape (n,)."""
        X, Y = self.check_input(X, "X"), self.check_input(Y, "Y")
        if X.shape[0] != Y.shape[0]:
            raise ValueError(f"X and Y must have the same number of samples, got "
                             f"{X.shape[0]} and {Y.shape[0]}")
        if not self.vector_input:  # no formula (a combination of structured kernels)
            return self(X, Y).diag()
        self._check_pair(X, Y)
        return _finite_gram(self.formula(X, Y).evaluate_pairs())

    # -- algebra -----------------------------------------------------------------------
    # Raise (rather than return NotImplemented) on other operands: Python's fallback
    # message ("can't multiply sequence by non-int of type 'RBF'") names neither side.
    def __add__(self, other):
        if isinstance(other, Kernel):
            return SumKernel(self, other)
        if _is_zero(other):
            return self
        raise _operand_error("+", other)

    def __radd__(self, other):
        # 0 + k is k, so that the built-in sum([k1, k2, ...]) builds k1 + k2 + ...
        if _is_zero(other):
            return self
        raise _operand_error("+", other)

    def __mul__(self, other):
        if isinstance(other, Kernel):
            return ProductKernel(self, other)
        # numbers, NumPy scalars and arrays, tensors: ScaleKernel checks for one real number
        if isinstance(other, (numbers.Real, np.generic, np.ndarray, torch.Tensor)):
            return ScaleKernel(self, other)
        raise _operand_error("*", other)

    __rmul__ = __mul__


def _is_zero(x) -> bool:
    """Whether x is the number 0 (a 0-d real tensor or array included): the start of sum()."""
    if (isinstance(x, (torch.Tensor, np.ndarray)) and x.ndim == 0
            and not getattr(x, "is_meta", False)):
        x = x.item()
    return is_real(x) and x == 0


def _operand_error(op: str, other) -> TypeError:
    accepted = ("a Kernel (or 0, the start of sum())" if op == "+" else
                "a Kernel or a real number (int, float, NumPy scalar, 0-d tensor)")
    return TypeError(f"kernel {op} {type(other).__name__}: expected {accepted}, got "
                     f"{reprlib.repr(other)}")


class _CompositeKernel(Kernel):
    """Terms combined by ``_op``, stored flat in ``kernels`` and named ``k1``, ``k2``, …
    by :meth:`get_params` and :meth:`set_params`."""

    _op = None
    _symbol = ""

    def __init__(self, *kernels: Kernel):
        super().__init__()
        if not kernels:
            raise ValueError(f"{type(self).__name__} needs at least one kernel in kernels, got none")
        flat = []
        for k in kernels:
            if not isinstance(k, Kernel):
                raise TypeError(f"expected Kernel instances, got {type(k).__name__}")
            # (k1 + k2) + k3 is stored flat: one formula either way.
            flat.extend(k.kernels if type(k) is type(self) else [k])
        self.kernels = nn.ModuleList(flat)
        self.vector_input = all(k.vector_input for k in flat)
        if not self.vector_input and any(k.vector_input for k in flat):
            raise TypeError("cannot combine kernels on vectors with kernels on structured "
                            "inputs: they take different data")

    def check_input(self, X, name: str = "X", **kw):
        return self.kernels[0].check_input(X, name, **kw)

    def forward(self, X, Y=None, *, backend: str | None = None) -> KernelMatrix:
        if self.vector_input:
            return super().forward(X, Y, backend=backend)
        # Structured terms: each keeps its own lazy representation; the sum stays lazy.
        if self._op is not operator.add:
            raise TypeError(f"products of structured kernels are not supported lazily; "
                            f"compute the terms' Gram matrices with backend='dense' and "
                            f"multiply them")
        X = self.check_input(X, "X")
        Y = None if Y is None else self.check_input(Y, "Y")
        mats = [k(X, Y, backend=backend) for k in self.kernels]
        if backend == "dense":
            return DenseKernelMatrix(sum(M.to_dense() for M in mats))
        return SumKernelMatrix(mats)

    def diag(self, X) -> torch.Tensor:
        if self.vector_input:
            return super().diag(X)
        X = self.check_input(X, "X")
        return functools.reduce(self._op, [k.diag(X) for k in self.kernels])

    def pairs(self, X, Y) -> torch.Tensor:
        if self.vector_input:
            return super().pairs(X, Y)
        # Structured terms have no formula: combine their own pairs (and their errors).
        return functools.reduce(self._op, [k.pairs(X, Y) for k in self.kernels])

    def _lazy_matrix(self, X, Y, f, backend):
        if self._op is not operator.add:
            return FormulaKernelMatrix(f, backend)
        terms = lambda: [k._lazy_matrix(X, Y, k.formula(X, Y), backend)  # noqa: E731
                         for k in self.kernels]
        return lazy_sum(f, terms, backend)

    def _formula(self, X, Y=None):
        return combine_formulas([k.formula(X, Y) for k in self.kernels],
                                lambda terms: functools.reduce(self._op, terms))

    # -- readable names and repr -------------------------------------------------------
    def get_params(self, deep: bool = True) -> dict:
        """The terms as ``k1``, ``k2``, … (in the order they were added) and, if ``deep``,
        their hyperparameters as ``k1__lengthscale``, ``k2__outputscale``, … — e.g.
        ``GridSearchCV(est, {"kernel__k1__lengthscale": [0.5, 1.0]})`` for
        ``kernel=RBF() + Linear()``. :meth:`set_params` takes these names, a whole term
        (``k2=Matern52()``) and the older ``kernels__0__lengthscale``."""
        out = {}
        for i, k in enumerate(self.kernels, 1):
            out[f"k{i}"] = k
            if deep:
                out.update({f"k{i}__{name}": v for name, v in k.get_params(deep=True).items()})
        return out

    def _term_index(self, name: str):
        if name[:1] == "k" and name[1:].isdigit() and 1 <= int(name[1:]) <= len(self.kernels):
            return int(name[1:]) - 1
        return None

    def _sub_kernel(self, name: str):
        i = self._term_index(name)
        return self.kernels[i] if i is not None else super()._sub_kernel(name)

    def _replace_sub_kernel(self, name: str, value: Kernel) -> None:
        self.kernels[self._term_index(name)] = value

    def __repr__(self) -> str:
        return f" {self._symbol} ".join(_term_repr(k, self) for k in self.kernels)


def _term_repr(k: Kernel, parent: Kernel) -> str:
    """repr of a term, in parentheses where a sum sits inside a product or a scale."""
    text = repr(k)
    return f"({text})" if isinstance(k, SumKernel) and not isinstance(parent, SumKernel) else text


class SumKernel(_CompositeKernel):
    r"""k(x, y) = Σ_q k_q(x, y) — p.d. as a sum of p.d. kernels (Shawe-Taylor and
    Cristianini 2004, "Kernel Methods for Pattern Analysis", §3.4).

    Built by ``k1 + k2`` or ``sum([k1, k2, ...])``; nested sums are stored flat. The terms
    are ``k1``, ``k2``, … in ``get_params`` (``kernel__k1__lengthscale`` in a grid
    search) and the repr reads ``RBF(lengthscale=1) + Linear()``.

    One formula: with the KeOps backend the whole sum is a single reduction.
    """

    _op = staticmethod(operator.add)
    _symbol = "+"


class ProductKernel(_CompositeKernel):
    r"""k(x, y) = Π_q k_q(x, y) — p.d. by the Schur product theorem (Shawe-Taylor and
    Cristianini 2004, §3.4).

    Built by ``k1 * k2``; terms named ``k1``, ``k2``, … as in :class:`SumKernel`.
    """

    _op = staticmethod(operator.mul)
    _symbol = "*"


class ScaleKernel(Kernel):
    r"""k(x, y) = c · k₀(x, y) with a learnable positive ``outputscale`` c.

    Built by ``c * kernel``.
    """

    def __init__(self, base: Kernel, outputscale=1.0):
        super().__init__()
        if not isinstance(base, Kernel):
            raise TypeError(f"base must be a Kernel, got {type(base).__name__}")
        self.base = base
        self.vector_input = base.vector_input
        self.register_hyperparameter("outputscale", outputscale, scalar=True)

    def check_input(self, X, name: str = "X", **kw):
        return self.base.check_input(X, name, **kw)

    def forward(self, X, Y=None, *, backend: str | None = None) -> KernelMatrix:
        if self.vector_input:
            return super().forward(X, Y, backend=backend)
        K = self.base(X, Y, backend=backend)
        c = self.outputscale.to(dtype=K.dtype, device=K.device).reshape(())
        if isinstance(K, DenseKernelMatrix):
            return DenseKernelMatrix(c * K.tensor)
        return ScaledKernelMatrix(K, c)

    def diag(self, X) -> torch.Tensor:
        if self.vector_input:
            return super().diag(X)
        d = self.base.diag(X)
        return self.outputscale.to(dtype=d.dtype, device=d.device) * d

    def pairs(self, X, Y) -> torch.Tensor:
        if self.vector_input:
            return super().pairs(X, Y)
        d = self.base.pairs(X, Y)
        return self.outputscale.to(dtype=d.dtype, device=d.device) * d

    def _lazy_matrix(self, X, Y, f, backend):
        # c times the base's own lazy representation where it has one (a factored
        # Linear under "auto"); otherwise the formula c · k.
        M = self.base._lazy_matrix(X, Y, self.base.formula(X, Y), backend)
        if isinstance(M, FormulaKernelMatrix):
            return FormulaKernelMatrix(f, backend)
        return ScaledKernelMatrix(M, self.outputscale.to(dtype=M.dtype, device=M.device).reshape(()))

    def _formula(self, X, Y=None):
        f = self.base.formula(X, Y)
        c, fn = self._param("outputscale", f.xs[0]), f.fn
        # c · φ of a native radial profile stays native: the C++ loop computes φ, c after
        profile = f.profile if not f.ps else None
        return Formula(f.xs, f.ys, f.ps + (c,), lambda xs, ys, ps: ps[-1] * fn(xs, ys, ps[:-1]),
                       profile, f.needs_float64)

    def __repr__(self) -> str:
        return f"{_fmt(self.outputscale)} * {_term_repr(self.base, self)}"


class _Lengthscale:
    """Mixin: a ``lengthscale`` hyperparameter, scalar or one per dimension (ARD)."""

    def _init_lengthscale(self, lengthscale, ard_dims):
        ls = real_tensor(lengthscale, f"{type(self).__name__}: lengthscale")
        if ls.dim() > 1 or ls.numel() == 0:
            raise ValueError(f"lengthscale must be a float or a non-empty 1-D tensor, got "
                             f"shape {tuple(ls.shape)}")
        if ls.dim() == 1 and ls.numel() > 1:
            if ard_dims is None:
                ard_dims = ls.numel()
            elif ls.numel() != ard_dims:
                raise ValueError(f"lengthscale has {ls.numel()} entries but ard_dims={ard_dims}")
        if ard_dims is not None:
            if not is_int(ard_dims) or ard_dims < 1:
                raise ValueError(f"ard_dims must be a positive int, got {ard_dims!r}")
            ls = ls.reshape(-1).expand(ard_dims).clone() if ls.numel() == 1 else ls
        else:
            ls = ls.reshape(())
        self.ard_dims = ard_dims
        self.register_hyperparameter("lengthscale", ls)

    def _check_ard(self, X, name):
        if self.ard_dims is not None and X.shape[1] != self.ard_dims:
            raise ValueError(f"{name} has {X.shape[1]} features but {type(self).__name__} "
                             f"has ard_dims={self.ard_dims}")


class StationaryKernel(_Lengthscale, Kernel):
    """Base of kernels of ‖x − y‖ / ℓ: inputs are divided by the lengthscale(s) first.

    The kernel is translation invariant, so its formula is bound to X and Y centred at
    their joint mean, exactly, in the columns where that is possible (offset data;
    :func:`._ops.center`, once per product). Kernels whose ``_k`` takes
    ‖x − y‖² in the fast form (:func:`._ops.sqdist`, ``fast_sqdist = True``) are evaluated
    on torch blocks in the precision that keeps its round-off below the bound for the
    data's dtype (``_config.fast_form_max_roundoff``: 2^-16 for float32, 2^-36 for
    float64; :func:`._ops.fast_form_dtype`): float64 for float32 data spread over more
    than a few lengthscales, exact differences for float64 data spread over more than
    ~180, so that every backend has the accuracy of the difference form.
    """

    #: ``_k`` computes ‖x − y‖² with :func:`._ops.sqdist` (Laplacian and Matérn use exact
    #: differences and set it False).
    fast_sqdist = True

    def _formula(self, X, Y=None):
        X, Y = center(X, None if Y is X else Y)
        f = super()._formula(X, Y)
        why = self._float64_reason(f) if X.dtype == torch.float32 else None
        if why:
            return self._float64_formula(X, Y, why)
        if self.fast_sqdist:
            dtype = fast_form_dtype(f.xs[0], None if Y is None else f.ys[0])
            f = Formula(f.xs, f.ys, f.ps, in_precision(f.fn, dtype, f.dtype), f.profile)
        return f

    #: k(x, y) > 0 at any distance (RationalQuadratic, InverseMultiquadric): an
    #: overflowed ‖x − y‖² must not read as k = 0.
    heavy_tail = False
    #: Hyperparameters whose square the formula forms (InverseMultiquadric's c).
    squared_hyperparameters = ()

    def _float64_reason(self, f) -> str | None:
        """Why float32 cannot hold the formula's intermediate values, or None: scaled
        inputs x = X/ℓ that overflowed (|X| past 3.4e38·ℓ: x − x was ∞ − ∞ = NaN though
        k(x, x) = 1); for a heavy tail, inputs whose squared differences may (|x| ≥
        2^63/√d: its value, not 0, where ‖x − y‖² overflowed); hyperparameters in
        :attr:`squared_hyperparameters` whose square leaves float32's normal range.
        Kernels that are 0 there keep float32. One ``aminmax`` per input, and one
        synchronization in all."""
        ts = {"X": f.xs[0]} if f.ys[0] is f.xs[0] else {"X": f.xs[0], "Y": f.ys[0]}
        ts = {name: t for name, t in ts.items() if t.numel()}
        hypers = self.squared_hyperparameters
        parts = [v for t in ts.values() for v in torch.aminmax(t.detach())]
        parts += [getattr(self, h).detach().to(f.device).reshape(()) for h in hypers]
        if not parts:
            return None
        vals = torch.stack([v.to(torch.float64) for v in parts]).tolist()
        name = type(self).__name__
        bound = 2.0 ** 63 / math.sqrt(max(f.xs[0].shape[-1], 1)) if self.heavy_tail \
            else math.inf
        for i, key in enumerate(ts):
            top = max(-vals[2 * i], vals[2 * i + 1])
            if not top < bound:
                past = ("2^63/√d, where ‖x − y‖² overflows float32" if self.heavy_tail
                        else "float32's range")
                return (f"{name}'s float32 input {key} divided by the lengthscale reaches "
                        f"|x| = {top:.3g}, past {past}")
        fi = torch.finfo(torch.float32)
        for h, v in zip(hypers, vals[2 * len(ts):]):
            if not fi.tiny <= v * v <= fi.max:
                return f"{name}'s {h} = {v:.3g} has a square outside float32's range"
        return None

    def _float64_formula(self, X, Y, why: str):
        """The formula of float32 data that float32 cannot evaluate (``why``, from
        :meth:`_float64_reason`): its variables are X/ℓ (computed in float64) scaled by a
        power of two 2^-s (exact) into float32's range, and torch blocks evaluate k in
        float64 on 2^s times them, by exact differences, rounded back to float32 (k(x, x)
        = 1; 0, or the tail's value, between distant points). KeOps and Triton, which
        compute in float32, refuse it (:attr:`torchkern.gram.Formula.needs_float64`)."""
        f64, f32 = torch.float64, torch.float32
        g = super()._formula(X.to(f64), None if Y is None else Y.to(f64))
        top = max(float(v.detach().abs().max()) for v in (g.xs[0], g.ys[0]))
        shift = 2.0 ** max(0, math.frexp(top)[1] - 120)
        x = (g.xs[0] / shift).to(f32)
        y = x if Y is None else (g.ys[0] / shift).to(f32)
        exact = in_precision(g.fn, None, f64)  # None: exact differences

        def fn(xs, ys, ps):
            if not isinstance(xs[0], torch.Tensor):  # a formula rebuilt without the flag
                raise ValueError(f"KeOps and Triton compute in float32, but {why}; use "
                                 f"backend='blocked' or float64 data")
            up = lambda ts: [t.to(f64) * shift for t in ts]  # noqa: E731
            return exact(up(xs), up(ys), [p.to(f64) for p in ps]).to(xs[0].dtype)

        # the hyperparameters stay float64: α = 1e39 was ∞ in float32 (NaN entries)
        return Formula((x,), (y,), g.ps, fn, needs_float64=why)

    def __init__(self, lengthscale=1.0, ard_dims=None):
        Kernel.__init__(self)
        self._init_lengthscale(lengthscale, ard_dims)

    def _check_input(self, X, name):
        self._check_ard(X, name)

    def _inputs(self, X):
        return X / self.lengthscale.to(dtype=X.dtype, device=X.device)

