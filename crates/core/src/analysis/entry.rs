//! One entry of a check's report: what kube-apiserver (or the static-manifest loader, or a
//! policy engine) answers to one object, and what vapcheck computed for it. The text, JSON,
//! YAML and CI outputs (`crate::cli::output`, `crate::cli::emit`) render these.

use serde::Serialize;

use crate::bindings::BindingReport;
use crate::policy::PolicyStatus;

use super::input::Origin;

/// The `kind` of the entry that stands for a whole `--static-manifests` folder (its name is
/// the folder).
pub const STATIC_MANIFESTS_KIND: &str = "StaticManifests";

/// What kube-apiserver answers when the object is created (or updated, with `--previous`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiServerVerdict {
    /// The API server's minor version (`1.<minor>`).
    pub server_minor: u32,
    /// An update of a stored version rather than a create.
    pub update: bool,
    /// The field errors of the HTTP 422 answer, each as the API server prints it, in its
    /// order, with the field and CEL position of each; empty when the object is accepted. For
    /// a static manifest: the loader's errors.
    pub causes: Vec<crate::finding::Cause>,
    /// Read from this static-manifest folder (`--static-manifests`): the verdict is the
    /// static-manifest loader's, not a create's.
    pub static_dir: Option<String>,
}

impl ApiServerVerdict {
    /// The answer of a create (or, `update`, of an update) by the API server of minor version
    /// `server_minor`: `causes`, empty when it accepts the object.
    pub fn new(server_minor: u32, update: bool, causes: Vec<crate::finding::Cause>) -> Self {
        ApiServerVerdict {
            server_minor,
            update,
            causes,
            static_dir: None,
        }
    }

    /// Whether the API server accepts the object.
    pub fn accepted(&self) -> bool {
        self.causes.is_empty()
    }
}

impl Serialize for ApiServerVerdict {
    /// `{"accepted": true}` or `{"accepted": false, "causes": [..]}`, with
    /// `"staticManifests": DIR` for objects of a static-manifest folder.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("accepted", &self.accepted())?;
        if !self.accepted() {
            m.serialize_entry("causes", &self.causes)?;
        }
        if let Some(dir) = &self.static_dir {
            m.serialize_entry("staticManifests", dir)?;
        }
        m.end()
    }
}

/// One object read: a checked policy, or a binding.
#[derive(Debug, Clone)]
pub struct CheckedPolicy {
    /// `ValidatingAdmissionPolicy` or `ValidatingAdmissionPolicyBinding`.
    pub kind: &'static str,
    /// `metadata.name` (empty when missing).
    pub name: String,
    /// Where it was read from.
    pub origin: Origin,
    /// What kube-apiserver answers.
    pub api_server: ApiServerVerdict,
    /// What vapcheck computed (policies only).
    pub status: Option<PolicyStatus>,
    /// Policies, when the input holds bindings: the names of the bindings that bind it.
    pub bound_by: Option<Vec<String>>,
    /// Bindings: what the binding will do (see [`crate::bindings`]).
    pub effect: Option<BindingReport>,
    /// Webhook configurations: what they will do beyond the verdict ([`crate::webhooks`]).
    pub advice: Vec<crate::webhooks::Advice>,
    /// A document that does not decode (or a file that cannot be read): why; its one cause
    /// in `api_server` is the same error.
    pub undecoded: Option<super::input::Undecoded>,
}

impl CheckedPolicy {
    /// A decoded object of `kind` named `name` read from `origin`: what the API server answers
    /// and (policies) what vapcheck computed; no bindings, binding effect or advice yet.
    pub fn new(
        kind: &'static str,
        name: String,
        origin: Origin,
        api_server: ApiServerVerdict,
        status: Option<PolicyStatus>,
    ) -> Self {
        CheckedPolicy {
            kind,
            name,
            origin,
            api_server,
            status,
            bound_by: None,
            effect: None,
            advice: Vec::new(),
            undecoded: None,
        }
    }
}
