//! Options, the error path (code, name, the library's message), and the version.
use accel::{sys, version, Options};

#[test]
fn typed_and_text_setters_show_in_the_dump() {
    let mut options = Options::new().unwrap();
    options
        .set_int("batch_size", 32)
        .unwrap()
        .set_bool("shuffle", true)
        .unwrap()
        .set_double("lr", 0.5)
        .unwrap()
        .set_string("mixed_precision", "bf16")
        .unwrap()
        .set_text("data_seed", "7")
        .unwrap();
    let dump = options.dump().unwrap();
    for line in ["batch_size=32 (set)", "shuffle=true (set)", "lr=0.5 (set)", "mixed_precision=bf16 (set)", "data_seed=7 (set)"] {
        assert!(dump.lines().any(|entry| entry == line), "no {:?} in\n{}", line, dump);
    }
    let from_text = Options::from_text(&[("batch_size", "4"), ("drop_last", "yes")]).unwrap().dump().unwrap();
    assert!(from_text.contains("batch_size=4 (set)") && from_text.contains("drop_last=true (set)"), "{}", from_text);
}

#[test]
fn an_unknown_key_is_an_error_with_the_librarys_message() {
    let mut options = Options::new().unwrap();
    let error = options.set_int("no_such_key", 1).err().expect("refused");
    assert_eq!(error.code(), sys::ACCEL_ERR_UNKNOWN_OPTION);
    assert_eq!(error.name(), "ACCEL_ERR_UNKNOWN_OPTION");
    assert!(error.message().contains("no_such_key"), "{}", error);
    assert_eq!(error.to_string(), format!("ACCEL_ERR_UNKNOWN_OPTION: {}", error.message()));
    let bad_value = options.set_text("batch_size", "many").err().expect("refused");
    assert_eq!(bad_value.code(), sys::ACCEL_ERR_BAD_OPTION_VALUE);
}

#[test]
fn a_nul_byte_is_refused_before_the_library_sees_it() {
    let error = Options::new().unwrap().set_string("mixed_precision", "b\0f16").err().expect("refused");
    assert_eq!(error.code(), sys::ACCEL_ERR_INVALID_ARGUMENT);
    assert!(error.message().contains("NUL"), "{}", error);
}

#[test]
fn options_are_read_from_several_threads() {
    let options = Options::from_text(&[("batch_size", "8")]).unwrap();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| assert!(options.dump().unwrap().contains("batch_size=8")));
        }
    });
}

#[test]
fn the_version_is_the_one_the_crate_was_written_for() {
    let (major, minor, patch) = version::numbers();
    assert_eq!((major, minor), (sys::ACCEL_VERSION_MAJOR, sys::ACCEL_VERSION_MINOR));
    assert_eq!(version::string(), format!("{}.{}.{}", major, minor, patch));
    assert!(version::torch().starts_with("1.13"), "{}", version::torch());
    assert!(version::has_feature("gloo").unwrap());
    assert!(!version::has_feature("no such feature").unwrap());
    assert!(version::features().contains(&"gloo".to_string()), "{:?}", version::features());
}
