"""Software fingerprint: versions, runtime info without the framework, keys and diffs."""

from __future__ import annotations

import builtins
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest

from pytest_rnnperf.backends import base
from pytest_rnnperf.backends.base import format_cudnn_version, loaded_cudnn
from pytest_rnnperf.backends.tensorflow import TF_KEYS, tf_runtime_info
from pytest_rnnperf.backends.torch import TORCH_KEYS, torch_runtime_info
from pytest_rnnperf.measure import environment as env
from pytest_rnnperf.measure.environment import (
    diff_environments, fingerprint_key, format_diff, key_field_map, key_fields, software_info,
)

DEVICE = {"name": "NVIDIA H200", "compute_capability": "9.0", "driver_version": "580.95.05",
          "cuda_driver_version": "13.0", "temperature_c": "35", "sm_clock_mhz": "1980", "uuid": "GPU-1"}
SOFTWARE = {"python": "3.11.7", "python_minor": "3.11", "torch": "2.13.0", "torch.cudnn_version": "9.19.0",
            "torch.cudnn_allow_tf32": "True", "tensorflow": "2.21.0"}


def test_software_info_reads_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    def version(name: str) -> str:
        if name in ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tf-nightly"):
            raise env.metadata.PackageNotFoundError(name)
        return {"torch": "2.13.0"}.get(name, "1.0")

    dists = [SimpleNamespace(name="nvidia_cudnn_cu13", version="9.19.0.56"),
             SimpleNamespace(name="nvidia-cublas", version="13.1.0.3"),  # CUDA 13 naming
             SimpleNamespace(name="nvidia-cudnn-frontend", version="1.16"),  # another package
             SimpleNamespace(name="numpy", version="2.4")]
    monkeypatch.setattr(env.metadata, "version", version)
    monkeypatch.setattr(env.metadata, "distributions", lambda: dists)
    info = software_info()
    assert info["torch"] == "2.13.0"
    assert info["tensorflow"] == "unavailable: not installed"
    assert info["cudnn_wheel"] == "9.19.0.56 (nvidia-cudnn-cu13)"
    assert info["cublas_wheel"] == "13.1.0.3 (nvidia-cublas)"
    assert "cuda_runtime_wheel" not in info
    assert info["python"].count(".") == 2 and info["python_minor"].count(".") == 1
    assert all(isinstance(v, str) for v in info.values())


