"""Why pykeops crashes on a CUDA 13 machine, and which library setting makes it run.

pykeops 2.3 compiles every formula with NVRTC (``keopscore/binders/nvrtc``: a small
``nvrtc_jit`` library built with g++ against ``cuda.h``/``nvrtc.h`` and linked to the
``libnvrtc`` that ``ctypes.util.find_library("nvrtc")`` finds); KeOps 2.x has no nvcc
build path any more (its CHANGELOG, v2.0). With the CUDA 13 (cu130) torch wheels that
compile segfaulted (docs/benchmarks_gpu.md). Candidate causes, each a variant below:
KeOps pairing a system ``libnvrtc`` with other headers or with the CUDA 13 NVRTC that
torch has already loaded (two NVRTCs in one process; upstream getkeops/keops#361 and
#398), or NVRTC 13 itself. So the script

1. prints the facts: torch/CUDA/driver versions, what ``find_library`` returns for
   ``cuda``, ``nvrtc`` and ``cudart``, the ``ldconfig`` entries, NVRTC/cudart shipped in
   ``nvidia-*`` wheels on ``sys.path``, CUDA toolkits under ``/usr/local``, g++/nvcc;
2. runs the same tiny KeOps reduction as ``torchkern.gram``'s CUDA check in child
   processes (a crash kills only the child), in parallel, each with its own fresh
   ``KEOPS_CACHE_FOLDER`` and a small preloaded signal handler that prints the native
   backtrace and the NVRTC/CUDA libraries mapped at the crash:

   - ``installed``: as the machine is;
   - ``torch-wheels``: KeOps pointed (``LD_LIBRARY_PATH``, ``LIBRARY_PATH``,
     ``CUDA_PATH`` to a directory of symbolic links) at the NVRTC, cudart and headers
     of the ``nvidia-*`` wheels torch itself uses, so only one NVRTC is in the process;
   - ``toolkit-<dir>``: the same for each CUDA toolkit found on the machine;
   - ``nvrtc-cu12``: NVRTC 12 and cudart 12 from the ``nvidia-cuda-nvrtc-cu12`` and
     ``nvidia-cuda-runtime-cu12`` wheels in ``--wheels`` (``bench/keops_wheels.sh``
     downloads them; the device cannot reach a registry), which emit sm_90 cubins that a
     CUDA 13 driver loads;

   and, for every variant whose environment alone fails, once more with
   ``find_library`` pinned to the variant's libraries inside the child (``+pin``: a
   ``ldconfig`` entry can outrank ``LD_LIBRARY_PATH`` there);
3. for the first variant that works (environment-only preferred), writes its shell
   exports to ``--env-out`` (sourced by the later ``device_run.sh`` steps) and runs, in
   a child with that environment, torchkern's own choice (``keops_available("cuda")``,
   i.e. ``config.keops_cuda_probe``) and raw KeOps beside torchkern's backends on the
   same RBF product (d = 3, float32): time and relative difference.

Every child has a timeout; the whole run takes about two child compiles (~1-2 min).

    python3 bench/keops_probe.py [--timeout 120] [--wheels .whl/keops-extra]
"""
from __future__ import annotations

import argparse
import ctypes.util
import glob
import importlib.metadata as md
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The check every variant runs: torch's CUDA context first (as in real use), then the
# same reduction as torchkern.gram._CUDA_PROBE, then which NVRTC objects were mapped.
CHILD = r"""
import json, os, sys, time
t0 = time.time()
pin = json.loads(os.environ.get("KEOPS_PROBE_PIN") or "{}")
if pin:  # find_library pinned to this variant's files (before keopscore imports it)
    import ctypes.util
    _find = ctypes.util.find_library
    ctypes.util.find_library = lambda name: pin.get(name) or _find(name)
import torch
x = torch.randn(64, 3, device="cuda")
v = torch.randn(64, 2, device="cuda")
ref = torch.exp(-torch.cdist(x, x) ** 2) @ v
import pykeops
from keopscore.config import cuda_config as cc
print("keops sees: nvrtc dir", cc.libnvrtc_folder, "| cuda dir", cc.libcuda_folder,
      "| cuda version", cc.cuda_version, "| include", cc.cuda_include_path, flush=True)
from pykeops.torch import LazyTensor
k = (-((LazyTensor(x[:, None, :]) - LazyTensor(x[None, :, :])) ** 2).sum(-1)).exp()
out = k @ v
err = float((out - ref).abs().max())
maps = sorted({ln.split()[-1] for ln in open("/proc/self/maps")
               if "nvrtc" in ln and "/" in ln})
print("KEOPS_PROBE_RESULT", json.dumps(dict(ok=err < 1e-4, err=err, seconds=time.time() - t0,
                                           nvrtc_mapped=maps)), flush=True)
"""

