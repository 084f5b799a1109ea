"""Reads capi/accel.h and the headers it includes into an abi.Api.

pycparser (Debian's, shipped with python3-cffi) parses the declarations; it knows neither comments nor
the preprocessor, so this module first takes out what it cannot read, keeping every line where it was:
comments (kept aside: a module's description and the model states a function's comment names), the
directives (kept aside: the integer #define constants), what `#ifdef __cplusplus` guards, and the
ACCEL_API / ACCEL_NODISCARD markers (noted for each function). The headers go to pycparser as one
translation unit in the umbrella header's order, each after a line marker naming it, so every
declaration comes back with its header and line.
"""
import re

import pycparser
from pycparser import c_ast

from abi import (SCALAR_TYPES, Api, Callback, Constant, CType, ForwardStruct, Function, Handle, HeaderError, Module,
                 Parameter)
from model_states import refused_model_states

COMMENT = re.compile(r"/\*.*?\*/", re.S)
INTEGER_CONSTANT = re.compile(r"#\s*define\s+(ACCEL_\w+)\s+\(?\s*(-?\d+)\s*\)?\s*$")
EXPORTED = re.compile(r"\bACCEL_API\s+(ACCEL_NODISCARD\s+)?[^;(]*?\b(\w+)\s*\(")
# The <stdint.h> and <stddef.h> names the headers use, declared for pycparser (which reads no system header).
PREAMBLE = "".join(f"typedef int {name};\n" for name in SCALAR_TYPES if name.endswith("_t"))


def header_names(capi):
    """The module headers in the umbrella header's order; every capi/accel/*.h must be among them."""
    included = re.findall(r'^#include "accel/(\w+)\.h"', (capi / "accel.h").read_text(), re.M)
    missing = sorted(path.stem for path in (capi / "accel").glob("*.h") if path.stem not in included)
    if missing:
        raise HeaderError(f"capi/accel.h does not include {', '.join(f'accel/{m}.h' for m in missing)}")
    return included


def _blank(text):
    """The text with every character but line breaks turned into a space."""
    return re.sub(r"[^\n]", " ", text)


def _take_comments(text):
    """(text with comments blanked, [(first line, last line, comment text)])."""
    comments = []
    for match in COMMENT.finditer(text):
        first = text.count("\n", 0, match.start()) + 1
        comments.append((first, first + match.group(0).count("\n"), match.group(0)))
    return COMMENT.sub(lambda match: _blank(match.group(0)), text), comments


def _take_directives(text, header):
    """(text with directives and C++-only lines blanked, [(line, Constant)])."""
    lines, constants = text.split("\n"), []
    continued, depth, cplusplus_depth = False, 0, None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if continued or stripped.startswith("#"):
            words = [] if continued else stripped[1:].split()
            continued = stripped.endswith("\\")
            keyword = words[0] if words else ""
            if keyword in ("if", "ifdef", "ifndef"):
                depth += 1
                if words[1:] == ["__cplusplus"] and keyword == "ifdef" and cplusplus_depth is None:
                    cplusplus_depth = depth
            elif keyword == "endif":
                cplusplus_depth = None if depth == cplusplus_depth else cplusplus_depth
                depth -= 1
            elif keyword == "define" and cplusplus_depth is None and words[1].startswith("ACCEL_"):
                constant = INTEGER_CONSTANT.match(stripped)
                if constant:
                    constants.append((number, Constant(constant.group(1), int(constant.group(2)))))
                elif re.fullmatch(r"[\d\s()+\-*/<>|&~]+", " ".join(words[2:])):
                    # An arithmetic value: a constant all the same, which the bindings would silently lack.
                    raise HeaderError(f"{header}:{number}: write {words[1]} as one integer literal")
            lines[number - 1] = _blank(line)
        elif cplusplus_depth is not None:
            lines[number - 1] = _blank(line)
    return "\n".join(lines), constants


def _take_markers(text, header):
    """(text without ACCEL_API and ACCEL_NODISCARD, {function: whether ACCEL_NODISCARD})."""
    exported = {}
    for match in EXPORTED.finditer(text):
        if match.group(2) in exported:
            raise HeaderError(f"{header}: {match.group(2)} is declared twice")
        exported[match.group(2)] = bool(match.group(1))
    return re.sub(r"\bACCEL_(API|NODISCARD)\b", lambda match: _blank(match.group(0)), text), exported


def _c_type(node, where):
    """The CType of a pycparser type node (PtrDecl and TypeDecl levels down to the base)."""
    pointers = []
    while isinstance(node, c_ast.PtrDecl):
        pointers.append("const" in node.quals)
        node = node.type
    if not isinstance(node, c_ast.TypeDecl):
        raise HeaderError(f"{where}: only plain and pointer types cross the ABI, not {type(node).__name__}")
    base = node.type
    if isinstance(base, c_ast.Struct):
        name, struct = base.name, True
    elif isinstance(base, c_ast.IdentifierType) and len(base.names) == 1:
        name, struct = base.names[0], False
    else:
        spelled = " ".join(getattr(base, "names", [type(base).__name__]))
        raise HeaderError(f"{where}: no binding spells the type {spelled}")
    return CType(name, "const" in node.quals, tuple(reversed(pointers)), struct)


