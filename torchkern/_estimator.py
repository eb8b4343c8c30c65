"""What every torchkern estimator shares: kernel resolution, the Gram matrix of the
training data, and fitted-state checks. Estimators subclass scikit-learn's
``BaseEstimator`` (and the matching mixin) so ``clone``, ``GridSearchCV``, ``Pipeline``
and ``cross_val_score`` work unchanged."""
from __future__ import annotations

import copy
import functools
import inspect
import textwrap

import numpy as np
import torch
from sklearn.base import BaseEstimator, is_classifier
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import _check_feature_names

from ._config import _check_backend, config
from ._sharding import SHARDED_FITS
from .gram import DenseKernelMatrix, KernelMatrix
from .inputs import check_input
from .kernels import RBF, Kernel
from .kernels.base import PicklesByValue

__all__ = ["Estimator", "resolve_kernel", "kernel_matrix", "check_fitted", "is_precomputed",
           "wants_numpy", "NotFittedError"]


def is_precomputed(kernel) -> bool:
    """Whether an estimator's (resolved) kernel is the string ``"precomputed"``."""
    return isinstance(kernel, str) and kernel == "precomputed"


def resolve_kernel(kernel, name: str = "kernel"):
    """A private copy of the estimator's kernel: ``None`` gives ``RBF()``,
    ``"precomputed"`` stays as is; anything else must be a torchkern Kernel."""
    if kernel is None:
        return RBF()
    if isinstance(kernel, str):
        if kernel != "precomputed":
            raise ValueError(f"{name} must be a torchkern Kernel, None or 'precomputed', got {kernel!r}")
        return kernel
    if not isinstance(kernel, Kernel):
        raise TypeError(f"{name} must be a torchkern Kernel, None or 'precomputed', "
                        f"got {type(kernel).__name__}")
    return copy.deepcopy(kernel)


def kernel_matrix(kernel, X, Y=None, *, backend=None, name: str = "X",
                  reuse: bool = False) -> KernelMatrix:
    """k(X, Y) as a KernelMatrix; with ``kernel="precomputed"``, X *is* the Gram matrix
    (a tensor, an array or a KernelMatrix) and Y is ignored.

    ``reuse=True`` says the caller (a fit, not differentiated) will multiply the matrix
    many times: under the ``"auto"`` backend it is then stored densely, without autograd
    state, if it fits ``config.materialize_max_bytes``.
    """
    if is_precomputed(kernel):
        X = check_input(kernel, X, name)
        return X if isinstance(X, KernelMatrix) else DenseKernelMatrix(X)
    if reuse and (config.backend if backend is None else backend) == "auto":
        m = X.shape[0] if Y is None else Y.shape[0]
        item = torch.empty((), dtype=X.dtype).element_size()
        if X.shape[0] * m * item <= config.materialize_max_bytes:
            with torch.no_grad():
                return kernel(X, Y, backend="dense")
    return kernel(X, Y, backend=backend)


def input_matrix(kernel, X, name: str = "X", **kw):
    """Validated data (:func:`torchkern.inputs.check_input`): a Gram matrix when the kernel
    is precomputed, otherwise what the kernel takes."""
    return check_input(kernel, X, name, **kw)


def check_fitted(estimator, attribute: str) -> None:
    """Raise scikit-learn's NotFittedError unless ``estimator.<attribute>`` exists."""
    if not hasattr(estimator, attribute):
        raise NotFittedError(f"This {type(estimator).__name__} instance is not fitted yet; "
                             f"call 'fit' before using it.")



# --------------------------------------------------------------------------------------
# Output types: NumPy in -> NumPy out, torch in -> torch out (as cuML does)
# --------------------------------------------------------------------------------------

_OUTPUT_METHODS = ("predict", "predict_proba", "predict_log_proba", "decision_function",
                   "transform", "inverse_transform", "fit_transform", "fit_predict",
                   "score_samples", "sample", "sample_y", "score", "log_marginal_likelihood",
                   "log_marginal_likelihood_std_error", "kernel_matrix")
