#include "train/torchscript/code_records.hpp"

#include <torch/csrc/jit/frontend/parser.h>
#include <torch/csrc/jit/frontend/source_range.h>
#include <torch/csrc/jit/frontend/tree_views.h>

#include <memory>
#include <set>
#include <tuple>

namespace accel::train {

namespace {

using torch::jit::Assign;
using torch::jit::ClassDef;

// Class-body names whose assignment the importer reads as a list of names, not as a constant.
const std::set<std::string> kListedNames = {"__parameters__", "__buffers__", "__forward_pre_hooks__",
                                            "__forward_hooks__"};

std::string superclass_of(const ClassDef& definition) {
  if (!definition.superclass().present()) return "";
  const auto expression = definition.superclass().get();
  return expression.kind() == torch::jit::TK_VAR ? torch::jit::Var(expression).name().name() : "";
}

// What is wrong with one statement of a class body, or "" when the importer can read it.
std::string statement_problem(const std::string& superclass, const torch::jit::Stmt& statement) {
  if (statement.kind() != torch::jit::TK_ASSIGN) return "";  // a def, or what the importer refuses itself
  const Assign assign(statement);
  if (assign.lhs_list().size() != 1 || assign.lhs().kind() != torch::jit::TK_VAR) return "";
  const std::string name = torch::jit::Var(assign.lhs()).name().name();
  const bool typed = assign.type().present();
  const bool valued = assign.rhs().present();
  if (superclass == "NamedTuple") return typed ? "" : "the field '" + name + "' has no type";
  if (superclass == "Enum") return valued ? "" : "the member '" + name + "' has no value";
  if (kListedNames.count(name) != 0) return valued ? "" : "'" + name + "' has no value";
  if (name == "__annotations__" || !valued || typed) return "";
  return "the constant '" + name + "' has no type (a class constant is written 'x : Final[T] = v')";
}

}  // namespace

std::optional<std::string> unimportable_class_statement(const std::string& code, const std::string& record) {
  try {
    torch::jit::Parser parser(std::make_shared<torch::jit::Source>(code, record, 1));
    auto& lexer = parser.lexer();
    // The lines the importer skips: a version line (older archives) and import lines.
    if (lexer.cur().kind == torch::jit::TK_IDENT && lexer.cur().text() == "op_version_set") {
      lexer.next();
      lexer.expect('=');
      lexer.expect(torch::jit::TK_NUMBER);
      lexer.expect(torch::jit::TK_NEWLINE);
    }
    while (lexer.cur().kind != torch::jit::TK_EOF) {
      while (lexer.nextIf(torch::jit::TK_IMPORT)) {
        while (lexer.cur().kind != torch::jit::TK_NEWLINE && lexer.cur().kind != torch::jit::TK_EOF) lexer.next();
        lexer.expect(torch::jit::TK_NEWLINE);
      }
      if (lexer.cur().kind == torch::jit::TK_DEF) {
        parser.parseFunction(/*is_method=*/false);
        continue;
      }
      if (lexer.cur().kind != torch::jit::TK_CLASS_DEF) return std::nullopt;  // the importer's own error
      const ClassDef definition(parser.parseClass());
      const std::string superclass = superclass_of(definition);
      for (const auto& statement : definition.body()) {
        const std::string problem = statement_problem(superclass, statement);
        if (!problem.empty()) {
          const auto place = statement.range().file_line_col();
          const std::string line = place ? " (line " + std::to_string(std::get<1>(*place)) + ")" : "";
          return "record '" + record + "', class " + definition.name().name() + line + ": " + problem;
        }
      }
    }
  } catch (const std::exception&) {
    return std::nullopt;  // does not parse: LibTorch's importer says so
  }
  return std::nullopt;
}

}  // namespace accel::train
