#!/usr/bin/env bash
# Build Falkon (FalkonML/falkon, 0.9.0) as a LOCAL benchmark peer of bench/supervised.py's
# Falkon section: CPU only, in its own venv, never a dependency of torchkern or of CI.
#
#   bash bench/falkon_peer.sh [GIT_DIR]     # GIT_DIR: a git repository of FalkonML/falkon
#   /tmp/falkon-venv/bin/python bench/supervised.py --sections falkon --busy-rows
#
# GIT_DIR defaults to /work/.mirror/FalkonML+falkon/repo, the snapshot that the search
# library's `fetch github:FalkonML/falkon` brings (no network is needed after that).
#
# Why earlier builds "did not finish": nothing failed. The C++ extension (falkon.c_ext._C,
# 21 files, every one including torch's headers, -O3 -fopenmp) costs about 1-3 CPU-minutes
# a file, and on the shared 2-core machine (load 5-10 from other jobs) single files took
# 17-27 minutes of wall time: the build was still compiling when its session ended
# (11 of 21 objects in 78 minutes, MAX_JOBS=1; the remaining 10 took 26 minutes with
# MAX_JOBS=2 at load 6-12 on 2026-11-27). So
# this script
#   * compiles with ninja (torch's BuildExtension), whose object files survive an
#     interrupted build: rerunning the script resumes where the last run stopped, as long
#     as the source tree $SRC/build is kept (do not delete it between tries);
#   * runs `setup.py build_ext --inplace` and puts the source tree on the venv's path with
#     a .pth file, instead of `pip install .`, which could rebuild in a fresh directory;
#   * builds CPU only (FORCE_ONLY_CPU=1: no CUDA files, no nvcc), MAX_JOBS compile jobs
#     (default 2; the machine's 2 cores).
# The venv sees the global torch (2.13 CPU), pykeops and ninja (--system-site-packages);
# Falkon's other requirements (scipy, numpy, scikit-learn, psutil) are there too, so
# nothing is installed from a package index. KeOps is optional for Falkon on the CPU
# (FalkonOptions(keops_active="no") turns it off).
set -euo pipefail

GIT_DIR=${1:-/work/.mirror/FalkonML+falkon/repo}
SRC=${FALKON_SRC:-/tmp/falkon-src}
VENV=${FALKON_VENV:-/tmp/falkon-venv}
export MAX_JOBS=${MAX_JOBS:-2}
export FORCE_ONLY_CPU=1

if [ ! -d "$SRC/.git" ]; then
    git clone -q "$GIT_DIR" "$SRC"
fi
if [ ! -x "$VENV/bin/python" ]; then
    python -m venv --system-site-packages "$VENV"
fi
"$VENV/bin/python" -c "import torch, ninja, scipy, sklearn, psutil" || {
    echo "falkon_peer.sh: the venv needs torch, ninja, scipy, scikit-learn and psutil" >&2
    exit 1
}

cd "$SRC"
echo "building falkon.c_ext._C in $SRC (MAX_JOBS=$MAX_JOBS, CPU only); load $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s)
"$VENV/bin/python" setup.py build_ext --inplace
echo "built in $(( $(date +%s) - start )) s; load $(cut -d' ' -f1-3 /proc/loadavg)"

SITE=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "$SRC" > "$SITE/falkon-src.pth"
cd /
"$VENV/bin/python" - <<'EOF'
# Smoke test: the extension loads and Falkon solves its Nystrom problem
# (K_mn K_nm + n*lam*K_mm) beta = K_mn y (same centres) as a dense float64 solve does.
import torch, falkon
from falkon.c_ext._backend import _assert_has_ext
_assert_has_ext()
g = torch.Generator().manual_seed(0)
X = torch.randn(500, 3, dtype=torch.float64, generator=g)
y = X[:, :1].sin()
idx = torch.randperm(500, generator=g)[:50]
lam, sigma = 1e-3, 1.0
opt = falkon.FalkonOptions(use_cpu=True, keops_active="no")
centers = falkon.center_selection.FixedSelector(X[idx], idx_centers=idx)
model = falkon.Falkon(kernel=falkon.kernels.GaussianKernel(sigma, opt=opt), penalty=lam, M=50,
                      maxiter=100, center_selection=centers, options=opt).fit(X, y)
K = lambda A, B: torch.exp(-torch.cdist(A, B) ** 2 / (2 * sigma**2))
Knm, Kmm = K(X, X[idx]), K(X[idx], X[idx])
beta = torch.linalg.solve(Knm.T @ Knm + len(X) * lam * Kmm, Knm.T @ y)
err = float((model.predict(X) - Knm @ beta).abs().max() / (Knm @ beta).abs().max())
print(f"falkon {falkon.__version__} from {falkon.__file__}: C extension loaded; "
      f"predictions against a dense solve: {err:.1e} relative")
assert err < 1e-6, err
EOF