# methods whose X is checked against the fitted feature names (scikit-learn's reset=False)
_NAMED_INPUT_METHODS = ("predict", "predict_proba", "predict_log_proba", "decision_function",
                        "transform", "score_samples", "score")


def wants_numpy(X) -> bool:
    """Whether results for the input ``X`` are returned as NumPy arrays: yes for NumPy
    arrays, lists of numbers or strings and array-likes (pandas); no for torch tensors,
    KernelMatrix objects, kernel inputs and torch-geometric data."""
    from .inputs import KernelInput
    if isinstance(X, (torch.Tensor, KernelMatrix, KernelInput)):
        return False
    # by class ancestry, not the defining module: a user's subclass of a torch-geometric
    # Dataset (InMemoryDataset) is torch data like TUDataset
    if any((c.__module__ or "").split(".")[0] in ("torch", "torch_geometric", "torchkern")
           for c in type(X).__mro__[:-1]):
        return False
    if isinstance(X, (list, tuple)) and len(X) and (
            (type(X[0]).__module__ or "").split(".")[0] in ("torch", "torch_geometric")):
        return False
    return True


def _to_numpy(out):
    if isinstance(out, torch.Tensor):
        return out.detach().cpu().numpy()
    if isinstance(out, tuple):
        return tuple(_to_numpy(o) for o in out)
    return out


class Estimator(PicklesByValue, BaseEstimator):
    """Base of torchkern estimators: scikit-learn's ``BaseEstimator`` whose results follow
    the type of the data.

    ``fit`` on NumPy (or pandas, or lists) stores the public fitted tensors (``dual_coef_``,
    ``labels_``, ...) as NumPy arrays — zero-copy views of CPU tensors; ``predict``,
    ``transform``, ``decision_function`` and the like return NumPy arrays for NumPy input
    and torch tensors (on the input's device) for torch input. A classifier's ``predict``
    returns labels of the type of the ``y`` it was fitted on instead: a NumPy array (of
    ``y``'s dtype) for NumPy or list labels, a tensor for tensor labels, whatever ``X`` is
    (a list of graphs, a tensor). Inside its methods an estimator always sees tensors.

    Estimators pickle by value (:class:`~torchkern.kernels.base.PicklesByValue`): equal
    estimators, fitted or not, give equal ``joblib.hash`` values (``joblib.Memory`` keys).
    """

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "fit" in cls.__dict__:
            learnable = _has_kernel_parameter(cls)
            cls.fit = _wrap_fit(cls.__dict__["fit"], learnable)
            if learnable:
                cls.fit.__doc__ = _document_learn_kernel(cls.fit.__doc__)
        for name in _OUTPUT_METHODS:
            method = cls.__dict__.get(name)
            if method is None or getattr(method, "_follows_input", False):
                continue
            if callable(getattr(method, "check", None)) and callable(getattr(method, "fn", None)):
                method.fn = _wrap_output(method.fn, name)  # sklearn's available_if descriptor
            else:
                setattr(cls, name, _wrap_output(method, name))

    def __setstate__(self, state):
        # An estimator pickled before one of its constructor parameters existed (SVC's
        # break_ties) had no such attribute: repr, get_params and clone raised
        # AttributeError. It gets the parameter's default, the behaviour of the version
        # that pickled it.
        super().__setstate__(state)
        for name, p in inspect.signature(type(self).__init__).parameters.items():
            if p.default is not p.empty and name not in self.__dict__:
                self.__dict__[name] = p.default

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = is_precomputed(getattr(self, "kernel", None))
        return tags

    def _fitted_to_numpy(self) -> None:
        """Store the public fitted tensors as NumPy views (after a fit on NumPy data)."""
        for name in self.__dict__.get("_tensor_attrs", ()):
            v = self.__dict__.get(name)
            if isinstance(v, torch.Tensor):
                self.__dict__[name] = v.detach().cpu().numpy()

    def _fitted_to_torch(self) -> dict:
        """Tensors again for the length of a method call; returns the NumPy arrays to put
        back (the same objects, so the estimator's ``__dict__`` is unchanged afterwards)."""
        stash = {}
        for name in self.__dict__.get("_tensor_attrs", ()):
            v = self.__dict__.get(name)
            if isinstance(v, np.ndarray):
                t = torch.from_numpy(v)
                stash[name] = (v, t)
                self.__dict__[name] = t
        return stash

    def _fitted_restore(self, stash: dict) -> None:
        for name, (arr, t) in stash.items():
            if self.__dict__.get(name) is t:
                self.__dict__[name] = arr
        if self.__dict__.get("_numpy_out", False):
            self._fitted_to_numpy()


