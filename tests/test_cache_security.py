"""Compiled code is loaded only from directories no one else can write (torchkern._compiled):
a library planted in a shared cache directory never runs; a corrupt library is rebuilt; a
killed build's temporary file does not get in the way."""
import os
import time

import pytest
import torch

import torchkern as tk
from torchkern._compiled import inductor, native

OTHER_USER = 65534  # "nobody": a file or directory of someone else


@pytest.fixture
def fresh(monkeypatch):
    """A native module state as in a new process."""
    monkeypatch.setattr(native, "_STATE", {"lib": None, "error": None, "seconds": None})
    monkeypatch.setattr(native, "_PRIVATE", {})


@pytest.fixture
def no_compile(monkeypatch, fresh):
    """Record what load() opens and builds, without a compiler: a build writes a dummy
    file, opening it returns its path."""
    seen = {"open": [], "build": []}

    def fake_build(target, cxx):
        seen["build"].append(target)
        target.write_bytes(b"built by this test")
        os.chmod(target, 0o700)
        return target

    def fake_open(path):
        seen["open"].append(path)
        if path.read_bytes() != b"built by this test":
            raise OSError(f"{path}: invalid ELF header")
        return path

    monkeypatch.setattr(native, "_build", fake_build)
    monkeypatch.setattr(native, "_open", fake_open)
    return seen


def _plant(folder, name):
    folder.mkdir(exist_ok=True)
    planted = folder / name
    planted.write_bytes(b"\x7fELF planted by another user")
    return planted


def test_a_library_planted_in_a_world_writable_cache_is_never_loaded(monkeypatch, tmp_path,
                                                                     no_compile):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # anyone may write here (no sticky bit)
    monkeypatch.setenv("TORCHKERN_CACHE_DIR", str(shared))
    name = native._target("g++").name
    planted = [_plant(shared, name), _plant(shared / f"torchkern-{os.getuid()}", name)]
    assert native.load() is not None
    (loaded,), (built,) = no_compile["open"], no_compile["build"]
    assert loaded == built and loaded not in planted and loaded.name == name
    # a private directory of its own, outside the shared one
    assert native.is_private_dir(loaded.parent) and shared not in loaded.parents
    assert not native.is_private_dir(shared)
    for p in planted:
        assert p.read_bytes() == b"\x7fELF planted by another user"


def test_a_sticky_shared_cache_gets_a_private_per_user_subdirectory(monkeypatch, tmp_path,
                                                                    no_compile):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # like /tmp: others cannot rename or delete our entries
    monkeypatch.setenv("TORCHKERN_CACHE_DIR", str(shared))
    planted = _plant(shared, native._target("g++").name)
    assert native.cache_dir() == shared / f"torchkern-{os.getuid()}"
    native.load()
    (loaded,) = no_compile["open"]
    assert loaded.parent == shared / f"torchkern-{os.getuid()}" and loaded != planted
    assert oct(os.stat(loaded.parent).st_mode & 0o777) == oct(0o700)


def test_files_and_directories_of_another_user_are_not_trusted(monkeypatch, tmp_path,
                                                               no_compile):
    # (Runs as root, as CI does: only root can make files of another user.)
    # The per-user subdirectory name taken by someone else: a temporary directory instead.
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    theirs = shared / f"torchkern-{os.getuid()}"
    planted = _plant(theirs, native._target("g++").name)
    os.chown(theirs, OTHER_USER, OTHER_USER)
    monkeypatch.setenv("TORCHKERN_CACHE_DIR", str(shared))
    native.load()
    (loaded,) = no_compile["open"]
    assert loaded != planted and theirs not in loaded.parents
    assert native.is_private_dir(loaded.parent)
    # In our private cache, a library owned by another user is replaced, not loaded.
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    monkeypatch.setenv("TORCHKERN_CACHE_DIR", str(mine))
    monkeypatch.setattr(native, "_STATE", {"lib": None, "error": None, "seconds": None})
    target = _plant(mine, native._target("g++").name)
    os.chown(target, OTHER_USER, OTHER_USER)
    native.load()
    assert no_compile["open"][1:] == [target] and no_compile["build"][1:] == [target]
    assert os.stat(target).st_uid == os.getuid()


