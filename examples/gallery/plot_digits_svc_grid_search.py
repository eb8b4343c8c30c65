"""
Digits: an SVM tuned by grid search
===================================

A C-support vector classifier with a Gaussian kernel on scikit-learn's handwritten
digits (1,797 images of 8 × 8 pixels, 10 classes). :class:`torchkern.SVC` follows
scikit-learn's conventions, so :class:`~sklearn.model_selection.GridSearchCV` tunes it
directly; the kernel's lengthscale is reached as ``kernel__lengthscale``.
"""

# %%
# Data: pixel intensities scaled to [0, 1], a stratified train/test split.
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.metrics import confusion_matrix
from sklearn.model_selection import GridSearchCV, train_test_split

import torchkern as tk

X, y = load_digits(return_X_y=True)
X = X / 16.0
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y,
                                                    random_state=0)

# %%
# Grid search over the penalty C and the RBF lengthscale ℓ,
# k(x, y) = exp(−‖x − y‖² / (2ℓ²)), with 3-fold cross-validation.
param_grid = {"C": [1.0, 10.0, 100.0], "kernel__lengthscale": [0.7, 1.4, 2.8]}
search = GridSearchCV(tk.SVC(kernel=tk.RBF()), param_grid, cv=3)
t0 = time.perf_counter()
search.fit(X_train, y_train)
print(f"grid search: {time.perf_counter() - t0:.1f} s for "
      f"{len(search.cv_results_['params'])} settings x 3 folds")
print("best parameters:", search.best_params_)
print(f"cross-validated accuracy {search.best_score_:.3f}, "
      f"test accuracy {search.score(X_test, y_test):.3f}")

# %%
# Cross-validated accuracy over the grid, and the test-set confusion matrix of the best
# model.
scores = search.cv_results_["mean_test_score"].reshape(len(param_grid["C"]),
                                                       len(param_grid["kernel__lengthscale"]))
y_pred = np.asarray(search.predict(X_test))

fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(10, 4.2))
im = ax0.imshow(scores, cmap="viridis", origin="lower")
ax0.set_xticks(range(len(param_grid["kernel__lengthscale"])),
               [str(v) for v in param_grid["kernel__lengthscale"]])
ax0.set_yticks(range(len(param_grid["C"])), [str(v) for v in param_grid["C"]])
ax0.set_xlabel("lengthscale ℓ")
ax0.set_ylabel("C")
ax0.set_title("mean CV accuracy")
for (i, j), s in np.ndenumerate(scores):
    ax0.text(j, i, f"{s:.3f}", ha="center", va="center",
             color="black" if s > scores.mean() else "white")
fig.colorbar(im, ax=ax0)

cm = confusion_matrix(y_test, y_pred)
ax1.imshow(cm, cmap="Blues")
ax1.set_xticks(range(10))
ax1.set_yticks(range(10))
ax1.set_xlabel("predicted digit")
ax1.set_ylabel("true digit")
ax1.set_title(f"test set: {np.mean(y_pred == y_test):.1%} correct")
for (i, j), c in np.ndenumerate(cm):
    if c:
        ax1.text(j, i, str(c), ha="center", va="center", fontsize=8,
                 color="white" if c > cm.max() / 2 else "black")
fig.tight_layout()
plt.show()