# A preloaded handler for SIGSEGV/SIGBUS/SIGILL/SIGFPE/SIGABRT: native backtrace plus the
# executable mappings of NVRTC/CUDA/KeOps objects, then the default action. Python's
# faulthandler (-X faulthandler) runs first and chains to it.
SEGV_C = r"""
#define _GNU_SOURCE
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
static void put(const char *s) { ssize_t r = write(2, s, strlen(s)); (void)r; }
static void handler(int sig, siginfo_t *si, void *uc) {
  void *frames[64];
  int n = backtrace(frames, 64);
  put("\n[keops_probe] native backtrace:\n");
  backtrace_symbols_fd(frames, n, 2);
  put("[keops_probe] NVRTC/CUDA/KeOps code mapped:\n");
  int fd = open("/proc/self/maps", O_RDONLY);
  if (fd >= 0) {
    static char buf[1 << 16], line[4096];
    ssize_t r; int len = 0;
    while ((r = read(fd, buf, sizeof buf)) > 0)
      for (ssize_t i = 0; i < r; i++) {
        if (len < 4094) line[len++] = buf[i];
        if (buf[i] == '\n') {
          line[len] = 0;
          if (strstr(line, " r-xp ") && (strstr(line, "nvrtc") || strstr(line, "cuda") ||
                                         strstr(line, "keops") || strstr(line, "stdc++")))
            put(line);
          len = 0;
        }
      }
    close(fd);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}
__attribute__((constructor)) static void install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  for (int i = 0; i < 5; i++) sigaction(sigs[i], &sa, 0);
}
"""

# torchkern's own choice and KeOps beside torchkern's backends, in the working environment.
SIDE_BY_SIDE = r"""
import os, sys, time, json
import torch, torchkern
from torchkern import gram
dev = "cuda"
ok = gram.keops_available(dev)
print("torchkern keops_available('cuda'):", ok, "| reason:", gram.keops_unavailable_reason(dev), flush=True)
from pykeops.torch import LazyTensor
sizes = json.loads(sys.argv[1])
def timed(fn, reps=3):
    reps = 3 if n <= 200_000 else 1
    fn(); torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter(); out = fn(); torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return best, out
k = torchkern.RBF(1.0)
for n in sizes:
    g = torch.Generator(device=dev).manual_seed(0)
    X = torch.randn(n, 3, device=dev, generator=g)
    V = torch.randn(n, 1, device=dev, generator=g)
    def raw():
        xi, xj = LazyTensor(X[:, None, :]), LazyTensor(X[None, :, :])
        return (-((xi - xj) ** 2).sum(-1) / 2).exp() @ V
    t_raw, ref = timed(raw)
    print(f"n={n:,} raw KeOps: {t_raw:.4f} s ({n * n / t_raw:.2e} evaluations/s) load {os.getloadavg()[0]:.2f}", flush=True)
    # "compiled" (torch.compile tiles: ~12 s a product at n = 10^6 on an H100) only below
    for backend in ("keops", "triton", "compiled", "auto") if n <= 200_000 else ("keops", "triton", "auto"):
        try:
            t, out = timed(lambda: k(X, backend=backend) @ V)
        except Exception as exc:
            print(f"n={n:,} torchkern {backend}: failed ({type(exc).__name__}: {str(exc)[:160]})", flush=True)
            continue
        rel = float((out - ref).norm() / ref.norm())
        print(f"n={n:,} torchkern {backend}: {t:.4f} s ({n * n / t:.2e}/s, {t / t_raw:.2f}x raw KeOps) rel diff {rel:.1e}", flush=True)
"""


