"""`pip install bindings/python` as the README has it: into a fresh virtual environment (Debian's numpy and
cffi visible through --system-site-packages), offline (--no-index, no pip configuration), then used from
outside the checkout with no environment variable: the package, and the `accel` command in the
environment's bin (accel env, accel config, accel launch). Run by ctest as python.install."""
import base64
import csv
import hashlib
import importlib.util
import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

import accel

PACKAGE_ROOT = pathlib.Path(__file__).resolve().parents[1]
REPOSITORY = PACKAGE_ROOT.parents[1]
LIBRARY = os.environ["ACCEL_LIBRARY"]
LAUNCHER = os.environ.get("ACCEL_LAUNCHER", str(REPOSITORY / "build" / "bin" / "accel"))

# Run by the installed package: where it and everything it mapped come from, and a loss computed.
USE = """
import importlib.metadata, json, sys
import numpy as np
import accel, accel._library, accel.utils, accel.state, accel.data_loader
loss = accel.compute_loss("mse", np.array([1.0, 2.0, 3.0], np.float32), np.zeros(3, np.float32))
mapped = {line.split()[-1] for line in open("/proc/self/maps") if len(line.split()) == 6}
print(json.dumps({"package": accel.__file__, "library": accel._library.path, "version": accel.version(),
                  "distribution": importlib.metadata.version("accel"), "loss": float(loss.numpy()),
                  "modules": sorted(m.__file__ for m in list(sys.modules.values())
                                    if getattr(m, "__file__", None) and m.__name__.startswith("accel")),
                  "mapped": sorted(mapped)}))
"""

# Launched by the installed `accel` command on two processes: what each rank saw, written to rank<i>.json.
TRAIN = """
import json, sys
import numpy as np
import accel, accel._library
accelerator = accel.Accelerator()
gathered = accelerator.gather(np.array([accelerator.process_index], np.float32))
with open(f"rank{accelerator.process_index}.json", "w") as out:
    json.dump({"num_processes": accelerator.num_processes, "process_index": accelerator.process_index,
               "device": str(accelerator.device), "gathered": gathered.tolist(), "python": sys.executable,
               "package": accel.__file__, "library": accel._library.path}, out)
"""


def _clean_environment(**changes):
    """No ACCEL_* variable (ACCEL_LIBRARY, ACCEL_LAUNCHER, ...), no PYTHONPATH to the checkout, no pip
    settings (an index, find-links) from outside."""
    env = {key: value for key, value in os.environ.items()
           if key != "PYTHONPATH" and not key.startswith(("PIP_", "ACCEL_"))}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", **changes)
    return env


