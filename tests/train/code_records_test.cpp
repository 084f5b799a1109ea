#include "train/torchscript/code_records.hpp"

#include <gtest/gtest.h>

#include <string>

namespace accel::train {
namespace {

// What torch.jit.save writes for a Linear (LibTorch 1.13's printer).
const std::string kLinear =
    "class Linear(Module):\n"
    "  __parameters__ = [\"weight\", \"bias\", ]\n"
    "  __buffers__ = []\n"
    "  weight : Tensor\n"
    "  bias : Tensor\n"
    "  training : bool\n"
    "  __annotations__[\"0\"] = __torch__.torch.nn.modules.linear.Linear\n"
    "  out_features : Final[int] = 2\n"
    "  def forward(self: __torch__.torch.nn.modules.linear.Linear,\n"
    "    input: Tensor) -> Tensor:\n"
    "    return torch.linear(input, self.weight, self.bias)\n"
    "def relu(input: Tensor) -> Tensor:\n"
    "  return torch.relu(input)\n";

std::string with_line(const std::string& line) {
  std::string code = kLinear;
  code.insert(code.find("  weight : Tensor"), line + "\n");
  return code;
}

TEST(CodeRecords, WhatTorchWritesIsImportable) {
  EXPECT_EQ(unimportable_class_statement(kLinear, "code/linear.py"), std::nullopt);
  EXPECT_EQ(unimportable_class_statement("op_version_set = 1\nimport __torch__\n" + kLinear, "code/linear.py"), std::nullopt);
}

// The statement fuzz_model_load found: "__parameters__" with one letter changed is a class constant
// without its type, which LibTorch 1.13's importer read past its end.
TEST(CodeRecords, AClassConstantWithoutItsTypeIsFound) {
  const auto problem = unimportable_class_statement(with_line("  __parametert__ = []"), "code/linear.py");
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(*problem, "record 'code/linear.py', class Linear (line 4): the constant '__parametert__' has no type "
                      "(a class constant is written 'x : Final[T] = v')");
}

TEST(CodeRecords, AListedNameWithoutItsValueIsFound) {
  const auto problem = unimportable_class_statement(with_line("  __forward_hooks__ : List[str]"), "c.py");
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("'__forward_hooks__' has no value"), std::string::npos) << *problem;
}

TEST(CodeRecords, NamedTupleFieldsNeedTypesAndEnumMembersValues) {
  EXPECT_EQ(unimportable_class_statement("class P(NamedTuple):\n  x : int\n  y : float = 1.0\n", "p.py"), std::nullopt);
  ASSERT_TRUE(unimportable_class_statement("class P(NamedTuple):\n  x = 1\n", "p.py").has_value());
  EXPECT_EQ(unimportable_class_statement("class E(Enum):\n  A = 1\n  B = 2\n", "e.py"), std::nullopt);
  const auto problem = unimportable_class_statement("class E(Enum):\n  A : int\n", "e.py");
  ASSERT_TRUE(problem.has_value());
  EXPECT_NE(problem->find("the member 'A' has no value"), std::string::npos) << *problem;
}

// Text that does not parse is left to LibTorch's importer, which reports it.
TEST(CodeRecords, TextThatDoesNotParseIsLeftToTheImporter) {
  EXPECT_EQ(unimportable_class_statement("class (:\n", "bad.py"), std::nullopt);
  EXPECT_EQ(unimportable_class_statement(std::string("\xff\x00\x01", 3), "bad.py"), std::nullopt);
}

}  // namespace
}  // namespace accel::train
