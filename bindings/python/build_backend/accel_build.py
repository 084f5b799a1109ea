"""The PEP 517 build backend of the accel package: standard library only, so that `pip install
bindings/python` needs nothing from an index (pyproject.toml: `requires = []`).

The wheel is the package's Python files plus the built libaccel, bundled as accel/libaccel.so.0, where
accel/_library.py looks when ACCEL_LIBRARY is unset. The library comes from ACCEL_LIBRARY at build time,
else from build/lib/ of the checkout this directory sits in (what `./dev build` makes). Its version,
asked of the library itself, is the package's: the wheel carries that library and no other. LibTorch is
not bundled: libaccel goes on linking the one it was built against, where it is installed.

The wheel also carries the built launcher (the `accel` command: accel launch, accel config, ...) as
accel/bin/accel, from ACCEL_LAUNCHER at build time, else build/bin/accel of the checkout; it must be of
the library's version. Its script, accel_command.py, becomes the environment's `accel` command (the
wheel's scripts), which runs that launcher with .py programs run by the environment's Python. The
launcher links no libaccel and no LibTorch, only the C++ runtime and libyaml-cpp, where they are
installed.

Names are those of PEP 517: get_requires_for_build_wheel / _sdist, prepare_metadata_for_build_wheel,
build_wheel, build_sdist.
"""
import base64
import csv
import ctypes
import hashlib
import io
import os
import pathlib
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import tomllib
import zipfile

SOURCE = pathlib.Path(__file__).resolve().parents[1]  # bindings/python
PACKAGE = "accel"
SONAME = "libaccel.so.0"
LAUNCHER = "bin/accel"  # in the package
COMMAND = "accel"  # the script's name in the environment's bin directory
# Zip entries carry a date; a fixed one keeps two builds of the same inputs byte-identical.
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


class BuildError(Exception):
    """A wheel that cannot be made as asked, with the reason and what to do about it."""


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    version = _version(_library())
    dist_info = _dist_info_name(version)
    os.makedirs(os.path.join(metadata_directory, dist_info))
    for name, data in _dist_info_files(version).items():
        with open(os.path.join(metadata_directory, dist_info, name), "wb") as out:
            out.write(data)
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    library = _library()
    version = _version(library)
    launcher = _launcher(version)
    name = f"{PACKAGE}-{version}-py3-none-{_platform_tag()}.whl"
    dist_info = _dist_info_name(version)
    entries = [(path.relative_to(SOURCE).as_posix(), path.read_bytes(), 0o644) for path in _package_files()]
    entries.append((f"{PACKAGE}/{SONAME}", library.read_bytes(), 0o755))
    entries.append((f"{PACKAGE}/{LAUNCHER}", launcher.read_bytes(), 0o755))
    entries.append((f"{PACKAGE}-{version}.data/scripts/{COMMAND}",
                    (SOURCE / "build_backend" / "accel_command.py").read_bytes(), 0o755))
    entries += [(f"{dist_info}/{file}", data, 0o644) for file, data in _dist_info_files(version).items()]
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for path, data, _ in entries:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        writer.writerow([path, f"sha256={digest}", len(data)])
    writer.writerow([f"{dist_info}/RECORD", "", ""])
    entries.append((f"{dist_info}/RECORD", record.getvalue().encode(), 0o644))
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED, compresslevel=1) as wheel:
        for path, data, mode in entries:
            info = zipfile.ZipInfo(path, ZIP_DATE)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    return name


def build_sdist(sdist_directory, config_settings=None):
    """The binding's sources, no library and no launcher: a wheel built from it needs ACCEL_LIBRARY and
    ACCEL_LAUNCHER. Its version is that of the library found now, as the wheel's would be."""
    version = _version(_library())
    top = f"{PACKAGE}-{version}"
    files = [SOURCE / "pyproject.toml", SOURCE / "README.md", *_package_files(),
             *sorted((SOURCE / "build_backend").glob("*.py"))]
    name = f"{top}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as sdist:
        for path in files:
            _add_to_tar(sdist, f"{top}/{path.relative_to(SOURCE).as_posix()}", path.read_bytes())
        _add_to_tar(sdist, f"{top}/PKG-INFO", _metadata(version))
    return name


def _add_to_tar(archive, path, data):
    info = tarfile.TarInfo(path)
    info.size = len(data)
    info.mode = 0o644
    archive.addfile(info, io.BytesIO(data))


def _package_files():
    """accel/'s Python files (no bytecode, and no library copied in by hand: the wheel adds its own)."""
    return sorted(path for path in (SOURCE / PACKAGE).rglob("*.py") if "__pycache__" not in path.parts)


