//! The archive entry-name fence on arbitrary names: it never panics, and every name it accepts is
//! a normal relative path that stays inside the pack.
#![no_main]

use apiary::dist::archive::{Limits, check_entry_name};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(name) = std::str::from_utf8(data) else {
        return;
    };
    let limits = Limits::default();
    let Ok(normal) = check_entry_name(name, &limits) else {
        return;
    };
    assert!(!normal.is_empty(), "accepted an empty path for {name:?}");
    assert!(!normal.starts_with('/'), "accepted an absolute path {normal:?}");
    assert!(!normal.contains(['\\', ':', '\0']), "accepted {normal:?}");
    assert!(normal.len() <= limits.max_path_len);
    let parts: Vec<&str> = normal.split('/').collect();
    assert!(parts.len() <= limits.max_depth);
    for part in parts {
        assert!(
            !part.is_empty() && part != "." && part != "..",
            "accepted a non-normal component in {normal:?}"
        );
    }
    // The normal form is a fixed point: checking it again gives itself.
    assert_eq!(check_entry_name(&normal, &limits).ok().as_deref(), Some(normal.as_str()));
});