def sh(cmd: str) -> str:
    try:
        return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as exc:  # noqa: BLE001 - a diagnostic, never fatal
        return f"({type(exc).__name__})"


def version(pkg: str) -> str:
    try:
        return md.version(pkg)
    except md.PackageNotFoundError:
        return "not installed"


def wheel_dirs() -> list[str]:
    """``nvidia/<name>/lib`` directories on sys.path that hold an NVRTC."""
    found = []
    for entry in sys.path:
        for lib in sorted(glob.glob(os.path.join(entry or ".", "nvidia", "*", "lib", "libnvrtc.so.*"))):
            d = os.path.dirname(os.path.realpath(lib))
            if d not in found:
                found.append(d)
    return found


def toolkits() -> list[str]:
    roots = []
    for root in sorted(glob.glob("/usr/local/cuda*")) + ["/opt/cuda"]:
        real = os.path.realpath(root)
        if real not in roots and glob.glob(os.path.join(real, "lib*", "libnvrtc.so*")):
            roots.append(real)
    return roots


def facts() -> None:
    import torch
    print("== facts")
    print("python", sys.version.split()[0], "| torch", torch.__version__, "| torch CUDA", torch.version.cuda,
          "| pykeops", version("pykeops"), "| keopscore", version("keopscore"), "| pybind11", version("pybind11"))
    if torch.cuda.is_available():
        print("device:", torch.cuda.get_device_name(0), "| capability", torch.cuda.get_device_capability(0))
    print("driver:", sh("cat /proc/driver/nvidia/version | head -1") or "?")
    for name in ("cuda", "nvrtc", "cudart"):
        print(f"find_library({name!r}) = {ctypes.util.find_library(name)}")
    print("ldconfig:", sh("ldconfig -p | grep -E 'libnvrtc|libcudart|libcuda\\.so' | head -8") or "(none)")
    for d in wheel_dirs():
        print("wheel NVRTC dir:", d, sorted(os.listdir(d)))
    for t in toolkits():
        print("toolkit:", t, sorted(os.path.basename(p) for p in glob.glob(os.path.join(t, "lib*", "libnvrtc*"))))
    print("nvcc:", shutil.which("nvcc") or "(none)", "| g++:", sh("g++ --version | head -1") or "(none)")
    for var in ("CUDA_PATH", "CUDA_HOME", "LD_LIBRARY_PATH", "KEOPS_CACHE_FOLDER"):
        print(f"{var}={os.environ.get(var, '')}")


def _link_all(src_dir: str, dst_dir: str, patterns) -> None:
    for pat in patterns:
        for f in glob.glob(os.path.join(src_dir, pat)):
            dst = os.path.join(dst_dir, os.path.basename(f))
            if not os.path.lexists(dst):
                os.symlink(os.path.realpath(f), dst)


def make_shim(root: str, lib_dirs, include_dirs):
    """A directory ``root`` with ``lib/`` (links to every NVRTC and cudart file of
    ``lib_dirs``, plus the unversioned ``libnvrtc.so``/``libcudart.so`` that ``-lnvrtc``
    and ``find_library`` need) and ``include/`` (links to the headers). Returns
    (env, pin) or None when no NVRTC or no cuda.h/nvrtc.h is among them."""
    lib, inc = os.path.join(root, "lib"), os.path.join(root, "include")
    os.makedirs(lib, exist_ok=True)
    os.makedirs(inc, exist_ok=True)
    for d in lib_dirs:
        _link_all(d, lib, ["libnvrtc*.so*", "libcudart.so*"])
    for d in include_dirs:
        _link_all(d, inc, ["*"])
    pin = {}
    for name in ("nvrtc", "cudart"):
        majors = sorted(f for f in os.listdir(lib) if f.startswith(f"lib{name}.so.") and f.count(".") == 2)
        if majors:
            plain = os.path.join(lib, f"lib{name}.so")
            if not os.path.lexists(plain):
                os.symlink(os.path.realpath(os.path.join(lib, majors[-1])), plain)
            pin[name] = os.path.join(lib, majors[-1])
    if "nvrtc" not in pin or not all(os.path.exists(os.path.join(inc, h)) for h in ("cuda.h", "nvrtc.h")):
        return None
    env = {"CUDA_PATH": root, "CUDA_HOME": root,
           "LD_LIBRARY_PATH": os.pathsep.join([lib, os.environ.get("LD_LIBRARY_PATH", "")]).rstrip(os.pathsep),
           "LIBRARY_PATH": os.pathsep.join([lib, os.environ.get("LIBRARY_PATH", "")]).rstrip(os.pathsep)}
    return env, pin