_LEARN_KERNEL_DOC = """learn_kernel : None, str or dict, optional
    Learn the kernel's hyperparameters by gradient before fitting: an objective of
    :func:`torchkern.learning.learn_kernel` (``"auto"``, ``"loo"``, ``"gcv"``,
    ``"holdout"``, ``"alignment"``, ``"lml"``, ``"map"``) or a dict of its options (``objective``,
    ``optimizer``, ``max_iter``, ``tol``, ``n_restarts``, ``bounds``, ``lr``,
    ``validation_fraction``, ``random_state``, ``verbose``). The ``kernel`` parameter is
    left as it was; the learned kernel is the fitted ``kernel_``, the optimizer's result
    (losses, iterations, whether and why it stopped) is ``learn_kernel_result_`` and the
    losses are also in ``kernel_learning_history_``."""


def _has_kernel_parameter(cls) -> bool:
    try:
        return "kernel" in inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return False


def _document_learn_kernel(doc):
    """``doc`` with the ``learn_kernel`` argument added: an entry at the end of its
    numpydoc Parameters section, or a closing paragraph when it has no sections."""
    if not doc:
        return doc
    lines = doc.splitlines()
    header = [i for i in range(len(lines) - 1)
              if lines[i].strip() and set(lines[i + 1].strip()) == {"-"}
              and len(lines[i + 1].strip()) == len(lines[i].strip())]
    params = [i for i in header if lines[i].strip() == "Parameters"]
    if params:
        start = params[0]
        indent = lines[start][:len(lines[start]) - len(lines[start].lstrip())]
        after = [i for i in header if i > start]
        end = after[0] if after else len(lines)
        while end > start + 2 and not lines[end - 1].strip():
            end -= 1
        entry = [indent + line if line else "" for line in _LEARN_KERNEL_DOC.splitlines()]
        return "\n".join(lines[:end] + entry + lines[end:])
    if header:  # sections but no Parameters: leave the docstring as it is
        return doc
    indent = min((len(l) - len(l.lstrip()) for l in lines[1:] if l.strip()), default=0)
    note = ("Accepts ``learn_kernel=`` (None, an objective name or a dict of options of "
            ":func:`torchkern.learning.learn_kernel`): the kernel's hyperparameters are "
            "learned by gradient before the fit, the learned kernel is ``kernel_``.")
    note = textwrap.fill(note, 88, initial_indent=" " * indent,
                         subsequent_indent=" " * indent)
    return doc.rstrip() + "\n\n" + note + "\n"


# Row-sharded data (torchkern.distributed) whose fit is under way on this rank: a fit
# called inside it (learn_kernel's, a nested estimator's) takes its arguments as they are.
_SHARDED_FITS = SHARDED_FITS


def _align_rows(fit, X, args, kwargs):
    """``y`` and ``sample_weight`` of ``fit(X, *args, **kwargs)`` as row-sharded ``X``
    gives them to every rank's fit: all n rows in X's order (``X.align_rows``)."""
    bound = inspect.signature(fit).bind_partial(None, X, *args, **kwargs)
    for name in ("y", "sample_weight"):
        if name in bound.arguments:
            bound.arguments[name] = X.align_rows(bound.arguments[name], name)
    return bound.args[2:], bound.kwargs


