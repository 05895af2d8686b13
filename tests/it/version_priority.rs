//! The one API-version priority order (`schema::gvk::compare_version_priority`, kube-rs's
//! `kube_core::Version::priority`) is apimachinery's: every pair of the version strings of
//! the embedded schemas and of the corpora is ordered as a transcription of upstream orders it.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::path::Path;

use vapcheck::schema::GroupVersion;
use vapcheck::schema::gvk::compare_version_priority;

use crate::support::shared_dir;

/// apimachinery v0.37.1 `pkg/version/helpers.go` `parseKubeVersion`: `kubeVersionRegex`
/// (`^v([\d]+)(?:(alpha|beta)([\d]+))?$`), the type (alpha 0, beta 1, GA 2) and
/// `strconv.Atoi` of the numbers (an int64 here).
fn parse_kube_version(v: &str) -> Option<(i64, i64, i64)> {
    let rest = v.strip_prefix('v')?;
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let n = digits(rest);
    if n == 0 {
        return None;
    }
    let major: i64 = rest[..n].parse().ok()?;
    let tail = &rest[n..];
    if tail.is_empty() {
        return Some((major, 2, 0));
    }
    let (kind, minor) = if let Some(m) = tail.strip_prefix("alpha") {
        (0, m)
    } else if let Some(m) = tail.strip_prefix("beta") {
        (1, m)
    } else {
        return None;
    };
    if minor.is_empty() || digits(minor) != minor.len() {
        return None;
    }
    Some((major, kind, minor.parse().ok()?))
}

/// `CompareKubeAwareVersionStrings(v1, v2)`: positive when `v1` has the higher priority.
fn upstream_compare(v1: &str, v2: &str) -> i64 {
    if v1 == v2 {
        return 0;
    }
    match (parse_kube_version(v1), parse_kube_version(v2)) {
        // strings.Compare(v2, v1)
        (None, None) => match v2.cmp(v1) {
            Ordering::Less => -1,
            Ordering::Equal => 0,
            Ordering::Greater => 1,
        },
        (None, Some(_)) => -1,
        (Some(_), None) => 1,
        (Some((ma, ta, na)), Some((mb, tb, nb))) => {
            if ta != tb {
                ta - tb
            } else if ma != mb {
                ma - mb
            } else {
                na - nb
            }
        }
    }
}

/// Every file below `dir`.
fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for e in entries {
        let p = e.expect("entry").path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// The version strings of a corpus file: every word that starts with `v` and a digit, and the
/// version part of every `apiVersion:` value (Kubernetes-like or not).
fn versions_of_text(text: &str, out: &mut BTreeSet<String>) {
    for word in text.split(|c: char| !c.is_ascii_alphanumeric()) {
        if word.len() > 1 && word.starts_with('v') && word.as_bytes()[1].is_ascii_digit() {
            out.insert(word.to_owned());
        }
    }
    for line in text.lines() {
        if let Some(value) = line.trim_start().strip_prefix("apiVersion:") {
            let value = value
                .trim()
                .trim_end_matches(',')
                .trim_matches(|c| c == '"' || c == '\'');
            let version = value.rsplit('/').next().unwrap_or(value);
            if !version.is_empty() {
                out.insert(version.to_owned());
            }
        }
    }
}

#[test]
fn the_priority_order_is_apimachinerys_on_every_version_of_the_schemas_and_corpora() {
    let mut embedded = BTreeSet::new();
    let minors = vapcheck::schema::embedded::versions().expect("embedded versions");
    assert_eq!(minors.len(), 8, "embedded minors: {minors:?}");
    for (minor, _) in &minors {
        for (path, _) in vapcheck::schema::embedded::documents(minor).expect("documents") {
            let gv = GroupVersion::from_openapi_path(path.trim_end_matches(".json"))
                .unwrap_or_else(|| panic!("{minor}: {path} is not a group-version path"));
            embedded.insert(gv.version);
        }
    }
    let mut corpora = BTreeSet::new();
    let mut paths = Vec::new();
    files(&shared_dir().join("corpus"), &mut paths);
    for p in &paths {
        if let Ok(text) = std::fs::read_to_string(p) {
            versions_of_text(&text, &mut corpora);
        }
    }
    // Beside them, the shapes where readings could differ: a pre-release without a minor,
    // v0, leading zeros, and words that are no Kubernetes version. (A number past u32 is
    // where kube-rs and upstream differ: `schema::gvk::compare_version_priority`.)
    let edges = [
        "v1beta", "v1alpha", "v0", "v01", "v1beta01", "v1gamma1", "V1", "1", "*", "", "foo",
        "v1-beta1",
    ];
    let mut all: BTreeSet<String> = embedded.iter().chain(&corpora).cloned().collect();
    all.extend(edges.iter().map(|s| (*s).to_owned()));
    let kube_like = all
        .iter()
        .filter(|v| parse_kube_version(v).is_some())
        .count();
    let mut disagreements = Vec::new();
    for a in &all {
        for b in &all {
            let ours = compare_version_priority(a, b);
            // Ours sorts the higher priority first.
            let upstream = upstream_compare(a, b).cmp(&0).reverse();
            if ours != upstream {
                disagreements.push(format!(
                    "{a:?} vs {b:?}: ours {ours:?}, upstream {upstream:?}"
                ));
            }
        }
    }
    assert_eq!(
        (embedded.len(), corpora.len(), all.len(), kube_like),
        (EMBEDDED, CORPORA, ALL, KUBE_LIKE),
        "embedded {embedded:?}; corpora {corpora:?}"
    );
    assert_eq!(disagreements, Vec::<String>::new());
}

/// The distinct versions found, as measured (`cargo test --test it version_priority`).
const EMBEDDED: usize = 8;
const CORPORA: usize = 16;
const ALL: usize = 27;
const KUBE_LIKE: usize = 17;