def system_include_dirs() -> list[str]:
    """Directories with cuda.h (toolkits), for wheel variants that lack it."""
    return [d for d in [os.path.join(t, "include") for t in toolkits()] + ["/usr/include"]
            if os.path.exists(os.path.join(d, "cuda.h"))]


def variants(work: str, wheels: str | None):
    """(name, env, pin) candidates, most natural first."""
    out = [("installed", {}, {})]
    target = os.path.join(work, "cu12-wheels")
    headers = sorted(glob.glob(os.path.join(wheels, "cuda12-headers.zip"))) if wheels else []
    for z in headers:
        with zipfile.ZipFile(z) as f:
            f.extractall(target)
    # crt/ and nv/ headers (cuda_fp16.h needs them; the runtime wheels lack them): a last
    # resort behind each variant's own headers, for KeOps' host-side compile only
    fallback = [p for p in glob.glob(os.path.join(target, "nvidia", "*", "include"))]
    for d in wheel_dirs():
        tag = os.path.basename(os.path.dirname(d))  # cu13, cuda_nvrtc, ...
        base = os.path.dirname(os.path.dirname(d))
        libs = [d] + sorted(p for p in glob.glob(os.path.join(base, "*", "lib"))
                            if glob.glob(os.path.join(p, "libcudart.so*")))
        # the NVRTC's own headers first, then the other wheels', the toolkits', the fallback
        incs = [os.path.join(os.path.dirname(d), "include")] + sorted(
            glob.glob(os.path.join(base, "*", "include"))) + system_include_dirs() + fallback
        shim = make_shim(os.path.join(work, f"shim-wheels-{tag}"), libs, incs)
        if shim:
            out.append((f"torch-wheels({tag})", *shim))
        else:
            print(f"(torch-wheels({tag}) skipped: no cuda.h/nvrtc.h found for {d})")
    for t in toolkits():
        libs = [os.path.dirname(p) for p in glob.glob(os.path.join(t, "lib*", "libnvrtc.so*"))][:1]
        shim = make_shim(os.path.join(work, "shim-" + os.path.basename(t)), libs,
                         [os.path.join(t, "include")] + fallback)
        if shim:
            out.append((f"toolkit({t})", *shim))
        else:
            print(f"(toolkit({t}) skipped: no cuda.h/nvrtc.h in {t}/include)")
    # The H100 run of 2026-11-27 crashed in every variant above at the same place: in
    # nvrtc_jit.so's Compile, inside std::ostream::_M_insert<long> (the ostringstream that
    # writes "-arch=sm_90"), before NVRTC is called -- a C++ runtime mismatch, not NVRTC.
    # KeOps honours CXX (not CXXFLAGS) for that library: a wrapper that links libstdc++
    # statically and binds its own symbols first; and the system libstdc++ preloaded.
    wrapper = os.path.join(work, "cxx-static")
    with open(wrapper, "w") as f:
        f.write('#!/bin/sh\nexec g++ "$@" -static-libstdc++ -static-libgcc -Wl,-Bsymbolic\n')
    os.chmod(wrapper, 0o755)
    out.append(("cxx-static-libstdc++", {"CXX": wrapper}, {}))
    libstdcxx = sh("ldconfig -p | grep -m1 'libstdc++.so.6 ' | sed 's/.*=> //'").strip()
    if libstdcxx:
        out.append(("preload-system-libstdc++", {"LD_PRELOAD": libstdcxx}, {}))
    found = sorted(glob.glob(os.path.join(wheels, "nvidia_cuda_nvrtc_cu12-*.whl"))) if wheels else []
    if found:
        for whl in found + sorted(glob.glob(os.path.join(wheels, "nvidia_cuda_runtime_cu12-*.whl"))):
            with zipfile.ZipFile(whl) as z:
                z.extractall(target)
        libs = glob.glob(os.path.join(target, "nvidia", "*", "lib"))
        for lib in libs:  # zip extraction drops the executable bit; the loader does not mind
            for f in os.listdir(lib):
                os.chmod(os.path.join(lib, f), 0o755)
        incs = glob.glob(os.path.join(target, "nvidia", "*", "include")) + system_include_dirs()
        shim = make_shim(os.path.join(work, "shim-cu12"), libs, incs)
        if shim:
            out.append(("nvrtc-cu12", *shim))
    elif wheels:
        print(f"(no nvidia_cuda_nvrtc_cu12-*.whl in {wheels}: the nvrtc-cu12 variant is skipped; "
              f"bench/keops_wheels.sh downloads it)")
    return out


