//! The archive entry-name fence on arbitrary names: it never panics, and every name it accepts is
//! a normal relative path that stays inside the pack.
#![no_main]

use apiary_core::pack::paths::normal_entry_name;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(name) = std::str::from_utf8(data) else {
        return;
    };
    // The limits `.buzzpack` archives use.
    let (max_len, max_depth) = (1024, 32);
    let Ok(normal) = normal_entry_name(name, max_len, max_depth) else {
        return;
    };
    assert!(!normal.is_empty(), "accepted an empty path for {name:?}");
    assert!(!normal.starts_with('/'), "accepted an absolute path {normal:?}");
    assert!(!normal.contains(['\\', ':', '\0']), "accepted {normal:?}");
    assert!(normal.len() <= max_len);
    let parts: Vec<&str> = normal.split('/').collect();
    assert!(parts.len() <= max_depth);
    for part in parts {
        assert!(
            !part.is_empty() && part != "." && part != "..",
            "accepted a non-normal component in {normal:?}"
        );
    }
    // The normal form is a fixed point: checking it again gives itself.
    assert_eq!(
        normal_entry_name(&normal, max_len, max_depth).ok().as_deref(),
        Some(normal.as_str())
    );
});
