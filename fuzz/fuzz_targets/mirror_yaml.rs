//! A mirror record's YAML, read the two ways the server reads it: as an API body
//! (`document` then `mirror_from_api`) and as a registry file beside `tenants.yaml`, the
//! whole set validated by the control core (`handle_registry`). No text panics either.
//!
//! The input is the mirror file; after a NUL byte, if any, comes the `tenants.yaml` (else the
//! fleet's, one tenant `t`). The file is named after the record's `host`, as the API names it.
//!
//! What the server writes it must read back as it was: a record the API accepts, written as
//! its file (`mirror_yaml`), reads back as the same record; a registry that loaded, written
//! back (records and tenants), reloads with no change.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vantage_control::mirrors::registry::{
    TENANTS_FILE, document, mirror_from_api, mirror_yaml, tenants_yaml,
};
use vantage_fuzz::{MIRROR_FILES, T0, control, run_for};

fuzz_target!(|data: &[u8]| {
    let (mirror, tenants) = match data.iter().position(|b| *b == 0) {
        Some(at) => (&data[..at], Some(&data[at + 1..])),
        None => (data, None),
    };
    let Ok(mirror) = std::str::from_utf8(mirror) else { return };
    let tenants = match tenants.map(std::str::from_utf8) {
        Some(Ok(t)) => t,
        Some(Err(_)) => return,
        None => MIRROR_FILES[0].1,
    };

    let doc = document(mirror);
    if let Ok(m) = doc.clone().and_then(mirror_from_api) {
        let written = mirror_yaml(&m);
        let back = document(&written).and_then(mirror_from_api);
        assert_eq!(back.as_ref(), Ok(&m), "the API's file of this record:\n{written}");
    }

    let host = doc.ok().and_then(|d| d.get("host").and_then(|h| h.as_str()).map(str::to_owned));
    let file = format!("{}.yaml", host.as_deref().unwrap_or("m1.example.net"));
    let files = vec![(TENANTS_FILE.to_owned(), tenants.to_owned()), (file, mirror.to_owned())];
    let mut c = control();
    let now = T0.plus_secs(5);
    if c.handle_registry(&files, now).is_err() {
        return;
    }
    run_for(&mut c, now, 30);
    let config = c.config();
    let registry = &config.mirrors;
    let mut rewritten = vec![(TENANTS_FILE.to_owned(), tenants_yaml(&registry.tenants))];
    rewritten.extend(registry.mirrors.values().map(|m| (registry.file_of(&m.host), mirror_yaml(m))));
    let changes = c.handle_registry(&rewritten, now.plus_secs(1)).expect("the registry as written reloads");
    assert!(changes.is_empty(), "rewriting the registry changed it: {changes:?}\n{rewritten:?}");
});
