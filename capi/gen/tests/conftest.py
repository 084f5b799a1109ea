"""The generator's modules import one another by name, as generate.py runs them: put capi/gen on the path,
and give the tests a way to write a small header set."""
import pathlib
import sys
import textwrap

import pytest

GEN = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(GEN))
REPOSITORY = GEN.parents[1]


def header(name, body):
    """A module header as the real ones are laid out: opening comment, guard, C++ block."""
    guard = f"ACCEL_{name.upper()}_H"
    return (f"/* accel: the {name} module, for a test. More text. */\n#ifndef {guard}\n#define {guard}\n\n"
            f'#include "accel/common.h"\n\n#ifdef __cplusplus\nextern "C" {{\n#endif\n\n'
            f"{textwrap.dedent(body).strip()}\n\n#ifdef __cplusplus\n}}\n#endif\n#endif\n")


COMMON = """
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define ACCEL_API __attribute__((visibility("default")))
#define ACCEL_NODISCARD __attribute__((warn_unused_result))
#else
#define ACCEL_API
#define ACCEL_NODISCARD
#endif

#define ACCEL_OK 0
#define ACCEL_ERR_INVALID_ARGUMENT (-1) /* a comment after the value */
"""


@pytest.fixture
def write_capi(tmp_path):
    """write_capi({"module": body, ...}) -> a capi/ folder with those headers (after common.h)."""
    def write(modules):
        capi = tmp_path / "capi"
        (capi / "accel").mkdir(parents=True)
        (capi / "accel" / "common.h").write_text(header("common", COMMON).replace('#include "accel/common.h"\n', ""))
        for name, body in modules.items():
            (capi / "accel" / f"{name}.h").write_text(header(name, body))
        includes = "".join(f'#include "accel/{name}.h"\n' for name in ["common", *modules])
        (capi / "accel.h").write_text(f"/* umbrella */\n#ifndef ACCEL_H\n#define ACCEL_H\n{includes}#endif\n")
        return capi
    return write
