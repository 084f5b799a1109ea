"""`pip install bindings/python` as the README has it: into a fresh virtual environment (Debian's numpy and
cffi visible through --system-site-packages), offline (--no-index, no pip configuration), then used from
outside the checkout with no environment variable. Run by ctest as python.install."""
import base64
import csv
import hashlib
import importlib.util
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

import accel

PACKAGE_ROOT = pathlib.Path(__file__).resolve().parents[1]
REPOSITORY = PACKAGE_ROOT.parents[1]
LIBRARY = os.environ["ACCEL_LIBRARY"]

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


def _clean_environment(**changes):
    """No ACCEL_LIBRARY, no PYTHONPATH to the checkout, no pip settings (an index, find-links) from outside."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("ACCEL_LIBRARY", "PYTHONPATH") and not key.startswith("PIP_")}
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


def test_pip_install_gives_a_package_that_finds_its_library_with_no_environment(venv, tmp_path):
    python = str(venv / "bin" / "python")
    # The library to bundle is named at build time by ACCEL_LIBRARY, as ctest builds it.
    installed = _pip(python, "install", str(PACKAGE_ROOT), cwd=tmp_path, env=_clean_environment(ACCEL_LIBRARY=LIBRARY))
    assert installed.returncode == 0, installed.stdout + installed.stderr

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


def _backend():
    spec = importlib.util.spec_from_file_location("accel_build", PACKAGE_ROOT / "build_backend" / "accel_build.py")
    backend = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(backend)
    return backend


def test_the_wheel_records_every_file_it_holds(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCEL_LIBRARY", LIBRARY)
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
    assert {path for path in held if path.startswith("accel/")} == sources | {"accel/libaccel.so.0"}
    metadata = held[f"{dist_info}/METADATA"].decode()
    assert f"Version: {accel.version()}\n" in metadata and "Requires-Dist: cffi\n" in metadata

    metadata_directory = tmp_path / "metadata"
    metadata_directory.mkdir()
    assert backend.prepare_metadata_for_build_wheel(str(metadata_directory)) == dist_info
    assert (metadata_directory / dist_info / "METADATA").read_text() == metadata
