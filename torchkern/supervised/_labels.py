"""Class labels in and out of the classifiers (KernelLogisticRegression, SVC)."""
from __future__ import annotations

import warnings

import numpy as np
import torch
from sklearn.exceptions import DataConversionWarning
from sklearn.utils.multiclass import type_of_target

from .._validation import check_not_meta, check_positive


def warn_column_vector() -> None:
    """scikit-learn's warning for a (n, 1) target where a 1-D one is expected."""
    warnings.warn("A column-vector y was passed when a 1d array was expected. Please change "
                  "the shape of y to (n_samples,), for example using ravel().",
                  DataConversionWarning, stacklevel=4)


def encode_labels(y, n: int, name: str = "y"):
    """Sorted classes (a NumPy array, as scikit-learn's ``classes_``) and the index of each
    sample's class (int64 NumPy array). Checks length, NaN, that the labels are discrete
    (scikit-learn's ``type_of_target`` is "binary" or "multiclass": continuous targets are
    refused with its "Unknown label type" error) and that ≥ 2 classes occur."""
    if y is None:
        raise ValueError(f"this classifier requires {name} to be passed, but the target "
                         f"{name} is None")
    if isinstance(y, torch.Tensor):
        check_not_meta(y, name)
        y_np = y.detach().cpu().numpy()
    else:
        y_np = np.asarray(y)
    if y_np.ndim == 2 and y_np.shape[1] == 1:
        warn_column_vector()
        y_np = y_np[:, 0]
    if y_np.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of labels, got shape {y_np.shape}")
    if y_np.shape[0] != n:
        raise ValueError(f"{name} has {y_np.shape[0]} labels but X has {n} samples")
    if y_np.dtype.kind == "c":
        raise ValueError(f"{name} must hold real or string class labels: Complex data not "
                         f"supported, got dtype {y_np.dtype}")
    if y_np.dtype.kind == "f" and not bool(np.isfinite(y_np).all()):
        raise ValueError(f"{name} contains NaN or infinity")
    kind = type_of_target(y_np, input_name=name)
    if kind not in ("binary", "multiclass"):
        raise ValueError(f"Unknown label type: {kind}. {name} must hold discrete class "
                         f"labels (ints, strings or integral floats); a classifier cannot "
                         f"fit a regression target with continuous values")
    classes, codes = np.unique(y_np, return_inverse=True)
    if classes.size < 2:
        raise ValueError(f"{name} must contain at least two classes, got only one class: "
                         f"{classes.tolist()}")
    return classes, codes.astype(np.int64).reshape(-1)


def decode_labels(classes: np.ndarray, codes: torch.Tensor):
    """``classes[codes]``: a torch tensor on ``codes``' device for numeric labels, else a
    NumPy array (strings and objects cannot live in a tensor)."""
    if classes.dtype.kind in "biuf":
        return torch.as_tensor(classes, device=codes.device)[codes]
    return classes[codes.cpu().numpy()]


def class_weights(class_weight, classes: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Per-class multipliers of C: ``None`` → 1, ``"balanced"`` → n / (k · n_c) as
    scikit-learn, or a dict {label: weight} (missing labels weigh 1)."""
    k = classes.size
    if class_weight is None:
        return np.ones(k)
    if isinstance(class_weight, str):
        if class_weight != "balanced":
            raise ValueError(f"class_weight must be None, 'balanced' or a dict, got {class_weight!r}")
        counts = np.bincount(codes, minlength=k)
        return codes.size / (k * counts)
    if not isinstance(class_weight, dict):
        raise TypeError(f"class_weight must be None, 'balanced' or a dict, "
                        f"got {type(class_weight).__name__}")
    w = np.ones(k)
    index = {c.item() if hasattr(c, "item") else c: i for i, c in enumerate(classes)}
    for label, value in class_weight.items():
        key = label.item() if hasattr(label, "item") else label
        if key not in index:
            raise ValueError(f"class_weight has label {label!r}, which is not in y")
        check_positive(value, f"class_weight[{label!r}]")  # a real number, finite and > 0
        w[index[key]] = float(value)
    return w
