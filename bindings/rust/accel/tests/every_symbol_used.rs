//! Every function the library exports (capi/symbols.txt) is called by the safe crate, as `sys::<name>`,
//! and the crate calls nothing else: a new C function without a safe wrapper fails here.
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// The names of capi/symbols.txt, one a line after its `#` comment saying it is generated.
fn exported() -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../capi/symbols.txt");
    let list = fs::read_to_string(path).expect("capi/symbols.txt");
    list.lines().map(str::trim).filter(|line| !line.is_empty() && !line.starts_with('#')).map(str::to_string).collect()
}

/// The `accel_*` functions the text names through the sys crate (`sys::accel_name`; `sys::accel_*_t`
/// are the handle types).
fn called_in(text: &str) -> BTreeSet<String> {
    text.match_indices("sys::accel_")
        .map(|(start, _)| {
            let name = &text[start + "sys::".len()..];
            let end = name.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(name.len());
            name[..end].to_string()
        })
        .filter(|name| !name.ends_with("_t"))
        .collect()
}

fn called_by_the_crate() -> BTreeSet<String> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut called = BTreeSet::new();
    for entry in fs::read_dir(&source).expect("src/") {
        let path = entry.expect("an entry of src/").path();
        if path.extension().map_or(false, |extension| extension == "rs") {
            called.extend(called_in(&fs::read_to_string(&path).expect("a source file")));
        }
    }
    called
}

#[test]
fn every_exported_symbol_has_a_safe_wrapper() {
    let called = called_by_the_crate();
    let missing: Vec<_> = exported().into_iter().filter(|symbol| !called.contains(symbol)).collect();
    assert!(missing.is_empty(), "exported but not called by the safe crate: {:?}", missing);
}

#[test]
fn the_crate_calls_only_exported_symbols() {
    let exported = exported();
    let unknown: Vec<_> = called_by_the_crate().into_iter().filter(|name| !exported.contains(name)).collect();
    assert!(unknown.is_empty(), "called but not exported: {:?}", unknown);
}

#[test]
fn calls_are_found_where_they_are_written() {
    let called = called_in("unsafe { sys::accel_state_free(self.ptr) }; x(sys::accel_version_major); NonNull<sys::accel_state_t>");
    assert_eq!(called.into_iter().collect::<Vec<_>>(), ["accel_state_free", "accel_version_major"]);
}