def test_software_info_and_module_load_import_no_framework() -> None:
    code = ("import sys; import pytest_rnnperf.measure.gpu, pytest_rnnperf.measure.environment as e; e.software_info(); "
            "bad = {'torch', 'tensorflow', 'keras', 'pynvml'} & set(sys.modules); assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_cudnn_version_formatting() -> None:
    assert format_cudnn_version(91900) == "9.19.0"
    assert format_cudnn_version(90100) == "9.1.0"
    assert format_cudnn_version(8902) == "8.9.2"
    assert format_cudnn_version(None) == "unavailable: no cuDNN"


@pytest.mark.parametrize("fn, keys, module", [(torch_runtime_info, TORCH_KEYS, "torch"),
                                               (tf_runtime_info, TF_KEYS, "tensorflow")])
def test_runtime_info_when_framework_missing(monkeypatch: pytest.MonkeyPatch, fn: Any, keys: tuple[str, ...],
                                             module: str) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import now raises ImportError
    info = fn()
    assert tuple(info) == keys
    assert set(info.values()) == {f"unavailable: {module} not installed"}


@pytest.mark.parametrize("fn, module", [(torch_runtime_info, "torch"), (tf_runtime_info, "tensorflow")])
def test_runtime_info_when_framework_import_breaks(monkeypatch: pytest.MonkeyPatch, fn: Any, module: str) -> None:
    real_import = builtins.__import__

    def broken(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == module:
            raise OSError("libcudart.so.13: cannot open shared object file")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setattr(builtins, "__import__", broken)
    info = fn()
    assert all(v == f"unavailable: {module} import failed (OSError: libcudart.so.13: cannot open shared object file)"
               for v in info.values())


def fake_torch(cuda: bool = True) -> SimpleNamespace:
    cudnn = SimpleNamespace(version=lambda: 91900, is_available=lambda: True, enabled=True, allow_tf32=True,
                            benchmark=False, deterministic=True, rnn=SimpleNamespace(fp32_precision="tf32"))
    matmul = SimpleNamespace(allow_tf32=False)  # no fp32_precision: an older torch
    return SimpleNamespace(
        __version__="2.13.0+cu130", version=SimpleNamespace(cuda="13.0"),
        backends=SimpleNamespace(cudnn=cudnn, cuda=SimpleNamespace(matmul=matmul)),
        cuda=SimpleNamespace(is_available=lambda: cuda, get_device_name=lambda i: "NVIDIA H200"),
        get_float32_matmul_precision=lambda: "highest", are_deterministic_algorithms_enabled=lambda: False,
    )


def test_torch_runtime_info_formats_a_gpu_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    info = torch_runtime_info()
    assert tuple(info) == TORCH_KEYS
    assert info["torch.version"] == "2.13.0+cu130" and info["torch.cuda_build"] == "13.0"
    assert info["torch.cudnn_version"] == "9.19.0"
    assert info["torch.cuda_available"] == "True" and info["torch.device_name"] == "NVIDIA H200"
    assert info["torch.cudnn_allow_tf32"] == "True" and info["torch.matmul_allow_tf32"] == "False"
    assert info["torch.cudnn_rnn_fp32_precision"] == "tf32"
    assert info["torch.matmul_fp32_precision"].startswith("unavailable: AttributeError")
    assert info["torch.cudnn_deterministic"] == "True" and info["torch.deterministic_algorithms"] == "False"


def test_torch_runtime_info_without_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", fake_torch(cuda=False))
    assert torch_runtime_info()["torch.device_name"] == "unavailable: no CUDA device"


def test_torch_runtime_info_with_the_installed_torch() -> None:
    torch = pytest.importorskip("torch")
    info = torch_runtime_info()
    assert tuple(info) == TORCH_KEYS and info["torch.version"] == torch.__version__
    assert all(isinstance(v, str) for v in info.values())


def fake_tf(gpus: int = 1) -> SimpleNamespace:
    devices = [SimpleNamespace(name=f"/physical_device:GPU:{i}") for i in range(gpus)]
    experimental = SimpleNamespace(
        tensor_float_32_execution_enabled=lambda: True, is_op_determinism_enabled=lambda: False,
        get_memory_growth=lambda d: True,
        get_device_details=lambda d: {"device_name": "NVIDIA H200", "compute_capability": (9, 0)},
    )
    return SimpleNamespace(
        __version__="2.21.0", keras=SimpleNamespace(__version__="3.15.1"),
        sysconfig=SimpleNamespace(get_build_info=lambda: {"cuda_version": "12.5.1", "cudnn_version": "9"}),
        config=SimpleNamespace(list_physical_devices=lambda kind: devices, experimental=experimental),
    )


def test_tf_runtime_info_formats_a_gpu_build(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setitem(sys.modules, "tensorflow", fake_tf())
    monkeypatch.delenv("TF_FORCE_GPU_ALLOW_GROWTH", raising=False)
    # This process's own maps would show the libcudnn torch loaded on a GPU machine: read an empty map instead.
    (tmp_path / "maps").write_text("")
    import pytest_rnnperf.backends.tensorflow as tf_backend

    real = loaded_cudnn
    monkeypatch.setattr(tf_backend, "loaded_cudnn", lambda: real(str(tmp_path / "maps")))
    info = tf_runtime_info()
    assert tuple(info) == TF_KEYS
    assert info["tf.version"] == "2.21.0" and info["tf.keras_version"] == "3.15.1"
    assert info["tf.cuda_build"] == "12.5.1" and info["tf.cudnn_build"] == "9"
    assert info["tf.gpus"] == "1: NVIDIA H200 (cc 9.0)"
    assert info["tf.tensor_float_32"] == "True" and info["tf.op_determinism"] == "False"
    assert info["tf.memory_growth"] == "GPU:0 on"
    assert info["tf.cudnn_runtime"].startswith("unavailable: TF does not expose the loaded cuDNN version")


def test_tf_runtime_info_without_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorflow", fake_tf(gpus=0))
    monkeypatch.delenv("TF_FORCE_GPU_ALLOW_GROWTH", raising=False)
    info = tf_runtime_info()
    assert info["tf.gpus"] == "none" and info["tf.memory_growth"] == "unavailable: no GPU visible to TF"


def test_loaded_cudnn_is_asked_of_the_mapped_library(tmp_path: Any) -> None:
    maps = tmp_path / "maps"
    lib = "/venv/lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9"
    maps.write_text(f"7f00-7f10 r-xp 00000000 08:01 1234   {lib}\n"
                    "7f10-7f20 r-xp 00000000 08:01 1235   /x/libcudnn_ops.so.9\n"
                    "7f20-7f30 rw-p 00000000 00:00 0\n")
    opened: list[str] = []

    def loader(path: str) -> Any:
        opened.append(path)
        return SimpleNamespace(cudnnGetVersion=lambda: 91900)

    assert loaded_cudnn(str(maps), loader) == "9.19.0 (libcudnn.so.9)"
    assert opened == [lib]
    maps.write_text("7f20-7f30 rw-p 00000000 00:00 0\n")
    assert loaded_cudnn(str(maps), loader).startswith("unavailable: TF does not expose")


def test_fingerprint_key_is_stable_and_sensitive() -> None:
    fields = key_fields(DEVICE, SOFTWARE)
    key = fingerprint_key(fields)
    assert len(key) == 12 and int(key, 16) >= 0
    assert fingerprint_key(dict(reversed(list(fields.items())))) == key
    assert fingerprint_key(key_fields({**DEVICE, "driver_version": "590.1"}, SOFTWARE)) != key
    assert fingerprint_key(key_fields({**DEVICE, "temperature_c": "71", "sm_clock_mhz": "1410"}, SOFTWARE)) == key
    assert fingerprint_key(key_fields(DEVICE, {**SOFTWARE, "python": "3.11.9"})) == key
    assert fingerprint_key(key_fields(DEVICE, {**SOFTWARE, "torch.cudnn_allow_tf32": "False"})) != key


def test_key_fields_selects_and_renames() -> None:
    fields = key_fields(DEVICE, SOFTWARE)
    assert fields["gpu"] == "NVIDIA H200" and fields["driver"] == "580.95.05" and fields["cuda_driver"] == "13.0"
    assert fields["python"] == "3.11" and fields["torch.cudnn_version"] == "9.19.0"
    assert not {"temperature_c", "sm_clock_mhz", "uuid", "tf.cudnn_build"} & set(fields)
    assert set(fields) <= set(key_field_map())
    old_style = {k: v for k, v in SOFTWARE.items() if k != "python_minor"}
    assert key_fields(DEVICE, old_style)["python"] == "3.11"


def test_diff_environments() -> None:
    old = {"driver": "580.159", "gpu": "NVIDIA H200", "torch": "2.12.0", "zeta": "1", "keras": "3.15.0"}
    new = {"driver": "590.1", "gpu": "NVIDIA H200", "torch": "2.13.0", "alpha": "x", "keras": "3.15.0"}
    diff = diff_environments(old, new)
    assert diff == [("driver", "580.159", "590.1"), ("torch", "2.12.0", "2.13.0"), ("alpha", "absent", "x"),
                    ("zeta", "1", "absent")]
    assert diff_environments(new, new) == []
    assert format_diff(diff)[0] == "driver: 580.159 -> 590.1"


def test_diff_leaves_out_a_framework_that_did_not_run_on_one_side() -> None:
    """Baseline ran torch and TF, tonight only torch (-k torch): tf.* is not listed as absent; torch.* still is."""
    old = {"torch.cudnn_version": "9.19.0", "tf.cudnn_runtime": "9.19.0", "tf.tensor_float_32": "True",
           "tensorflow": "2.21.0"}
    new = {"torch.cudnn_version": "9.20.0", "tensorflow": "2.21.0"}
    assert diff_environments(old, new) == [("torch.cudnn_version", "9.19.0", "9.20.0")]
    assert diff_environments(new, old) == [("torch.cudnn_version", "9.20.0", "9.19.0")]
    # Both sides ran TF: a field that vanished is a change and is listed.
    assert diff_environments(old, {**new, "tf.cudnn_runtime": "9.19.0"}) == [
        ("torch.cudnn_version", "9.19.0", "9.20.0"), ("tf.tensor_float_32", "True", "absent")]


def test_a_long_value_in_a_diff_line_is_cut_and_its_length_named() -> None:
    """An injection spec naming 30 cases stays one readable line; the change is still visible."""
    spec = ",".join(f"torch-case-{i}=7.53" for i in range(30))
    (line,) = format_diff([("RNNPERF_INJECT_CUDNN_DELAY_US", "absent", spec)])
    assert line.startswith("RNNPERF_INJECT_CUDNN_DELAY_US: absent -> torch-case-0=7.53,")
    assert line.endswith(f"... ({len(spec)} characters)") and len(line) < 160


class FakeCudaLibrary:
    """A loaded CUDA library as ctypes shows it: each answers its own version query like the real one."""

    def __init__(self, version: int | tuple[int, int, int]) -> None:
        self.version = version

    def cudnnGetVersion(self) -> int:  # noqa: N802 - the C name
        assert isinstance(self.version, int)
        return self.version

    def cublasGetProperty(self, prop: int, out: Any) -> int:  # noqa: N802
        assert isinstance(self.version, tuple)
        out.contents.value = self.version[prop]
        return 0

    def cudaRuntimeGetVersion(self, out: Any) -> int:  # noqa: N802
        out.contents.value = self.version
        return 0


SYSTEM_CUDNN = "/usr/lib/x86_64-linux-gnu/libcudnn.so.9"
WHEEL = "/venv/lib/python3.11/site-packages/nvidia"


def test_loaded_libraries_names_the_copy_each_library_was_loaded_from(tmp_path: Any) -> None:
    """The fingerprint issue: the cuDNN, cuBLAS and CUDA runtime mapped into the process, version and path."""
    maps = tmp_path / "maps"
    maps.write_text(f"7f00-7f10 r-xp 00000000 08:01 1   {SYSTEM_CUDNN}\n"
                    f"7f10-7f20 r-xp 00000000 08:01 2   {WHEEL}/cudnn/lib/libcudnn_ops.so.9\n"
                    f"7f20-7f30 r-xp 00000000 08:01 3   {WHEEL}/cublas/lib/libcublasLt.so.13\n"
                    f"7f30-7f40 r-xp 00000000 08:01 4   {WHEEL}/cublas/lib/libcublas.so.13\n"
                    f"7f40-7f50 r--p 00000000 08:01 4   {WHEEL}/cublas/lib/libcublas.so.13\n"
                    "7f50-7f60 rw-p 00000000 00:00 0\n")
    versions = {SYSTEM_CUDNN: 91002, f"{WHEEL}/cublas/lib/libcublas.so.13": (13, 1, 0)}
    opened: list[str] = []

    def loader(path: str) -> FakeCudaLibrary:
        opened.append(path)
        return FakeCudaLibrary(versions[path])

    assert base.loaded_libraries("torch.", str(maps), loader) == {
        "torch.cudnn_library": f"9.10.2 at {SYSTEM_CUDNN}",
        "torch.cublas_library": f"13.1.0 at {WHEEL}/cublas/lib/libcublas.so.13",
        "torch.cudart_library": "unavailable: not loaded",
    }
    assert sorted(opened) == sorted(versions)  # neither libcudnn_ops nor libcublasLt is asked
    maps.write_text(f"7f00-7f10 r-xp 00000000 08:01 1   {WHEEL}/cuda_runtime/lib/libcudart.so.13\n")
    assert base.loaded_libraries("tf.", str(maps), lambda p: FakeCudaLibrary(13000))["tf.cudart_library"] == (
        f"13.0 at {WHEEL}/cuda_runtime/lib/libcudart.so.13")

    def broken(path: str) -> Any:
        raise OSError("undefined symbol: cudnnGetVersion")

    maps.write_text(f"7f00-7f10 r-xp 00000000 08:01 1   {SYSTEM_CUDNN}\n")
    assert base.loaded_libraries("jax.", str(maps), broken)["jax.cudnn_library"] == (
        f"{SYSTEM_CUDNN} (version not readable: OSError: undefined symbol: cudnnGetVersion)")
    assert set(base.loaded_libraries("x.", str(tmp_path / "no-such-maps")).values()) == {"unavailable: not loaded"}


def test_a_loaded_library_is_compared_with_the_installed_wheels_on_the_parts_it_states() -> None:
    """cuDNN states 9.19.0 of wheel 9.19.0.56, the CUDA runtime 13.0 of wheel 13.0.96: those match; 9.10.2 does not."""
    wheel = "9.19.0.56 (nvidia-cudnn-cu13)"
    assert env.not_the_wheels(f"9.19.0 at {WHEEL}/cudnn/lib/libcudnn.so.9", wheel) == []
    assert env.not_the_wheels(f"9.10.2 at {SYSTEM_CUDNN}", wheel) == [f"9.10.2 at {SYSTEM_CUDNN}"]
    assert env.not_the_wheels(f"9.10.2 at {SYSTEM_CUDNN}", f"9.10.2.21 (nvidia-cudnn-cu12), {wheel}") == []
    assert env.not_the_wheels("13.0 at /x/libcudart.so.13", "13.0.96 (nvidia-cuda-runtime)") == []
    assert env.not_the_wheels(f"9.10.2 at {SYSTEM_CUDNN}", None) == []  # no wheel: nothing to differ from
    assert env.not_the_wheels("unavailable: not loaded", wheel) == []
    assert env.not_the_wheels(f"{SYSTEM_CUDNN} (version not readable: OSError)", wheel) == []
