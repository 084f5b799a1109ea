"""read_headers.py: what it reads from headers, and each thing it refuses, naming the header and line."""
import pytest

from abi import Callback, Constant, CType, ForwardStruct, Function, Handle, HeaderError, Parameter
from conftest import REPOSITORY
from read_headers import read_api

THING = """
struct DLManagedTensor;
typedef struct accel_thing accel_thing_t;

#define ACCEL_DTYPE_TINY 3
#define ACCEL_VERSION_STRING "0.1"

/* Makes one. */
ACCEL_API ACCEL_NODISCARD int accel_thing_new(accel_thing_t **out, const char *const *names,
                                              struct DLManagedTensor *managed);
typedef int (*accel_visit_fn)(const void *data, size_t size, void *payload);
ACCEL_API void accel_thing_free(accel_thing_t *thing);
ACCEL_API const int64_t *accel_thing_shape(const accel_thing_t *thing, accel_visit_fn visit, double scale);
"""


def test_every_kind_of_declaration_in_the_header_order(write_capi):
    api = read_api(write_capi({"thing": THING}))
    assert [module.name for module in api.modules] == ["common", "thing"]
    common, thing = api.modules
    assert common.items == (Constant("ACCEL_OK", 0), Constant("ACCEL_ERR_INVALID_ARGUMENT", -1))
    assert thing.description == "the thing module, for a test."
    handle = CType("accel_thing_t", pointers=(False,))
    assert thing.items == (
        ForwardStruct("DLManagedTensor"),
        Handle("accel_thing_t", "accel_thing"),
        Constant("ACCEL_DTYPE_TINY", 3),
        Function("accel_thing_new", CType("int"), (
            Parameter("out", CType("accel_thing_t", pointers=(False, False))),
            Parameter("names", CType("char", True, (True, False))),
            Parameter("managed", CType("DLManagedTensor", pointers=(False,), struct=True))), nodiscard=True),
        Callback("accel_visit_fn", CType("int"), (
            Parameter("data", CType("void", True, (False,))), Parameter("size", CType("size_t")),
            Parameter("payload", CType("void", pointers=(False,))))),
        Function("accel_thing_free", CType("void"), (Parameter("thing", handle),), nodiscard=False),
        Function("accel_thing_shape", CType("int64_t", True, (False,)), (
            Parameter("thing", CType("accel_thing_t", True, (False,))), Parameter("visit", CType("accel_visit_fn")),
            Parameter("scale", CType("double"))), nodiscard=False),
    )
    assert thing.items[2].type == CType("int32_t")  # abi.CONSTANT_TYPES


def test_c_spellings_round_trip():
    assert CType("char", True, (True, False)).c("names") == "const char *const *names"
    assert CType("accel_tensor_t", False, (True, False)).c() == "accel_tensor_t *const *"
    assert CType("DLManagedTensor", pointers=(False, False), struct=True).c("out") == "struct DLManagedTensor **out"
    assert CType("int").c("code") == "int code"


def test_model_states_go_to_the_functions_of_their_comment_that_take_a_model(write_capi):
    api = read_api(write_capi({"model": """
        typedef struct accel_model accel_model_t;
        /* Both refuse. Model states: unprepared host, prepared torchscript -> ACCEL_ERR_INVALID_STATE;
         * prepared host -> ACCEL_ERR_UNSUPPORTED. */
        ACCEL_API ACCEL_NODISCARD int accel_model_a(accel_model_t *model);
        ACCEL_API void accel_model_free_all(void);
        ACCEL_API ACCEL_NODISCARD int accel_model_b(accel_model_t *const *models, size_t count);
        /* Another comment. */
        ACCEL_API ACCEL_NODISCARD int accel_model_c(accel_model_t *model);
        """}))
    states = {item.name: item.model_states for item in api.of(Function)}
    refused = {"unprepared host": "ACCEL_ERR_INVALID_STATE", "prepared torchscript": "ACCEL_ERR_INVALID_STATE",
               "prepared host": "ACCEL_ERR_UNSUPPORTED"}
    assert states == {"accel_model_a": refused, "accel_model_free_all": {}, "accel_model_b": refused,
                      "accel_model_c": {}}


@pytest.mark.parametrize("body,expected", [
    ("int accel_thing_plain(void);", "thing.h:11: accel_thing_plain is declared without ACCEL_API"),
    ("ACCEL_API int accel_thing_old();", "thing.h:11: declare a function without parameters as (void)"),
    ("ACCEL_API int accel_thing_anonymous(int);", "thing.h:11: every parameter needs a name"),
    ("ACCEL_API int accel_thing_f(float x);", "accel_thing_f uses float, which no header declares"),
    ("ACCEL_API int accel_thing_f(unsigned int x);", "no binding spells the type unsigned int"),
    ("ACCEL_API int accel_thing_f(accel_other_t *x);", "pycparser cannot read the headers"),
    ("typedef struct accel_pair { int a; } accel_pair_t;", "thing.h:11: only opaque handles"),
    ("#define ACCEL_FLAG (1 << 3)", "thing.h:11: write ACCEL_FLAG as one integer literal"),
    ("/* Model states: ready model -> ACCEL_ERR_INVALID_STATE. */\nACCEL_API int accel_thing_f(void);",
     "thing.h:11: unreadable model state clause 'ready model -> ACCEL_ERR_INVALID_STATE'"),
    ("/* Model states: prepared host -> ACCEL_ERR_INVALID_STATE. */\nACCEL_API int accel_thing_f(void);",
     "thing.h:11: model states named for no function that takes a model"),
])
def test_what_no_binding_could_spell_is_refused_naming_the_line(write_capi, body, expected):
    with pytest.raises(HeaderError) as error:
        read_api(write_capi({"thing": body}))
    assert expected in str(error.value)


def test_a_header_the_umbrella_does_not_include_is_refused(write_capi):
    capi = write_capi({"thing": "ACCEL_API void accel_thing_f(void);"})
    (capi / "accel" / "stray.h").write_text("/* accel: stray. */\n")
    with pytest.raises(HeaderError, match=r"capi/accel.h does not include accel/stray.h"):
        read_api(capi)


def test_the_real_headers():
    api = read_api(REPOSITORY / "capi")
    functions = {function.name: function for function in api.of(Function)}
    assert len(functions) > 150
    assert functions["accel_state_new"].nodiscard and not functions["accel_state_free"].nodiscard
    assert functions["accel_optimizer_new"].model_states == {"unprepared host": "ACCEL_ERR_INVALID_STATE",
                                                             "unprepared torchscript": "ACCEL_ERR_INVALID_STATE"}
    assert Constant("ACCEL_ERR_TIMEOUT", -7) in api.of(Constant)
