from .classification import KernelLogisticRegression
from .svm import SVC, SVR

__all__ = ["KernelLogisticRegression", "SVC", "SVR"]