def _library():
    """The libaccel file to bundle, its symbolic links resolved."""
    return _built_file("ACCEL_LIBRARY", "libaccel", "a built libaccel.so", f"build/lib/{SONAME}", "accel").resolve()


def _built_file(variable, thing, built, relative, target):
    """The file to bundle: the one the environment variable names, else relative (to the checkout this
    directory sits in), which `cmake --build build --target <target>` makes. The library and the launcher
    are found alike; a BuildError says how to name or build one that is missing. thing: what the messages
    call it; built: what the variable should name."""
    explicit = os.environ.get(variable)
    if explicit:
        path = pathlib.Path(explicit)
        if not path.is_file():
            raise BuildError(f"{variable} is {explicit}, which is not a file: set it to {built}, or unset it to "
                             f"bundle {relative} of this checkout")
        return path
    repository = SOURCE.parents[1]
    if not (repository / "capi" / "accel" / "version.h").is_file():
        raise BuildError(f"no {thing} to bundle: {SOURCE} is not inside an accel checkout, and {variable} is "
                         f"unset; set {variable} to the path of {built}")
    path = repository / relative
    if not path.is_file():
        raise BuildError(f"no {thing} to bundle: {path} does not exist. Build it first (`./dev build` in "
                         f"{repository}, or `cmake --build build --target {target}`), or set {variable} to the "
                         f"path of {built}")
    return path


def _launcher(version):
    """The built accel launcher to bundle, its symbolic links resolved, once it has run here and said it is
    of the library's version."""
    path = _built_file("ACCEL_LAUNCHER", "accel launcher", "a built accel launcher", "build/bin/accel",
                       "accel_cli").resolve()
    launched = _launcher_version(path)
    if launched != version:
        raise BuildError(f"the launcher {path} is accel {launched}, the library {version}: bundle a launcher and a "
                         "library of the same build")
    return path


def _launcher_version(launcher):
    """The version `accel env` prints: running it also proves that the launcher runs here, with its shared
    libraries. It is given a Python (so that it does not look for one) and no config file to read."""
    with tempfile.TemporaryDirectory() as no_config:
        environment = {"PATH": os.environ.get("PATH", os.defpath), "ACCEL_PYTHON": sys.executable,
                       "XDG_CONFIG_HOME": no_config, "HOME": no_config}
        try:
            result = subprocess.run([str(launcher), "env"], env=environment, capture_output=True, text=True,
                                    timeout=60)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise BuildError(f"{launcher} cannot be run, so it cannot be bundled: {error}") from None
    prefix = "- accel version: "
    versions = [line[len(prefix):].strip() for line in result.stdout.splitlines() if line.startswith(prefix)]
    if result.returncode != 0 or len(versions) != 1:
        raise BuildError(f"{launcher} env did not say its version (exit code {result.returncode}), so it is not a "
                         f"launcher to bundle: {result.stderr.strip() or result.stdout.strip()}")
    return versions[0]


def _version(library):
    """The library's own "MAJOR.MINOR.PATCH" (loading it also proves that it loads, here, with its LibTorch)."""
    try:
        loaded = ctypes.CDLL(str(library), mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as error:
        raise BuildError(f"{library} cannot be loaded, so it cannot be bundled: {error}") from None
    loaded.accel_version_string.restype = ctypes.c_char_p
    return loaded.accel_version_string().decode()


def _platform_tag():
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def _dist_info_name(version):
    return f"{PACKAGE}-{version}.dist-info"


def _dist_info_files(version):
    wheel = ("Wheel-Version: 1.0\n"
             "Generator: accel_build\n"
             "Root-Is-Purelib: false\n"
             f"Tag: py3-none-{_platform_tag()}\n")
    return {"METADATA": _metadata(version), "WHEEL": wheel.encode(), "top_level.txt": f"{PACKAGE}\n".encode()}


def _metadata(version):
    """Core metadata 2.1 from pyproject.toml's [project] table (the fields it uses) and the version."""
    project = tomllib.loads((SOURCE / "pyproject.toml").read_text())["project"]
    if project["name"] != PACKAGE or project.get("dynamic") != ["version"]:
        raise BuildError("pyproject.toml: this backend builds the package 'accel' with a dynamic version only")
    lines = ["Metadata-Version: 2.1", f"Name: {PACKAGE}", f"Version: {version}",
             f"Summary: {project['description']}", f"Requires-Python: {project['requires-python']}"]
    lines += [f"Requires-Dist: {requirement}" for requirement in project.get("dependencies", [])]
    lines += ["Description-Content-Type: text/markdown", ""]
    return ("\n".join(lines) + "\n" + (SOURCE / project["readme"]).read_text()).encode()
