//! Every document of `vapcheck check`'s input is reported: folders given on the command line
//! are walked, and a document that does not decode (not YAML or JSON, not a Kubernetes object,
//! an object of a checked kind whose fields have the wrong type) or a file that cannot be read
//! is a finding on that document (rule `VAP003`, [`super::ci::Rule::NotDecoded`]) while the
//! others are checked. `check` exits 2 only when no file at all could be read, or when nothing
//! of a kind it reads is in the input.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::input::{InputObject, InputOther, Origin, Undecoded, read_all_lenient};
#[cfg(test)]
use super::positions::Position;
pub use crate::analysis::undecoded::{entry, locate};
use crate::apiserver::static_manifests::is_manifest_file;

/// The kinds `check` reads and checks, for messages that list them: those of `run_check`'s
/// readers (cli/mod.rs: the validating and mutating policies and bindings, the webhook
/// configurations, `gatekeeper::read_lenient`'s templates with CEL code and
/// `kyverno::read_lenient`'s validating policies).
pub const CHECKED_KINDS: &str = "ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding, MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding, ValidatingWebhookConfiguration, MutatingWebhookConfiguration, Kyverno ValidatingPolicy or NamespacedValidatingPolicy, or Gatekeeper ConstraintTemplate with K8sNativeValidation code";

/// The input of one run, read leniently.
#[derive(Debug, Default)]
pub struct Input {
    /// The files read, in order, folders replaced by the files found in them (`-` for
    /// standard input).
    pub paths: Vec<PathBuf>,
    /// Validating policies and bindings, in order.
    pub objects: Vec<InputObject>,
    /// Every other object (MutatingAdmissionPolicies and bindings, param objects, ...).
    pub others: Vec<InputOther>,
    /// The text of each source read, by its name.
    pub texts: BTreeMap<String, String>,
    /// Documents that do not decode and files that cannot be read, in input order.
    pub undecoded: Vec<Undecoded>,
    /// How many sources were read (as text).
    pub read: usize,
}

/// The files of the command line with every folder replaced by the files under it whose names
/// end in `.yaml`, `.yml` or `.json` (any case), walked recursively, each folder's entries in
/// name order; entries whose name starts with `.` are skipped, and symbolic links to folders
/// are not followed. A folder that cannot be listed is an [`Undecoded`] on it.
pub fn expand(files: &[PathBuf]) -> (Vec<PathBuf>, Vec<Undecoded>) {
    let mut paths = Vec::new();
    let mut errors = Vec::new();
    for f in files {
        if f.as_os_str() != "-" && f.is_dir() {
            walk(f, &mut paths, &mut errors);
        } else {
            paths.push(f.clone());
        }
    }
    (paths, errors)
}

fn walk(dir: &Path, paths: &mut Vec<PathBuf>, errors: &mut Vec<Undecoded>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            errors.push(unreadable(&dir.display().to_string(), &e.to_string()));
            return;
        }
    };
    let mut found = Vec::new();
    for entry in entries {
        match entry {
            Ok(entry) => found.push(entry),
            Err(e) => errors.push(unreadable(&dir.display().to_string(), &e.to_string())),
        }
    }
    found.sort_by_key(std::fs::DirEntry::file_name);
    for entry in found {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        // `file_type` does not follow symbolic links: a link to a folder is not walked (no
        // cycles); a link to a file is read when its name fits.
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            walk(&path, paths, errors);
        } else if is_manifest_file(&name) && !path.is_dir() {
            paths.push(path);
        }
    }
}

fn unreadable(source: &str, cause: &str) -> Undecoded {
    Undecoded {
        origin: Origin {
            source: source.to_owned(),
            document: 0,
            item: None,
        },
        kind: None,
        name: None,
        field: String::new(),
        position: None,
        message: format!("cannot read: {cause}"),
    }
}

/// One source of a run: its name (a path as given, `<stdin>`) and its bytes, or why it could
/// not be read.
#[derive(Debug)]
pub struct Source {
    /// The name findings carry.
    pub name: String,
    /// Its content, or the cause it could not be read.
    pub bytes: Result<Vec<u8>, String>,
}

/// Reads every FILE (folders walked, [`expand`]; standard input once for `-`): every
/// policy, binding and other object, and every document that does not decode or file that
/// cannot be read as an [`Undecoded`] (MutatingAdmissionPolicies are decoded later, from
/// `others`).
pub fn read(files: &[PathBuf], stdin: &mut dyn Read) -> Input {
    let (paths, undecoded) = expand(files);
    let mut sources = Vec::new();
    let mut stdin_read = false;
    for f in &paths {
        if f.as_os_str() == "-" {
            if stdin_read {
                continue;
            }
            stdin_read = true;
            let mut buf = Vec::new();
            let r = stdin.read_to_end(&mut buf).map(|_| buf);
            sources.push(Source {
                name: "<stdin>".to_owned(),
                bytes: r.map_err(|e| e.to_string()),
            });
        } else {
            sources.push(Source {
                name: f.display().to_string(),
                bytes: std::fs::read(f).map_err(|e| e.to_string()),
            });
        }
    }
    from_sources(paths, undecoded, sources)
}

/// The input of the sources, as [`read`] makes it from the files: `paths` are the files in
/// input order (for [`source_names`]), `undecoded` what was found before reading them (a
/// folder that cannot be listed). The editor server (`crate::lsp`) gives the unsaved text of
/// its open buffers this way.
pub fn from_sources(paths: Vec<PathBuf>, undecoded: Vec<Undecoded>, sources: Vec<Source>) -> Input {
    from_sources_reading(paths, undecoded, sources, read_all_lenient)
}

