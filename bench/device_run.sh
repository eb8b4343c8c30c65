#!/usr/bin/env bash
# GPU checks and benchmarks in one go (a lent CUDA machine whose python3 has torch,
# scikit-learn and gpytorch). pykeops/keopscore wheels, if the machine lacks them, are
# taken from .whl/. Everything is logged to ${OUT:-.}/device.log; each step has its own
# time cap so one slow step cannot starve the others.
#
#     bash bench/device_run.sh [steps...]     # default: every step, in this order
#     bash bench/device_run.sh info triton tritontests   # issue #20: Triton engine (<= 10 min)
set -u
LOG=${OUT:-.}/device.log
export PYTHONUNBUFFERED=1 PYKEOPS_VERBOSE=0 KEOPS_VERBOSE=0
if ls .whl/*.whl >/dev/null 2>&1 && ! python3 -c "import pykeops" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
START=$SECONDS
step() {  # step NAME SECONDS COMMAND...
  local name=$1 cap=$2; shift 2
  echo "=== $name (cap ${cap}s, t=$((SECONDS - START))s): $*" | tee -a "$LOG"
  timeout -k 5 "$cap" "$@" 2>&1 | tee -a "$LOG"
  echo "=== $name rc=${PIPESTATUS[0]} after $((SECONDS - START))s" | tee -a "$LOG"
}
steps=${*:-"info keops tests matvec solvers supervised mmd kpca classifiers"}
for s in $steps; do case $s in
  info) step info 60 bash -c 'nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv;
        python3 -c "import torch, pykeops, sklearn, gpytorch; print(torch.__version__, torch.version.cuda, pykeops.__version__, sklearn.__version__, gpytorch.__version__)"' ;;
  keops) step keops-diagnosis 40 python3 -X faulthandler -c "import pykeops; pykeops.set_verbose(True); pykeops.test_torch_bindings()" ;;
  kpca) step kpca 90 python3 bench/kpca_device.py --sizes 8000 20000 ;;
  tritontests) step tritontests 270 bash -c 'X=; python3 -c "import xdist" 2>/dev/null && X="-n 8";
               exec python3 -m pytest -q -p no:cacheprovider -rfE $X tests/test_triton_engine.py -k "not cpu"' ;;
  triton) step triton 330 bash -c '[ -f /tmp/keops_env.sh ] && . /tmp/keops_env.sh;
          exec python3 -X faulthandler bench/gram_matvec.py --targets --device cuda --budget 30' ;;
  # issue #20 in one 9-minute command (carry .whl): info keopsfix9 triton9 tritontests9 million9
  keopsfix9) step keopsfix 130 python3 bench/keops_probe.py --timeout 60 --side-timeout 45 \
             --sizes 100000 1000000 ;;
  triton9) step triton 170 bash -c '[ -f /tmp/keops_env.sh ] && . /tmp/keops_env.sh;
           exec python3 -X faulthandler bench/gram_matvec.py --targets --device cuda --budget 20' ;;
  tritontests9) step tritontests 90 bash -c 'X=; python3 -c "import xdist" 2>/dev/null && X="-n 8";
                exec python3 -m pytest -q -p no:cacheprovider -rfE $X tests/test_triton_engine.py -k "not cpu"' ;;
  million9b) step million 150 bash -c '[ -f /tmp/keops_env.sh ] && . /tmp/keops_env.sh;
             exec python3 bench/gp_million.py --device cuda --sizes 1000000 --warm-iter 20 \
             --warm-cap 30 --budget 115 --rows krr-pcg --krr-tol 1e-2 --pcg-centers 2000 \
             --caps "{\"krr-pcg\": 110}"' ;;
  million9) step million 140 bash -c '[ -f /tmp/keops_env.sh ] && . /tmp/keops_env.sh;
            exec python3 bench/gp_million.py --device cuda --triton-auto --sizes 1000000 \
            --warm-iter 20 --warm-cap 30 --budget 100 --rows krr-pcg nystrom exact-gp \
            --row-sizes "{\"exact-gp\": [100000]}" --finish-max-n 100000 --finish-steps 2 \
            --caps "{\"krr-pcg\": 60, \"nystrom\": 15, \"exact-gp\": 45}"' ;;
  tritondry) step tritondry 120 env TRITON_INTERPRET=1 python3 bench/gram_matvec.py --targets \
             --device cpu --scale 1e-4 ;;
  tests) step tests 70 python3 -m pytest -q -p no:cacheprovider -rfE tests/test_devices.py ;;
  structured) step structured 120 python3 -m pytest -q -p no:cacheprovider -rfE \
              tests/sequences/test_sequences_devices.py tests/graphs -k device ;;
  matvec) step matvec 70 python3 bench/gram_matvec.py --sizes 10000 100000 1000000 --budget 20 ;;
  solvers) step solvers 80 python3 bench/solvers.py --device cuda --sizes 10000 50000 200000 \
           --skip-plain-above 50000 --dense-max-n 50000 ;;
  supervised) step supervised 120 python3 bench/supervised.py --device cuda --large ;;
  gpr) step gpr 50 python3 bench/supervised.py --device cuda --sections gpr ;;
  solvers200k) step solvers200k 45 python3 bench/solvers.py --device cuda --sizes 200000 \
               --skip-plain-above 50000 ;;
  mmd) step mmd 40 python3 bench/mmd.py --device cuda --sizes 2000 10000 50000 ;;
  compiledtests) step compiledtests 120 python3 -m pytest -q -p no:cacheprovider -rfE \
                 tests/test_compiled_devices.py tests/supervised/test_svm_device_smo.py ;;
  compiled) step compiled 90 python3 bench/gram_matvec.py --sizes 10000 100000 --dtypes float32 \
            --budget 15 --skip "dense torch" "torchkern compiled tiles" ;;
  svcgpu) step svcgpu 150 python3 bench/supervised_classifiers.py --device cuda --sections svc \
          --svc-sizes 20000 50000 100000 --threads 16 --ref-timeout 15 --timeout 30 ;;
  svc20k) step svc20k 90 python3 bench/supervised_classifiers.py --device cuda --sections svc \
          --svc-sizes 20000 --threads 16 --ref-timeout 70 --timeout 15 ;;
  distributed) step distributed 100 python3 bench/distributed.py --procs 1 2 4 8 ;;
  distributedgpu) step distributedgpu 60 python3 bench/distributed.py --device cuda --procs 1 \
                  --n 50000 --krr-n 20000 ;;
  classifiers) step classifiers 90 python3 bench/supervised_classifiers.py --device cuda \
               --svc-sizes 5000 20000 --threads 16 ;;
  # issue #20 §3 and §4 in one command of at most 9 minutes (carry .whl, made by
  # bench/keops_wheels.sh): bash bench/device_run.sh info keopsfix million
  keopsfix) step keopsfix 180 python3 bench/keops_probe.py --timeout 70 --side-timeout 60 \
            --sizes 100000 1000000 ;;
  # the later steps use KeOps with whatever keopsfix found to work (/tmp/keops_env.sh)
  million) step million 300 bash -c '[ -f /tmp/keops_env.sh ] && . /tmp/keops_env.sh;
           exec python3 bench/gp_million.py --device cuda --triton-auto --sizes 20000 100000 1000000 \
           --finish-max-n 100000 --warm-iter 30 --warm-cap 50 --budget 230 --rows exact-gp dense-check krr-pcg \
           nystrom gpytorch gpytorch-keops --caps "{\"exact-gp\": 140, \"krr-pcg\": 55,
           \"nystrom\": 20, \"gpytorch\": 40, \"gpytorch-keops\": 30}" \
           --row-sizes "{\"gpytorch\": [20000, 50000, 100000], \"gpytorch-keops\": [100000, 300000]}"' ;;
  # a session with nothing else to run: ML-II finished on all 10^6 points (<= 10 min)
  gp1m) step gp1m 540 bash -c '[ -f /tmp/keops_env.sh ] && . /tmp/keops_env.sh;
        exec python3 bench/gp_million.py --device cuda --triton-auto --sizes 1000000 \
        --finish-steps 2 --warm-iter 30 --warm-cap 50 --budget 470 --rows exact-gp krr-pcg \
        --caps "{\"exact-gp\": 420, \"krr-pcg\": 60}"' ;;
  milliondry) step milliondry 300 python3 bench/gp_million.py --device cpu --threads 1 \
              --sizes 2000 --subset 1000 --finish-steps 1 --rows exact-gp dense-check krr-pcg \
              nystrom --budget 240 ;;
esac; done
echo "=== total $((SECONDS - START))s" | tee -a "$LOG"
