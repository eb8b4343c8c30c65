#!/usr/bin/env bash
# Wheels the GPU machine cannot download (it reaches no registry), gathered here for
# `run(carry=[".whl"])` (about 26 MB in all):
#   .whl/pykeops-2.3-*.whl, .whl/keopscore-2.3-*.whl, .whl/pybind11-*.whl   installed by
#       bench/device_run.sh when the machine lacks pykeops (PyPI ships the first two as
#       source: built here, pure Python; pykeops compiles its binder with
#       `python -m pybind11 --includes`);
#   .whl/keops-extra/nvidia_cuda_nvrtc_cu12-12.4.127-*.whl and nvidia_cuda_runtime_cu12
#       (NVRTC 12 + cuda.h), and .whl/keops-extra/cuda12-headers.zip: the headers that
#       KeOps' host code needs besides (cuda_fp16.h includes crt/host_defines.h and
#       <nv/target>), the include/ folder of the 22 MB nvidia-cuda-nvcc-cu12 wheel and
#       include/nv/ of nvidia-cuda-cccl-cu12 (~0.1 MB zipped): the `nvrtc-cu12` variant
#       of bench/keops_probe.py.
#       A subfolder, so that device_run.sh does not install them onto sys.path.
# 12.4.127 rather than the newest 12.x: its NVRTC wheel is 25 MB (12.9's is 90 MB, over
# the 64 MB that a run may carry) and it compiles for sm_90 (H100/H200).
set -eu
cd "$(dirname "$0")/.."
mkdir -p .whl/keops-extra
tmp=$(mktemp -d)
python3 -m pip download -q --no-deps --no-binary :all: -d "$tmp" pykeops==2.3 keopscore==2.3
python3 -m pip wheel -q --no-deps --no-build-isolation -w .whl "$tmp"/pykeops-2.3.tar.gz "$tmp"/keopscore-2.3.tar.gz
python3 -m pip download -q --no-deps --only-binary :all: -d .whl pybind11
python3 -m pip download -q --no-deps -d .whl/keops-extra \
  nvidia-cuda-nvrtc-cu12==12.4.127 nvidia-cuda-runtime-cu12==12.4.127
python3 -m pip download -q --no-deps -d "$tmp" nvidia-cuda-nvcc-cu12==12.4.131 \
  nvidia-cuda-cccl-cu12==12.4.127.post1
python3 - "$tmp"/nvidia_cuda_nvcc_cu12-*.whl "$tmp"/nvidia_cuda_cccl_cu12-*.whl <<'PY'
import sys, zipfile
keep = ("nvidia/cuda_nvcc/include/", "nvidia/cuda_cccl/include/nv/")
with zipfile.ZipFile(".whl/keops-extra/cuda12-headers.zip", "w", zipfile.ZIP_DEFLATED) as dst:
    for whl in sys.argv[1:]:
        with zipfile.ZipFile(whl) as src:
            for info in src.infolist():
                if info.filename.startswith(keep):
                    dst.writestr(info, src.read(info))
PY
rm -rf "$tmp"
ls -la .whl .whl/keops-extra
