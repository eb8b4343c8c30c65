"""
Antimicrobial peptides with string kernels
==========================================

Is a short protein an antimicrobial peptide (AMP)? String kernels compare sequences
directly, with no hand-made descriptors. The k-spectrum kernel counts the k-mers two
sequences share (Leslie, Eskin and Noble 2002, "The spectrum kernel", PSB); the
(k, m)-mismatch kernel also counts k-mers that differ in at most m letters (Leslie,
Eskin, Cohen, Weston and Noble 2004, "Mismatch string kernels for discriminative protein
classification", Bioinformatics 20). Both feed :class:`torchkern.SVC` as any kernel does.

Data: modlamp's ``AMPvsUniProt`` set (``pip install --no-deps modlamp``, read from its
package files, no download): 2,600 AMPs from the APD3 database against 2,600 random
UniProt peptides of the same lengths (Müller, Gabernet, Hiss and Schneider 2017, "modlAMP:
Python for antimicrobial peptides", Bioinformatics 33). We take a random 800 of them.
"""

# %%
import importlib.resources

import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import roc_auc_score, roc_curve
from sklearn.model_selection import train_test_split

import torchkern as tk
from torchkern.datasets import read_sequence_csv
from torchkern.sequences import Mismatch, Spectrum

path = importlib.resources.files("modlamp").joinpath("data", "AMPvsUniProt.csv")
seqs, y, target_names = read_sequence_csv(path)
y = np.asarray(y)
rng = np.random.default_rng(0)
keep = rng.choice(len(seqs), 800, replace=False)
seqs, y = [seqs[i] for i in keep], y[keep]
train_s, test_s, y_train, y_test = train_test_split(seqs, y, test_size=0.3, random_state=0,
                                                    stratify=y)
print(f"{len(seqs)} peptides ({int(y.sum())} {target_names[1]}), lengths "
      f"{min(map(len, seqs))}-{max(map(len, seqs))}; e.g. {seqs[0]}")

# %%
# Three kernels, each normalized (k(x, y) / √(k(x, x) k(y, y)), so long peptides do not
# dominate), one SVM each; the decision function ranks the test peptides.
kernels = {
    "spectrum k=2": Spectrum(k=2, alphabet="protein", normalize=True),
    "spectrum k=3": Spectrum(k=3, alphabet="protein", normalize=True),
    "mismatch k=3, m=1": Mismatch(k=3, m=1, alphabet="protein", normalize=True),
}
scores = {}
for name, kernel in kernels.items():
    svc = tk.SVC(kernel=kernel, C=1.0).fit(train_s, y_train)
    scores[name] = np.asarray(svc.decision_function(test_s))
    acc = np.mean(np.asarray(svc.predict(test_s)) == y_test)
    print(f"{name:18s} test accuracy {acc:.3f}, ROC AUC "
          f"{roc_auc_score(y_test, scores[name]):.3f}")

# %%
# ROC curves, and the 3-mers that weigh most for and against "antimicrobial": the
# spectrum SVM is linear in the 3-mer counts, so its weight vector w = Σ_i α_i y_i φ(x_i)
# over the 8,000 possible 3-mers can be read off (here from an SVM on the unnormalized
# counts, so that each weight is that of one 3-mer occurrence).
fig, axes = plt.subplots(1, 2, figsize=(11, 4.3))
for name, s in scores.items():
    fpr, tpr, _ = roc_curve(y_test, s)
    axes[0].plot(fpr, tpr, label=f"{name} (AUC {roc_auc_score(y_test, s):.3f})")
axes[0].plot([0, 1], [0, 1], color="0.7", ls="--", lw=1)
axes[0].set_xlabel("false positive rate")
axes[0].set_ylabel("true positive rate")
axes[0].set_title(f"AMP vs UniProt, {len(test_s)} test peptides")
axes[0].legend(loc="lower right", fontsize=8)

# Weights of the 3-mers in the unnormalized spectrum SVM, from its support vectors.
from collections import Counter  # noqa: E402

svc3 = tk.SVC(kernel=Spectrum(k=3, alphabet="protein"), C=1.0).fit(train_s, y_train)
coef = np.asarray(svc3.dual_coef_).ravel()
w = Counter()
for c, i in zip(coef, np.asarray(svc3.support_)):
    s = train_s[i]
    for j in range(len(s) - 2):
        w[s[j:j + 3]] += c
top = sorted(w.items(), key=lambda t: t[1])
shown = top[:8] + top[-8:]
axes[1].barh([t[0] for t in shown], [t[1] for t in shown],
             color=["C0"] * 8 + ["C3"] * 8)
axes[1].set_xlabel("weight in the spectrum-3 SVM (positive: AMP)")
axes[1].set_title("the 3-mers that weigh most")
fig.tight_layout()
plt.show()