def build_segv(work: str) -> str | None:
    src, lib = os.path.join(work, "segv.c"), os.path.join(work, "segv.so")
    with open(src, "w") as f:
        f.write(SEGV_C)
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        return None
    res = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", lib, src], capture_output=True, text=True)
    return lib if res.returncode == 0 else None


def run_child(name, env_add, pin, work, segv, timeout):
    cache = tempfile.mkdtemp(prefix="keops-cache-", dir=work)
    env = dict(os.environ, **env_add, KEOPS_CACHE_FOLDER=cache, PYKEOPS_VERBOSE="1", KEOPS_VERBOSE="1",
               KEOPS_PROBE_PIN=json.dumps(pin))
    if segv:
        env["LD_PRELOAD"] = (segv + " " + env.get("LD_PRELOAD", "")).strip()
    t = time.time()
    try:
        res = subprocess.run([sys.executable, "-X", "faulthandler", "-c", CHILD], capture_output=True,
                             text=True, timeout=timeout, env=env)
        rc, text = res.returncode, res.stdout + res.stderr
    except subprocess.TimeoutExpired as exc:
        rc = "timeout"
        text = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
    result = None
    for line in text.splitlines():
        if line.startswith("KEOPS_PROBE_RESULT "):
            result = json.loads(line.split(" ", 1)[1])
    ok = bool(result and result["ok"])
    return dict(name=name, env=env_add, pin=pin, rc=rc, ok=ok, result=result, text=text,
                seconds=time.time() - t, cache=cache)


