from .classification import KernelLogisticRegression
from .svm import SVC, SVR
from .ridge import KernelRidge

__all__ = ["KernelRidge", "KernelLogisticRegression", "SVC", "SVR"]
