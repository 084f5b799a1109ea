//! The declarations of src/<module>.rs against capi/accel/<module>.h: the same handle types, callback
//! types, integer constants and functions, in the same order, each function and callback with the same
//! parameter names and types once C types are spelt as Rust ones (`const char *` is `*const c_char`,
//! `accel_state_t **` is `*mut *mut accel_state_t`, `int64_t` is `i64`, `size_t` is `usize`, ...). A
//! header that changes without its module, or the reverse, fails here; so does a symbol of
//! capi/symbols.txt that no module declares.
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Declaration {
    Handle(String),
    Constant(String, i64),
    Callback(String, String),
    Function(String, String),
}

fn capi() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../capi")
}

fn module_source(module: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(format!("{}.rs", module));
    fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {}", path.display(), error))
}

/// The modules in the umbrella header's order: `#include "accel/<module>.h"`.
fn header_modules() -> Vec<String> {
    let umbrella = fs::read_to_string(capi().join("accel.h")).expect("capi/accel.h");
    umbrella
        .lines()
        .filter_map(|line| line.trim().strip_prefix("#include \"accel/"))
        .map(|rest| rest.trim_end_matches(".h\"").to_string())
        .collect()
}

fn header_source(module: &str) -> String {
    fs::read_to_string(capi().join("accel").join(format!("{}.h", module))).expect("header")
}

fn strip_block_comments(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("/*") {
        out.push_str(&rest[..start]);
        rest = rest[start..].find("*/").map_or("", |end| &rest[start + end + 2..]);
    }
    out.push_str(rest);
    out
}

fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn parse_integer(text: &str) -> Option<i64> {
    text.trim().trim_start_matches('(').trim_end_matches(')').parse().ok()
}