def _pip(python, *args, cwd, env):
    return subprocess.run([python, "-m", "pip", *args, "--no-index", "--no-cache-dir"], cwd=cwd, env=env,
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A fresh virtual environment of this interpreter that sees the system's packages."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(root)], check=True)
    return root


def _is_within(path, directory):
    return pathlib.Path(path).resolve().is_relative_to(directory)


@pytest.fixture(scope="module")
def installed(venv, tmp_path_factory):
    """venv with the package pip-installed into it."""
    # The library and the launcher to bundle are named at build time, as ctest builds them.
    installed = _pip(str(venv / "bin" / "python"), "install", str(PACKAGE_ROOT), cwd=tmp_path_factory.mktemp("pip"),
                     env=_clean_environment(ACCEL_LIBRARY=LIBRARY, ACCEL_LAUNCHER=LAUNCHER))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return venv


def test_pip_install_gives_a_package_that_finds_its_library_with_no_environment(installed, tmp_path):
    venv = installed
    python = str(venv / "bin" / "python")
    result = subprocess.run([python, "-c", USE], cwd=tmp_path, env=_clean_environment(), capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    site_packages = pathlib.Path(seen["package"]).parents[1]
    assert _is_within(site_packages, venv)
    assert seen["library"] == str(site_packages / "accel" / "libaccel.so.0")
    assert pathlib.Path(seen["library"]).read_bytes() == pathlib.Path(LIBRARY).read_bytes()
    assert seen["version"] == seen["distribution"] == accel.version()
    assert seen["loss"] == pytest.approx(14.0 / 3.0)
    assert seen["modules"] and all(_is_within(module, site_packages) for module in seen["modules"])
    from_checkout = [path for path in seen["mapped"] if path.startswith("/") and _is_within(path, REPOSITORY)]
    assert from_checkout == []

    # ACCEL_LIBRARY still comes first, and a bad one is still an error, not a fall-back to the bundled copy.
    chosen = subprocess.run([python, "-c", "import accel._library as l; print(l.path)"], cwd=tmp_path,
                            env=_clean_environment(ACCEL_LIBRARY=LIBRARY), capture_output=True, text=True)
    assert chosen.returncode == 0 and chosen.stdout.strip() == LIBRARY, chosen.stderr
    missing = str(tmp_path / "libaccel.so")
    refused = subprocess.run([python, "-c", "import accel"], cwd=tmp_path,
                             env=_clean_environment(ACCEL_LIBRARY=missing), capture_output=True, text=True)
    assert refused.returncode != 0 and f"{missing} (ACCEL_LIBRARY)" in refused.stderr


def _run(command, cwd, env):
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"{command}: {result.stdout}{result.stderr}"
    return result.stdout


def test_the_accel_command_is_installed_and_launches_a_script_with_nothing_set(installed, tmp_path):
    venv = installed
    bin_directory = venv / "bin"
    site_packages = next((venv / "lib").glob("python3*/site-packages"))
    launcher = site_packages / "accel" / "bin" / "accel"
    assert launcher.read_bytes() == pathlib.Path(LAUNCHER).read_bytes()
    linked = _run(["ldd", str(launcher)], tmp_path, _clean_environment())
    assert [line for line in linked.splitlines() if str(REPOSITORY) in line] == []

    # The environment activated (its bin first on PATH), the config where `accel config` writes it.
    activated = _clean_environment(PATH=f"{bin_directory}{os.pathsep}{os.environ['PATH']}",
                                   XDG_CONFIG_HOME=str(tmp_path / "config"))
    assert shutil.which("accel", path=activated["PATH"]) == str(bin_directory / "accel")
    assert f"- accel version: {accel.version()}\n" in _run(["accel", "env"], tmp_path, activated)
    _run(["accel", "config", "--num_processes", "2", "--cpu", "--main_process_port", "0"], tmp_path, activated)
    assert (tmp_path / "config" / "accel" / "default_config.yaml").is_file()
    (tmp_path / "train.py").write_text(TRAIN)
    _run(["accel", "launch", "train.py"], tmp_path, activated)
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert [(r["num_processes"], r["process_index"], r["device"], r["gathered"]) for r in ranks] == [
        (2, 0, "cpu", [0.0, 1.0]), (2, 1, "cpu", [0.0, 1.0])]
    for seen in ranks:
        assert seen["python"] == str(bin_directory / "python")
        assert _is_within(seen["package"], site_packages)
        assert seen["library"] == str(site_packages / "accel" / "libaccel.so.0")

    # Not activated: the command, run by its path, still runs .py programs with the environment's Python.
    for rank in (0, 1):
        (tmp_path / f"rank{rank}.json").unlink()
    not_activated = _clean_environment(XDG_CONFIG_HOME=str(tmp_path / "no_config"))
    _run([str(bin_directory / "accel"), "launch", "--nproc-per-node", "2", "--cpu", "--master-port", "0", "train.py"],
         tmp_path, not_activated)
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert [(r["num_processes"], r["process_index"], r["python"]) for r in ranks] == [
        (2, 0, str(bin_directory / "python")), (2, 1, str(bin_directory / "python"))]


def test_a_checkout_with_no_library_built_is_refused_naming_what_to_build(venv, tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / "capi" / "accel").mkdir(parents=True)
    shutil.copy(REPOSITORY / "capi" / "accel" / "version.h", checkout / "capi" / "accel")
    source = checkout / "bindings" / "python"
    shutil.copytree(PACKAGE_ROOT, source, ignore=shutil.ignore_patterns("__pycache__", "tests", "examples"))
    result = _pip(str(venv / "bin" / "python"), "wheel", "--wheel-dir", str(tmp_path / "wheels"), str(source),
                  cwd=tmp_path, env=_clean_environment())
    assert result.returncode != 0
    assert "no libaccel to bundle" in result.stderr
    assert str(checkout / "build" / "lib" / "libaccel.so.0") in result.stderr and "./dev build" in result.stderr
    assert not (tmp_path / "wheels").exists() or not list((tmp_path / "wheels").iterdir())


def _backend(package_root=PACKAGE_ROOT):
    spec = importlib.util.spec_from_file_location("accel_build", package_root / "build_backend" / "accel_build.py")
    backend = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(backend)
    return backend


def test_a_checkout_with_no_launcher_built_or_one_of_another_version_is_refused(tmp_path, monkeypatch):
    checkout = tmp_path / "checkout"
    (checkout / "capi" / "accel").mkdir(parents=True)
    shutil.copy(REPOSITORY / "capi" / "accel" / "version.h", checkout / "capi" / "accel")
    shutil.copytree(PACKAGE_ROOT / "build_backend", checkout / "bindings" / "python" / "build_backend")
    backend = _backend(checkout / "bindings" / "python")
    monkeypatch.setenv("ACCEL_LIBRARY", LIBRARY)
    monkeypatch.delenv("ACCEL_LAUNCHER", raising=False)
    with pytest.raises(backend.BuildError, match="no accel launcher to bundle: .*build/bin/accel does not exist.*"
                                                 "./dev build"):
        backend.build_wheel(str(tmp_path))
    other = tmp_path / "accel"
    other.write_text("#!/bin/sh\necho '- accel version: 0.0.1'\n")
    other.chmod(0o755)
    monkeypatch.setenv("ACCEL_LAUNCHER", str(other))
    with pytest.raises(backend.BuildError, match=f"is accel 0.0.1, the library {re.escape(accel.version())}"):
        backend.build_wheel(str(tmp_path))
    assert not list(tmp_path.glob("*.whl"))


def test_the_wheel_records_every_file_it_holds(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCEL_LIBRARY", LIBRARY)
    monkeypatch.setenv("ACCEL_LAUNCHER", LAUNCHER)
    backend = _backend()
    assert backend.get_requires_for_build_wheel() == []
    name = backend.build_wheel(str(tmp_path))
    assert name == f"accel-{accel.version()}-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(tmp_path / name) as wheel:
        held = {info.filename: wheel.read(info) for info in wheel.infolist()}
    dist_info = f"accel-{accel.version()}.dist-info"
    rows = list(csv.reader(io.StringIO(held[f"{dist_info}/RECORD"].decode())))
    assert sorted(row[0] for row in rows) == sorted(held)
    for path, digest, size in rows:
        if path == f"{dist_info}/RECORD":
            assert digest == size == ""
            continue
        expected = base64.urlsafe_b64encode(hashlib.sha256(held[path]).digest()).rstrip(b"=").decode()
        assert (digest, int(size)) == (f"sha256={expected}", len(held[path]))
    sources = {path.relative_to(PACKAGE_ROOT).as_posix() for path in (PACKAGE_ROOT / "accel").rglob("*.py")
               if "__pycache__" not in path.parts}
    assert "accel/utils/operations.py" in sources  # subpackages are in the wheel too
    assert {path for path in held if path.startswith("accel/")} == sources | {"accel/libaccel.so.0", "accel/bin/accel"}
    assert held["accel/bin/accel"] == pathlib.Path(LAUNCHER).read_bytes()
    assert {path for path in held if ".data/" in path} == {f"accel-{accel.version()}.data/scripts/accel"}
    assert held[f"accel-{accel.version()}.data/scripts/accel"].startswith(b"#!python\n")
    metadata = held[f"{dist_info}/METADATA"].decode()
    assert f"Version: {accel.version()}\n" in metadata and "Requires-Dist: cffi\n" in metadata

    metadata_directory = tmp_path / "metadata"
    metadata_directory.mkdir()
    assert backend.prepare_metadata_for_build_wheel(str(metadata_directory)) == dist_info
    assert (metadata_directory / dist_info / "METADATA").read_text() == metadata
