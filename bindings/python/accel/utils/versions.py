"""accel.utils.versions: Accelerate's compare_versions and is_torch_version (packaging's version rules, so
"1.13.0a0" is before "1.13.0")."""
import importlib.metadata
import operator

# Accelerate's STR_OPERATION_TO_FUNC: the comparisons compare_versions takes, by their symbol.
_OPERATIONS = {">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne, "<=": operator.le,
               "<": operator.lt}


def compare_versions(library_or_version, operation, requirement_version):
    """Whether library_or_version (an installed distribution's name, or a packaging Version) compares to
    requirement_version as operation (">", ">=", "==", "!=", "<=", "<") says. ValueError for another
    operation; importlib.metadata.PackageNotFoundError for a name that is not installed."""
    from packaging.version import parse
    if operation not in _OPERATIONS:
        raise ValueError(f"`operation` must be one of {list(_OPERATIONS)}, received {operation}")
    if isinstance(library_or_version, str):
        library_or_version = parse(importlib.metadata.version(library_or_version))
    return _OPERATIONS[operation](library_or_version, parse(requirement_version))


def is_torch_version(operation, version):
    """compare_versions of the imported torch's version (torch.__version__) to version."""
    import torch
    from packaging.version import parse
    return compare_versions(parse(str(torch.__version__)), operation, version)
