//! Static-manifest files and source positions: any bytes as one file of a
//! `--static-manifests` folder through the loader (crates/core/src/apiserver/static_manifests.rs), and as
//! a policy document through the position mapping of CI output (src/cli/positions.rs): never
//! a panic, and a mapped position always lies inside the text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vapcheck::apiserver::Server;
use vapcheck::apiserver::static_manifests::{ManifestFile, load};
use vapcheck::cli::positions::{locate, locate_node, parse_path};

fuzz_target!(|data: &[u8]| {
    let files = [ManifestFile {
        path: "d/f.yaml".into(),
        contents: Ok(data.to_vec()),
    }];
    let _ = load("d", &files, Server::PINNED);
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.split('\n').count();
    for path in [
        "spec.validations[0].expression",
        "spec.matchConditions[1].expression",
        "metadata.name",
        "items[0].spec.validations[0].message",
    ] {
        let steps = parse_path(path);
        if let Some((positions, value)) = locate(text, &steps) {
            for i in 0..=value.chars().count() + 1 {
                assert!(positions.at(i).line <= lines);
            }
            assert!(positions.at_cel(&value, 2, 3).line <= lines);
        }
        if let Some(p) = locate_node(text, &steps) {
            assert!(p.line <= lines);
        }
    }
});