/// What [`read_all_lenient`] reads from one source (its name and text).
pub type SourceRead = (Vec<InputObject>, Vec<InputOther>, Vec<Undecoded>);

/// [`from_sources`] with `read` instead of [`read_all_lenient`] (which it must equal): the
/// editor server's reads again only the documents that changed since its last check.
pub fn from_sources_reading(
    paths: Vec<PathBuf>,
    mut undecoded: Vec<Undecoded>,
    sources: Vec<Source>,
    mut read: impl FnMut(&str, &str) -> SourceRead,
) -> Input {
    let mut input = Input::default();
    for Source {
        name: source,
        bytes,
    } in sources
    {
        let text = match bytes {
            Ok(b) => match String::from_utf8(b) {
                Ok(t) => t,
                Err(_) => {
                    undecoded.push(Undecoded {
                        message: "not UTF-8 text".into(),
                        ..unreadable(&source, "")
                    });
                    continue;
                }
            },
            Err(e) => {
                undecoded.push(unreadable(&source, &e));
                continue;
            }
        };
        input.read += 1;
        let (objects, others, bad) = read(&source, &text);
        input.objects.extend(objects);
        input.others.extend(others);
        undecoded.extend(bad);
        input.texts.insert(source, text);
    }
    input.paths = paths;
    input.undecoded = undecoded;
    input
}

/// The source names of `paths` as entries name them (`<stdin>` for `-`), in order.
pub fn source_names(paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|f| {
            if f.as_os_str() == "-" {
                "<stdin>".to_owned()
            } else {
                f.display().to_string()
            }
        })
        .collect()
}

/// Why the run cannot go on (`check` exits 2), if so: no source could be read at all (each
/// reason, one per line), or nothing of a kind `check` reads and no document that fails to
/// decode (`checked`: the policies and bindings read, `others`: the objects of other kinds).
pub fn nothing_to_check(
    read: usize,
    undecoded: &[Undecoded],
    checked: usize,
    others: usize,
) -> Option<String> {
    if read == 0 {
        if undecoded.is_empty() {
            return Some("no .yaml, .yml or .json file in the input".to_owned());
        }
        let reasons: Vec<String> = undecoded
            .iter()
            .map(|u| format!("{}: {}", u.origin, u.cause()))
            .collect();
        return Some(reasons.join("\nvapcheck: "));
    }
    if checked > 0 || !undecoded.is_empty() {
        return None;
    }
    let mut message = format!("no {CHECKED_KINDS} found in the input");
    if others > 0 {
        message.push_str(&format!(
            " ({others} object{} of other kinds, read only as param objects of such policies)",
            if others == 1 { "" } else { "s" }
        ));
    }
    Some(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_are_walked_in_name_order_skipping_hidden_entries_and_other_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for f in [
            "b.yaml",
            "a/z.yml",
            "a/y.JSON",
            "a/x.txt",
            ".hidden/h.yaml",
            "a-b/c.yaml",
        ] {
            let p = root.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "").unwrap();
        }
        let (paths, errors) = expand(&[root.to_path_buf(), PathBuf::from("-")]);
        let names: Vec<String> = paths
            .iter()
            .map(|p| {
                p.strip_prefix(root)
                    .map_or_else(|_| p.display().to_string(), |r| r.display().to_string())
            })
            .collect();
        assert_eq!(names, ["a/y.JSON", "a/z.yml", "a-b/c.yaml", "b.yaml", "-"]);
        assert!(errors.is_empty());
    }

    #[test]
    fn bad_documents_are_reported_and_the_others_read() {
        let vap = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata:\n  name: a\n";
        let text = format!(
            "{vap}---\nkind: [\n---\n- x\n---\n{}spec:\n  validations: {{a: 1}}\n---\n{vap}",
            vap.replace("name: a", "name: b")
        );
        let mut stdin = std::io::Cursor::new(text.into_bytes());
        let mut input = read(&[PathBuf::from("-")], &mut stdin);
        locate(&mut input.undecoded, &input.texts);
        assert_eq!(input.objects.len(), 2);
        let got: Vec<(usize, Option<Position>, String)> = input
            .undecoded
            .iter()
            .map(|u| (u.origin.document, u.position, u.cause()))
            .collect();
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!((got[0].0, got[0].1.map(|p| p.line)), (2, Some(6)));
        assert!(got[0].2.starts_with("invalid YAML: "), "{}", got[0].2);
        assert_eq!(
            (got[1].0, got[1].1, got[1].2.as_str()),
            (
                3,
                Some(Position { line: 8, column: 1 }),
                "not a Kubernetes object: `apiVersion` and `kind` must be strings"
            )
        );
        assert_eq!(
            (got[2].0, got[2].1, got[2].2.as_str()),
            (
                4,
                Some(Position {
                    line: 15,
                    column: 16
                }),
                "spec.validations: invalid type: map, expected a sequence"
            )
        );
        assert_eq!(input.undecoded[2].name.as_deref(), Some("b"));
    }

    #[test]
    fn unreadable_files_are_reported_and_not_counted() {
        let mut stdin = std::io::Cursor::new(vec![0xff, 0xfe]);
        let input = read(
            &[PathBuf::from("/nonexistent/x.yaml"), PathBuf::from("-")],
            &mut stdin,
        );
        assert_eq!(input.read, 0);
        let causes: Vec<String> = input.undecoded.iter().map(Undecoded::cause).collect();
        assert!(causes[0].starts_with("cannot read: "), "{causes:?}");
        assert_eq!(causes[1], "not UTF-8 text");
    }
}
