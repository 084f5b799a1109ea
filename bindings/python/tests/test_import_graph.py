"""The accel package's layering: no module imports, even inside a function, a module that (through others)
imports it back, and no file is too long to read as one job. Read from the sources with ast, so a circle held
together by function-level imports is caught although importing works."""
import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "accel"
MAX_LINES = 500


def _module_name(path):
    parts = ("accel",) + path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules():
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imported(name, path, modules):
    """The package modules the file imports, wherever in it the import statement stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    ancestors = {".".join(name.split(".")[:end]) for end in range(1, name.count(".") + 1)}
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # `from . import x` imports submodule x where x names one; any other name is the package's own.
            submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
            targets = submodules + ([base] if len(submodules) < len(node.names) else [])
        else:
            continue
        for target in targets:
            # Importing a.b.c runs a.b first; the importer's own packages have run already, unless named.
            parts = target.split(".")
            for prefix in (".".join(parts[:end]) for end in range(1, len(parts) + 1)):
                if prefix in modules and prefix != name and (prefix == target or prefix not in ancestors):
                    found.add(prefix)
    return found


def _graph():
    modules = _modules()
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def _cycle(graph):
    """One cycle of graph as a list of modules (first repeated last), or None."""
    state = {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return stack[stack.index(target):] + [target]
            if target not in state:
                cycle = visit(target, stack)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node, [])
            if cycle:
                return cycle
    return None


def test_the_check_sees_function_level_and_relative_imports_and_circles():
    graph = _graph()
    assert "accel.accelerator" in graph["accel"]
    assert "accel.utils.operations" in graph["accel.utils"]
    assert "accel._torch_prepare" in graph["accel.data_loader"]  # inside prepare_data_loader
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_package_modules_import_no_circle():
    cycle = _cycle(_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_no_module_is_too_long():
    long = {str(path.relative_to(PACKAGE.parent)): count for path in PACKAGE.rglob("*.py")
            if (count := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines: {long}"
