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
# 17-27 minutes of wall time: the build was still compiling when its session ended. So
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
import torch, falkon
from falkon.c_ext._backend import _assert_has_ext
_assert_has_ext()
X = torch.randn(500, 3)
y = X[:, :1].sin()
opt = falkon.FalkonOptions(use_cpu=True, keops_active="no")
model = falkon.Falkon(kernel=falkon.kernels.GaussianKernel(1.0, opt=opt), penalty=1e-3, M=50,
                      maxiter=10, options=opt).fit(X, y)
err = float(((model.predict(X) - y) ** 2).mean())
print(f"falkon {falkon.__version__} from {falkon.__file__}: C extension loaded; train MSE {err:.2e}")
assert err < 1e-2
EOF
