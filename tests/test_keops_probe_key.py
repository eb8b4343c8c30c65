"""The on-disk KeOps CUDA verdict is keyed by the environment that chooses KeOps' NVRTC."""
from torchkern import gram


def test_cuda_probe_key_follows_the_nvrtc_environment(monkeypatch):
    # A crash recorded with the system NVRTC must not outlive an export that points KeOps
    # at another one (bench/keops_probe.py's variants), and vice versa.
    for var in gram._KEOPS_ENV:
        monkeypatch.delenv(var, raising=False)
    plain = gram._cuda_probe_key("cuda")
    assert "LD_LIBRARY_PATH" not in plain
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/shim/lib")
    monkeypatch.setenv("CUDA_PATH", "/opt/shim")
    shimmed = gram._cuda_probe_key("cuda")
    assert shimmed.startswith(plain)
    assert shimmed.endswith(" | LD_LIBRARY_PATH=/opt/shim/lib | CUDA_PATH=/opt/shim")
    monkeypatch.setenv("CUDA_PATH", "/opt/other")
    assert gram._cuda_probe_key("cuda") != shimmed
    monkeypatch.setenv("PATH", "/nowhere")  # an unrelated variable does not enter
    assert gram._cuda_probe_key("cuda").endswith("CUDA_PATH=/opt/other")


def test_verdict_cache_reruns_the_check_under_a_new_nvrtc_setting(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHKERN_CACHE_DIR", str(tmp_path))
    for var in gram._KEOPS_ENV:
        monkeypatch.delenv(var, raising=False)
    calls = []
    monkeypatch.setattr(gram, "_probe_keops_cuda", lambda: calls.append(1) or "crashed")
    assert gram._keops_cuda_verdict("cuda") == "crashed"
    assert gram._keops_cuda_verdict("cuda") == "crashed" and len(calls) == 1
    monkeypatch.setenv("LD_LIBRARY_PATH", "/opt/shim/lib")
    monkeypatch.setattr(gram, "_probe_keops_cuda", lambda: calls.append(1) or None)
    assert gram._keops_cuda_verdict("cuda") is None and len(calls) == 2
    monkeypatch.delenv("LD_LIBRARY_PATH")
    assert gram._keops_cuda_verdict("cuda") == "crashed" and len(calls) == 2