def report(r) -> None:
    how = "WORKS" if r["ok"] else ("crashed (signal %d)" % -r["rc"] if isinstance(r["rc"], int) and r["rc"] < 0
                                   else f"failed (rc={r['rc']})")
    print(f"-- {r['name']}: {how} in {r['seconds']:.1f} s")
    if r["env"]:
        print("   env:", " ".join(f"{k}={v}" for k, v in r["env"].items() if k != "LIBRARY_PATH"))
    if r["result"]:
        print("   max error", r["result"]["err"], "| NVRTC mapped:", r["result"]["nvrtc_mapped"])
    if not r["ok"]:
        lines = [ln for ln in r["text"].splitlines() if ln.strip()]
        cut = next((i for i, ln in enumerate(lines) if "[keops_probe] native backtrace" in ln), len(lines))
        head, native = lines[:cut], lines[cut:]
        keep = [ln for ln in head if "keops sees" in ln or "KeOps" in ln or "nvrtc" in ln.lower()
                or "Fatal" in ln or "rror" in ln or ln.lstrip().startswith("File ")][-25:]
        for ln in (keep or head[-15:]):
            print("   |", ln[:240])
        for ln in native[:45]:  # the crash: frames, then the NVRTC/CUDA objects mapped
            print("   |", ln[:240])
        if head and not native and head[-1] not in keep:
            print("   | (last)", head[-1][:240])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", type=float, default=150.0, help="seconds per child check")
    ap.add_argument("--wheels", default=os.path.join(ROOT, ".whl", "keops-extra"),
                    help="folder with nvidia_cuda_nvrtc_cu12/nvidia_cuda_runtime_cu12 wheels")
    ap.add_argument("--env-out", default="/tmp/keops_env.sh", help="where the working exports go")
    ap.add_argument("--sizes", type=int, nargs="*", default=[100_000, 1_000_000],
                    help="n of the side-by-side RBF products")
    ap.add_argument("--side-timeout", type=float, default=120.0)
    ap.add_argument("--list", action="store_true", help="print the facts and variants, run nothing")
    args = ap.parse_args()
    print(f"load {os.getloadavg()}")
    facts()
    work = tempfile.mkdtemp(prefix="keops-probe-")
    cands = variants(work, args.wheels)
    print("== variants:", ", ".join(c[0] for c in cands))
    if args.list:
        for name, env, pin in cands:
            print(name, env, pin)
        return
    if version("pykeops") == "not installed":
        print("pykeops is not installed: nothing to check (device_run.sh installs .whl/*.whl)")
        return
    segv = build_segv(work)
    print("native crash tracer:", segv or "(no C compiler: Python traceback only)")
    results = []
    with ThreadPoolExecutor(max_workers=len(cands)) as pool:
        for r in pool.map(lambda c: run_child(*c, work, segv, args.timeout), cands):
            report(r)
            results.append(r)
    retry = [(r["name"] + "+pin", r["env"], r["pin"]) for r in results if not r["ok"] and r["pin"]]
    if retry and not any(r["ok"] for r in results):
        print("== again with find_library pinned inside the child")
        with ThreadPoolExecutor(max_workers=len(retry)) as pool:
            for r in pool.map(lambda c: run_child(*c, work, segv, args.timeout), retry):
                report(r)
                results.append(r)
    good = [r for r in results if r["ok"]]
    print("== verdict")
    if not good:
        print("no variant ran KeOps on this GPU: torchkern keeps KeOps off on CUDA here "
              "(config.keops_cuda_probe's child check fails the same way) and uses its "
              "Triton/compiled/blocked backends")
        return
    best = good[0]
    print(f"KeOps runs with: {best['name']}")
    with open(args.env_out, "w") as f:
        f.write(f"# written by bench/keops_probe.py: KeOps works with {best['name']}\n")
        for k, v in best["env"].items():
            f.write(f"export {k}={v}\n")
        f.write(f"export KEOPS_CACHE_FOLDER={best['cache']}  # its compiled engine, reused\n")
    print(f"exports written to {args.env_out}:")
    print(open(args.env_out).read().rstrip())
    if "+pin" in best["name"]:
        print("(this variant needs find_library pinned inside the process: exporting the "
              "variables is not enough, so torchkern's child check would still fail; "
              "it needs an in-process hook before pykeops is imported)")
    # torchkern's selection and the side-by-side product in the working environment
    # the winner's KeOps cache (its compiled engine) is reused; torchkern's is fresh, so
    # that its own check runs under these variables
    env = dict(os.environ, **best["env"], KEOPS_CACHE_FOLDER=best["cache"],
               TORCHKERN_CACHE_DIR=tempfile.mkdtemp(prefix="tk-cache-", dir=work),
               KEOPS_PROBE_PIN=json.dumps(best["pin"]) if "+pin" in best["name"] else "",
               PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    print("== torchkern with it: its own check (fresh verdict cache), then the RBF product d=3 float32")
    try:
        res = subprocess.run([sys.executable, "-c", SIDE_BY_SIDE, json.dumps(args.sizes)], env=env,
                             capture_output=True, text=True, timeout=args.side_timeout)
        print(res.stdout.rstrip())
        if res.returncode:
            print("   | rc", res.returncode, res.stderr.strip().splitlines()[-1:] if res.stderr.strip() else "")
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        print(out.rstrip())
        print(f"   | side-by-side stopped at {args.side_timeout:.0f} s")


if __name__ == "__main__":
    main()