/// Splits at the commas outside parentheses and angle brackets.
fn split_top_level(text: &str) -> Vec<String> {
    let (mut parts, mut current, mut depth) = (Vec::new(), String::new(), 0i32);
    for c in text.chars() {
        match c {
            '(' | '<' => depth += 1,
            ')' => depth -= 1,
            '>' if !current.ends_with('-') => depth -= 1, // not the arrow of a result type
            ',' if depth == 0 => {
                parts.push(squash(&current));
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.trim().is_empty() {
        parts.push(squash(&current));
    }
    parts
}

// ---- C side ---------------------------------------------------------------------------------------

/// A C type (qualifiers, base, stars) as Rust spells it.
fn rust_type_of_c(tokens: &[String]) -> String {
    let stars = tokens.iter().position(|token| token == "*").unwrap_or(tokens.len());
    let base_words: Vec<&str> = tokens[..stars].iter().map(String::as_str).filter(|word| *word != "const" && *word != "struct").collect();
    let mut pointee_is_const = tokens[..stars].iter().any(|token| token == "const");
    let base = match base_words.as_slice() {
        ["void"] => "c_void",
        ["char"] => "c_char",
        ["int"] => "c_int",
        ["int32_t"] => "i32",
        ["int64_t"] => "i64",
        ["uint64_t"] => "u64",
        ["size_t"] => "usize",
        ["double"] => "f64",
        [name] if name.starts_with("accel_") || name.starts_with("DL") => name,
        other => panic!("no Rust spelling for the C type {:?}: add it to the check", other),
    };
    let mut rust = base.to_string();
    let mut rest = tokens[stars..].iter().peekable();
    while let Some(token) = rest.next() {
        assert_eq!(token, "*", "unexpected {:?} in C type {:?}", token, tokens);
        rust = format!("*{} {}", if pointee_is_const { "const" } else { "mut" }, rust);
        pointee_is_const = rest.peek().map_or(false, |next| *next == "const");
        if pointee_is_const {
            rest.next();
        }
    }
    if stars == tokens.len() && base == "c_void" {
        return String::new(); // `void` result
    }
    rust
}

fn c_tokens(text: &str) -> Vec<String> {
    text.replace('*', " * ").split_whitespace().map(str::to_string).collect()
}

/// "TYPE NAME" -> "NAME: RUST_TYPE".
fn c_parameter(text: &str) -> String {
    let mut tokens = c_tokens(text);
    let name = tokens.pop().expect("a parameter name");
    format!("{}: {}", name, rust_type_of_c(&tokens))
}

/// "(PARAMS) -> RESULT" from the C parameter list and result type.
fn c_signature(result: &[String], parameters: &str) -> String {
    let parameters = if parameters.trim() == "void" { Vec::new() } else { split_top_level(parameters) };
    let parameters: Vec<String> = parameters.iter().map(|parameter| c_parameter(parameter)).collect();
    let result = rust_type_of_c(result);
    let arrow = if result.is_empty() { String::new() } else { format!(" -> {}", result) };
    format!("({}){}", parameters.join(", "), arrow)
}

fn c_statement(statement: &str) -> Option<Declaration> {
    let statement = squash(statement);
    if let Some(rest) = statement.strip_prefix("typedef struct ") {
        let words: Vec<&str> = rest.split(' ').collect();
        return Some(Declaration::Handle(words.last()?.to_string()));
    }
    if let Some(rest) = statement.strip_prefix("typedef ") {
        // typedef RESULT (*NAME)(PARAMS)
        let open = rest.find("(*")?;
        let close = open + rest[open..].find(')')?;
        let name = rest[open + 2..close].trim().to_string();
        let parameters = rest[close + 1..].trim().trim_start_matches('(').trim_end_matches(')');
        return Some(Declaration::Callback(name, c_signature(&c_tokens(&rest[..open]), parameters)));
    }
    if statement.contains("ACCEL_API") {
        let text = statement.replace("ACCEL_API", "").replace("ACCEL_NODISCARD", "");
        let open = text.find('(')?;
        let mut head = c_tokens(&text[..open]);
        let name = head.pop()?;
        let parameters = &text[open + 1..text.rfind(')')?];
        return Some(Declaration::Function(name, c_signature(&head, parameters)));
    }
    None // a forward declaration of a DLPack struct
}

fn header_declarations(text: &str) -> Vec<Declaration> {
    let mut declarations = Vec::new();
    let mut pending = String::new();
    let mut in_directive = false;
    for line in strip_block_comments(text).lines() {
        let line = line.trim();
        // A directive goes on while its lines end with a backslash (ACCEL_VERSION_STRING).
        let continued = in_directive;
        in_directive = (continued || line.starts_with('#')) && line.ends_with('\\');
        if continued {
            continue;
        }
        if let Some(definition) = line.strip_prefix("#define ") {
            let mut words = definition.splitn(2, ' ');
            let (name, value) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
            if let Some(value) = parse_integer(value) {
                declarations.push(Declaration::Constant(name.to_string(), value));
            }
            continue;
        }
        if line.starts_with('#') || line == "extern \"C\" {" || line == "}" {
            continue;
        }
        pending.push(' ');
        pending.push_str(line);
        while let Some(end) = pending.find(';') {
            declarations.extend(c_statement(&pending[..end]));
            pending = pending[end + 1..].to_string();
        }
    }
    declarations
}

// ---- Rust side ------------------------------------------------------------------------------------

/// "name: TYPE, ..." as written in Rust, spaces normalised.
fn rust_parameters(text: &str) -> String {
    split_top_level(text)
        .iter()
        .map(|parameter| {
            let (name, ty) = parameter.split_once(':').unwrap_or_else(|| panic!("parameter without a type: {}", parameter));
            format!("{}: {}", name.trim(), squash(ty))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// "(PARAMS) -> RESULT" of "NAME(PARAMS) -> RESULT", from the name's end on.
fn rust_signature(after_name: &str) -> String {
    let open = after_name.find('(').expect("(");
    let mut depth = 0;
    let close = after_name
        .char_indices()
        .skip(open)
        .find(|&(_, c)| {
            depth += match c {
                '(' => 1,
                ')' => -1,
                _ => 0,
            };
            depth == 0
        })
        .expect(")")
        .0;
    let result = after_name[close + 1..].trim().trim_start_matches("->").trim();
    let arrow = if result.is_empty() { String::new() } else { format!(" -> {}", squash(result)) };
    format!("({}){}", rust_parameters(&after_name[open + 1..close]), arrow)
}

fn rust_statement(statement: &str) -> Option<Declaration> {
    let statement = squash(statement);
    if let Some(rest) = statement.strip_prefix("opaque!(") {
        return Some(Declaration::Handle(rest.trim_end_matches(')').to_string()));
    }
    if let Some(rest) = statement.strip_prefix("pub const ") {
        let (name, value) = rest.split_once(':')?;
        let value = value.split_once('=')?.1;
        return Some(Declaration::Constant(name.trim().to_string(), parse_integer(value)?));
    }
    if let Some(rest) = statement.strip_prefix("pub type ") {
        let (name, ty) = rest.split_once('=')?;
        let inner = ty.trim().strip_prefix("Option<unsafe extern \"C\" fn")?.strip_suffix('>')?;
        return Some(Declaration::Callback(name.trim().to_string(), rust_signature(inner)));
    }
    if let Some(rest) = statement.strip_prefix("pub fn ") {
        let open = rest.find('(')?;
        return Some(Declaration::Function(rest[..open].trim().to_string(), rust_signature(&rest[open..])));
    }
    None // `use` lines
}

fn module_declarations(text: &str) -> Vec<Declaration> {
    let code: String = text
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .map(|line| line.trim())
        .filter(|line| *line != "extern \"C\" {" && *line != "}")
        .collect::<Vec<_>>()
        .join(" ");
    code.split(';').filter_map(rust_statement).collect()
}

// ---- comparison -----------------------------------------------------------------------------------

/// The differences between a header's declarations and its module's, in words.
fn differences(module: &str, header: &[Declaration], rust: &[Declaration]) -> Vec<String> {
    let mut found = Vec::new();
    for index in 0..header.len().max(rust.len()) {
        match (header.get(index), rust.get(index)) {
            (Some(c), Some(r)) if c == r => {}
            (c, r) => found.push(format!("{}: declaration {}: header has {:?}, src/{}.rs has {:?}", module, index, c, module, r)),
        }
    }
    found
}

#[test]
fn every_header_has_its_module_in_the_umbrella_order() {
    let lib = module_source("lib");
    let declared: Vec<&str> = lib.lines().filter_map(|line| line.strip_prefix("pub mod ")).map(|name| name.trim_end_matches(';')).collect();
    let headers = header_modules();
    assert!(headers.len() > 10, "read the modules from capi/accel.h: {:?}", headers);
    assert_eq!(&declared[..headers.len()], headers.as_slice(), "src/lib.rs must declare a module per header in capi/accel.h's order");
    assert_eq!(&declared[headers.len()..], ["dlpack"], "the only module without a header is dlpack");
}

#[test]
fn each_module_declares_what_its_header_does_in_order() {
    let mut found = Vec::new();
    for module in header_modules() {
        let header = header_declarations(&header_source(&module));
        assert!(!header.is_empty(), "nothing read from {}.h", module);
        found.extend(differences(&module, &header, &module_declarations(&module_source(&module))));
    }
    assert!(found.is_empty(), "accel-sys has drifted from the headers:\n{}", found.join("\n"));
}

#[test]
fn every_exported_symbol_is_declared_and_nothing_else() {
    let exported: BTreeSet<String> =
        fs::read_to_string(capi().join("symbols.txt")).expect("symbols.txt").split_whitespace().map(str::to_string).collect();
    let declared: BTreeSet<String> = header_modules()
        .iter()
        .flat_map(|module| module_declarations(&module_source(module)))
        .filter_map(|declaration| match declaration {
            Declaration::Function(name, _) => Some(name),
            _ => None,
        })
        .collect();
    let missing: Vec<_> = exported.difference(&declared).collect();
    let extra: Vec<_> = declared.difference(&exported).collect();
    assert!(missing.is_empty() && extra.is_empty(), "not declared: {:?}; declared but not exported: {:?}", missing, extra);
}

// The check itself: each kind of drift must be caught.

fn drift(module: &str, old: &str, new: &str) -> Vec<String> {
    let source = module_source(module);
    assert!(source.contains(old), "{:?} is not in src/{}.rs", old, module);
    let header = header_declarations(&header_source(module));
    differences(module, &header, &module_declarations(&source.replace(old, new)))
}

#[test]
fn a_parameter_type_that_drifts_is_caught() {
    let found = drift("options", "key: *const c_char, value: i64", "key: *const c_char, value: i32");
    assert_eq!(found.len(), 1, "{:?}", found);
    assert!(found[0].contains("accel_options_set_int"), "{}", found[0]);
}

#[test]
fn a_pointer_constness_result_or_callback_that_drifts_is_caught() {
    assert_eq!(drift("loader", "names: *const *const c_char,\n        tensors", "names: *const *mut c_char,\n        tensors").len(), 1);
    assert_eq!(
        drift(
            "tensor",
            "accel_tensor_numel(tensor: *const accel_tensor_t) -> i64",
            "accel_tensor_numel(tensor: *const accel_tensor_t) -> usize"
        )
        .len(),
        1
    );
    assert_eq!(drift("scheduler", "multiplier: *mut f64, payload", "multiplier: *mut f32, payload").len(), 1);
    assert_eq!(drift("common", "ACCEL_ERR_TIMEOUT: c_int = -7", "ACCEL_ERR_TIMEOUT: c_int = -70").len(), 1);
}

#[test]
fn a_missing_or_reordered_declaration_is_caught() {
    assert!(!drift("state", "    pub fn accel_state_is_broken(state: *const accel_state_t) -> c_int;\n", "").is_empty());
    let source = module_source("optimizer");
    let step = "    pub fn accel_optimizer_step(optimizer: *mut accel_optimizer_t) -> c_int;\n";
    let zero_grad = "    pub fn accel_optimizer_zero_grad(optimizer: *mut accel_optimizer_t) -> c_int;\n";
    let swapped = source.replace(&format!("{}{}", step, zero_grad), &format!("{}{}", zero_grad, step));
    assert_ne!(swapped, source);
    let header = header_declarations(&header_source("optimizer"));
    assert_eq!(differences("optimizer", &header, &module_declarations(&swapped)).len(), 2);
}

#[test]
fn c_types_are_spelt_as_rust_ones() {
    let spelt = |text: &str| rust_type_of_c(&c_tokens(text));
    assert_eq!(spelt("const char *const *"), "*const *const c_char");
    assert_eq!(spelt("accel_tensor_t *const *"), "*const *mut accel_tensor_t");
    assert_eq!(spelt("struct DLManagedTensor **"), "*mut *mut DLManagedTensor");
    assert_eq!(spelt("const void **"), "*mut *const c_void");
    assert_eq!(spelt("void"), "");
    assert_eq!(spelt("size_t"), "usize");
}