def test_a_corrupt_library_is_rebuilt_from_a_dirty_cache(monkeypatch, tmp_path, fresh):
    # One real build: the cached library is truncated garbage (a crash while copying, a
    # full disk), and killed builds left temporary files, one of them old. The library is
    # rebuilt (not given up on), the stale temporary file is removed, and the products
    # equal the blocked torch evaluation.
    monkeypatch.setenv("TORCHKERN_CACHE_DIR", str(tmp_path))
    target = native._target(os.environ.get("CXX", "g++"))
    target.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 9)  # an ELF header cut short
    stale = tmp_path / f"{native._TEMP_PREFIX}killed.so"
    stale.write_bytes(b"\x7fELF")
    old = time.time() - 2 * native._STALE_SECONDS
    os.utime(stale, (old, old))
    running = tmp_path / f"{native._TEMP_PREFIX}running.so"  # another process building
    running.write_bytes(b"")
    lib = native.load()
    assert lib is not None and native._STATE["error"] is None
    assert not stale.exists() and running.exists()
    assert target.stat().st_size > 1000 and target.read_bytes()[:4] == b"\x7fELF"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([target.name, running.name])
    g = torch.Generator().manual_seed(5)
    X = torch.randn(70, 4, generator=g, dtype=torch.float64)
    Y = torch.randn(50, 4, generator=g, dtype=torch.float64)
    V = torch.randn(50, 3, generator=g, dtype=torch.float64)
    k = tk.Matern(2.5, lengthscale=1.3)
    out = k(X, Y, backend="compiled") @ V
    ref = k(X, Y, backend="blocked") @ V
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)
    # the matrix is the profile of the scaled squared distance: written out independently
    t = torch.cdist(X, Y) / 1.3
    K = (1 + 5**0.5 * t + 5 * t**2 / 3) * torch.exp(-(5**0.5) * t)
    torch.testing.assert_close(out, K @ V, rtol=1e-10, atol=1e-10)


def test_inductor_cache_in_a_shared_directory_is_replaced_by_a_private_one(monkeypatch,
                                                                         tmp_path, fresh):
    shared = tmp_path / "shared-inductor"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("TORCHKERN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(shared))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(shared / "triton"))
    monkeypatch.setattr(inductor, "_CHECKED", set())
    with pytest.warns(RuntimeWarning, match="other users can write to") as rec:
        inductor._private_cache_dirs()
    assert sorted(str(w.message).split()[0] for w in rec) == ["TORCHINDUCTOR_CACHE_DIR",
                                                              "TRITON_CACHE_DIR"]
    for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        path = os.environ[var]
        assert native.is_private_dir(path) and str(shared) not in path, var
        assert str(tmp_path / "cache") in path
    # a private directory is left as it is
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o700)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(mine))
    monkeypatch.delenv("TRITON_CACHE_DIR")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        inductor._private_cache_dirs()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(mine)


def test_keops_verdict_in_a_shared_directory_is_not_read(monkeypatch, tmp_path, fresh):
    # A verdict file planted in a world-writable cache (e.g. "KeOps works" on a machine
    # where it crashes) is not read: the check runs and its answer is kept privately.
    from torchkern import gram
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("TORCHKERN_CACHE_DIR", str(shared))
    key = "pykeops 2.3 | torch 2.13 | cuda 13.0 | driver 580 | NVIDIA H200"
    (shared / "keops-cuda-probe.json").write_text('{"%s": null}' % key)
    monkeypatch.setattr(gram, "_cuda_probe_key", lambda device: key)
    calls = []
    monkeypatch.setattr(gram, "_probe_keops_cuda",
                        lambda: calls.append(1) or "a test KeOps CUDA reduction failed")
    assert gram._keops_cuda_verdict("cuda") == "a test KeOps CUDA reduction failed"
    assert calls == [1]
    assert (native.cache_dir() / "keops-cuda-probe.json").exists()


def test_a_cache_reached_through_someone_elses_link_is_not_private(tmp_path):
    # (Runs as root, as CI does.) /shared/link -> our own private directory: the link's
    # owner could point it at a directory of theirs later, so the path is not private.
    real = tmp_path / "real"
    (real / "cache").mkdir(parents=True, mode=0o700)
    os.chmod(real, 0o700)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    link = shared / "link"
    link.symlink_to(real)
    assert native.is_private_dir(link / "cache")  # our link in a sticky directory
    os.lchown(link, OTHER_USER, OTHER_USER)
    assert not native.is_private_dir(link / "cache")
    assert native.is_private_dir(real / "cache")