def _wrap_fit(fit, learnable=False):
    @functools.wraps(fit)
    def wrapper(self, X, *args, learn_kernel=None, **kwargs):
        # Row-sharded data: each rank passes its own targets (made whole here), and an
        # error on one rank is reported to the others, which would otherwise wait for it
        # in their next collective until the process-group timeout.
        report = getattr(X, "report_failure", None)
        if report is None or id(X) in _SHARDED_FITS.get():
            return fitting(self, X, *args, learn_kernel=learn_kernel, **kwargs)
        token = _SHARDED_FITS.set(_SHARDED_FITS.get() | {id(X)})
        try:
            args, kwargs = _align_rows(fit, X, args, kwargs)
            return fitting(self, X, *args, learn_kernel=learn_kernel, **kwargs)
        except BaseException as exc:
            report(exc)
            raise
        finally:
            _SHARDED_FITS.reset(token)

    def fitting(self, X, *args, learn_kernel=None, **kwargs):
        if learn_kernel is not None:
            if not learnable:
                raise TypeError(f"{type(self).__name__}.fit got learn_kernel, but "
                                f"{type(self).__name__} has no kernel parameter to learn")
            # learning/ is a layer below this one (tests/test_layering.py), imported here
            # rather than at the top: torchkern.learning imports torchkern.stats, whose
            # permutation tests build on approx.Nystroem, an estimator of this module
            from .learning.estimator import fit_with_learned_kernel
            y = args[0] if args else kwargs.get("y")
            return fit_with_learned_kernel(wrapper, self, X, y, learn_kernel, args, kwargs)
        if self.__dict__.get("backend") is not None:
            # checked before the fit, which may override it (a Cholesky solve: "dense")
            _check_backend(self.backend)
        depth = self.__dict__.get("_call_depth", 0)
        self.__dict__["_call_depth"] = depth + 1
        try:
            out = fit(self, X, *args, **kwargs)
        finally:
            self.__dict__["_call_depth"] = depth
        names = [k for k, v in self.__dict__.items()
                 if k.endswith("_") and not k.startswith("_") and isinstance(v, torch.Tensor)
                 and not isinstance(v, torch.nn.Parameter)]
        self.__dict__["_tensor_attrs"] = tuple(names)
        self.__dict__["_numpy_out"] = wants_numpy(X)
        y = args[0] if args else kwargs.get("y")
        self.__dict__["_numpy_labels"] = y is not None and wants_numpy(y)
        if depth == 0:
            _check_feature_names(self, X, reset=True)  # feature_names_in_ as scikit-learn
            if self._numpy_out:
                self._fitted_to_numpy()
        return out
    return wrapper


def _wrap_output(method, name=None):
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        depth = self.__dict__.get("_call_depth", 0)
        if depth == 0 and name in _NAMED_INPUT_METHODS and (args or "X" in kwargs):
            # the names against feature_names_in_, as scikit-learn: a warning for names
            # missing on one side, a ValueError for other names or another order
            _check_feature_names(self, args[0] if args else kwargs["X"], reset=False)
        self.__dict__["_call_depth"] = depth + 1
        stash = self._fitted_to_torch() if depth == 0 else None
        try:
            out = method(self, *args, **kwargs)
        finally:
            self.__dict__["_call_depth"] = depth
            if stash is not None:
                self._fitted_restore(stash)
        if depth > 0:
            return out
        if name in ("fit_transform", "fit_predict") and args:
            _check_feature_names(self, args[0], reset=True)
        if name == "predict" and is_classifier(self):
            # class labels come back as the labels went in: NumPy for a NumPy (or list) y,
            # torch for a torch y, whatever the type of X (a list of graphs, a tensor)
            return _to_numpy(out) if self.__dict__.get("_numpy_labels", False) else out
        X = args[0] if args else kwargs.get("X", None)
        numpy = wants_numpy(X) if X is not None and not isinstance(X, int) else \
            self.__dict__.get("_numpy_out", False)
        return _to_numpy(out) if numpy else out
    wrapper._follows_input = True
    return wrapper