def _parameters(function_type, where):
    """The named parameters of a FuncDecl; `(void)` is none, `()` (no prototype) is refused."""
    if function_type.args is None:
        raise HeaderError(f"{where}: declare a function without parameters as (void)")
    parameters = []
    for node in function_type.args.params:
        if isinstance(node, c_ast.Typename) and _c_type(node.type, where) == CType("void"):
            continue
        if not isinstance(node, c_ast.Decl) or not node.name:
            raise HeaderError(f"{where}: every parameter needs a name (the bindings use it)")
        parameters.append(Parameter(node.name, _c_type(node.type, f"{where}, parameter {node.name}")))
    return tuple(parameters)


def _declaration(node, where, exported):
    """The abi item of one top-level pycparser node."""
    if isinstance(node, c_ast.Typedef) and isinstance(node.type, c_ast.TypeDecl) \
            and isinstance(node.type.type, c_ast.Struct) and node.type.type.decls is None:
        return Handle(node.name, node.type.type.name)
    if isinstance(node, c_ast.Typedef) and isinstance(node.type, c_ast.PtrDecl) \
            and isinstance(node.type.type, c_ast.FuncDecl):
        function_type = node.type.type
        return Callback(node.name, _c_type(function_type.type, where), _parameters(function_type, where))
    if isinstance(node, c_ast.Decl) and node.name is None and isinstance(node.type, c_ast.Struct) \
            and node.type.decls is None:
        return ForwardStruct(node.type.name)
    if isinstance(node, c_ast.Decl) and isinstance(node.type, c_ast.FuncDecl):
        if node.name not in exported:
            raise HeaderError(f"{where}: {node.name} is declared without ACCEL_API")
        return Function(node.name, _c_type(node.type.type, where), _parameters(node.type, where), exported[node.name])
    raise HeaderError(f"{where}: only opaque handles, callback typedefs, forward-declared structs, functions "
                      f"and integer #defines belong in a public header (capi/README.md: the bindings are made of them)")


def _check_types(api_items, where_of):
    """Every type a declaration uses is a scalar, a handle, a callback or a forward-declared struct."""
    known = set(SCALAR_TYPES)
    for item in api_items:
        if isinstance(item, (Handle, Callback)):
            known.add(item.name)
        elif isinstance(item, ForwardStruct):
            known.add(item.tag)
        if isinstance(item, (Callback, Function)):
            for c_type in [item.result] + [parameter.type for parameter in item.parameters]:
                if c_type.base not in known:
                    raise HeaderError(f"{where_of[item]}: {item.name} uses {c_type.base}, which no header declares "
                                      f"before it and no binding knows")


def _description(comments, header):
    """The first sentence of the header's opening comment, after "accel: "."""
    if not comments or comments[0][0] != 1:
        raise HeaderError(f"{header}: the header must open with a comment describing it")
    text = " ".join(line.strip().lstrip("/*").strip() for line in comments[0][2].splitlines()).strip()
    text = text[:-2].strip() if text.endswith("*/") else text
    text = re.sub(r"^accel:\s*", "", text)
    return re.split(r"(?<=\.)\s", text, maxsplit=1)[0]


def _comment_before(comments, line):
    """The comment a declaration at this line belongs to: the last one that ends before it (or None)."""
    before = [comment for comment in comments if comment[1] < line]
    return before[-1] if before else None


def read_api(capi):
    """The Api of capi/accel.h; HeaderError says what in which header cannot be read."""
    sources, cleaned = {}, []
    for name in header_names(capi):
        header = f"accel/{name}.h"
        text, comments = _take_comments((capi / header).read_text())
        text, constants = _take_directives(text, header)
        text, exported = _take_markers(text, header)
        sources[header] = (name, comments, constants, exported)
        cleaned.append(f'# 1 "{header}"\n{text}')
    try:
        unit = pycparser.CParser().parse(PREAMBLE + "\n".join(cleaned), "<preamble>")
    except pycparser.c_parser.ParseError as error:
        raise HeaderError(f"pycparser cannot read the headers: {error}") from None

    declared = {header: [] for header in sources}
    for node in unit.ext:
        header = node.coord.file
        if header in sources:
            where = f"{header}:{node.coord.line}"
            declared[header].append((node.coord.line, _declaration(node, where, sources[header][3])))

    modules, where_of = [], {}
    for header, (name, comments, constants, exported) in sources.items():
        items = sorted(declared[header] + constants, key=lambda pair: pair[0])
        missing = sorted(set(exported) - {item.name for _, item in items if isinstance(item, Function)})
        if missing:
            raise HeaderError(f"{header}: ACCEL_API {', '.join(missing)}: not a function declaration")
        items = _with_model_states(items, comments, header)
        where_of.update({item: f"{header}:{line}" for line, item in items})
        modules.append(Module(name, _description(comments, header), tuple(item for _, item in items)))
    _check_types([item for module in modules for item in module.items], where_of)
    return Api(tuple(modules))


def _with_model_states(items, comments, header):
    """The items with each function's model states, from the comment that documents it. A comment naming
    model states must document at least one function that takes a model."""
    applied = {}
    for index, (line, item) in enumerate(items):
        if not isinstance(item, Function):
            continue
        comment = _comment_before(comments, line)
        if comment is None:
            continue
        states = refused_model_states(comment[2], f"{header}:{comment[0]}")
        applied.setdefault(comment, False)
        if states and any(parameter.type.base == "accel_model_t" for parameter in item.parameters):
            items[index] = (line, Function(item.name, item.result, item.parameters, item.nodiscard, states))
            applied[comment] = True
    for comment, used in applied.items():
        if not used and refused_model_states(comment[2], f"{header}:{comment[0]}"):
            raise HeaderError(f"{header}:{comment[0]}: model states named for no function that takes a model")
    return items
