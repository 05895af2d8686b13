//! Turns the declaration tables of [`super::decls`] into `cel` declarations and builds the
//! library part of the environment for one Kubernetes version.

use std::sync::Arc;

use crate::cel::{EnvBuilder, EnvError, FunctionDecl, OverloadDecl, Type, TypeKind, TypeProvider};

use super::decls::{self, LIBRARIES, Library, OverloadRow};

/// Names of the opaque (abstract) types the Kubernetes libraries declare
/// (`cel.OpaqueType(...)` in pkg/cel/ip.go and pkg/cel/cidr.go). Every other named type of
/// the tables is an object type (`cel.ObjectType(...)`).
const OPAQUE_TYPE_NAMES: &[&str] = &["net.IP", "net.CIDR"];

/// Parses a type written in cel-go syntax as used by the tables, making the names of
/// [`OPAQUE_TYPE_NAMES`] opaque types.
pub fn table_type(text: &str) -> Result<Type, EnvError> {
    let t = Type::parse(text).map_err(|e| EnvError(format!("bad type in table: {e}")))?;
    Ok(fix_opaque(&t))
}

fn fix_opaque(t: &Type) -> Type {
    match t.type_kind() {
        TypeKind::Struct(name) if OPAQUE_TYPE_NAMES.contains(&&**name) => {
            Type::opaque(name.clone(), vec![])
        }
        TypeKind::List(e) => Type::list(fix_opaque(e)),
        TypeKind::Map(k, v) => Type::map(fix_opaque(k), fix_opaque(v)),
        TypeKind::Opaque(n, p) => Type::opaque(n.clone(), p.iter().map(fix_opaque).collect()),
        TypeKind::Type(Some(p)) => Type::type_of(fix_opaque(p)),
        _ => t.clone(),
    }
}

/// The `cel` overload declaration of a table row.
pub fn overload_decl(row: &OverloadRow) -> Result<OverloadDecl, EnvError> {
    decl_of(row.id, row.member, row.args, row.result, table_type)
}

/// The `cel` overload declaration `id` (`member`: called as `receiver.f(...)`) of argument and
/// result types written in a table's syntax, which `ty` parses (this module's [`table_type`],
/// or Kyverno's table's).
pub fn decl_of(
    id: &str,
    member: bool,
    args: &[&str],
    result: &str,
    ty: impl Fn(&str) -> Result<Type, EnvError>,
) -> Result<OverloadDecl, EnvError> {
    let args = args.iter().map(|a| ty(a)).collect::<Result<Vec<_>, _>>()?;
    let result = ty(result)?;
    Ok(if member {
        OverloadDecl::member(id, args, result)
    } else {
        OverloadDecl::global(id, args, result)
    })
}

/// Declares the rows (grouped per function name, overloads in table order).
pub fn add_rows<'a>(
    b: &mut EnvBuilder,
    rows: impl IntoIterator<Item = &'a OverloadRow>,
) -> Result<(), EnvError> {
    add_grouped(
        b,
        rows.into_iter()
            .map(|row| Ok((row.function, overload_decl(row)?))),
    )
}

/// Declares `(function name, overload)` pairs as one function a name (in the order of its
/// first overload), its overloads in the order given; the first `Err` is returned.
pub fn add_grouped<'a>(
    b: &mut EnvBuilder,
    decls: impl IntoIterator<Item = Result<(&'a str, OverloadDecl), EnvError>>,
) -> Result<(), EnvError> {
    let mut grouped: Vec<(&str, Vec<OverloadDecl>)> = Vec::new();
    for d in decls {
        let (function, decl) = d?;
        match grouped.iter_mut().find(|(n, _)| *n == function) {
            Some((_, list)) => list.push(decl),
            None => grouped.push((function, vec![decl])),
        }
    }
    for (name, overloads) in grouped {
        b.add_function(FunctionDecl::new(name, overloads))?;
    }
    Ok(())
}

/// The type identifiers registered with `cel.Types(...)` by the IP and CIDR libraries:
/// `net.IP` and `net.CIDR` resolve to `type(net.IP)` / `type(net.CIDR)`.
struct NetTypes {
    cidr: bool,
}

impl TypeProvider for NetTypes {
    fn find_struct_type(&self, _name: &str) -> Option<Type> {
        None
    }

    fn find_struct_field_type(&self, _struct_name: &str, _field: &str) -> Option<Type> {
        None
    }

    fn find_ident(&self, name: &str) -> Option<Type> {
        match name {
            "net.IP" => Some(Type::opaque("net.IP", vec![])),
            "net.CIDR" if self.cidr => Some(Type::opaque("net.CIDR", vec![])),
            _ => None,
        }
    }
}

/// Which libraries are part of the environment and at which version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LibrarySelection {
    /// Kubernetes minor version whose libraries are included (each library from its
    /// introduction version on).
    pub minor: u32,
}

impl LibrarySelection {
    /// Whether `library` is part of the environment.
    pub fn includes(&self, library: Library) -> bool {
        decls::library_info(library).since_minor <= self.minor
    }

    /// The libraries in the order `base.go` adds them for this version. Kubernetes' lists
    /// library moves to the end from 1.37 on: its version-0 entry (first in base.go) is
    /// removed at 1.37 and its version-1 entry is the last one.
    pub fn ordered(&self) -> Vec<Library> {
        let mut libs: Vec<Library> = LIBRARIES
            .iter()
            .map(|l| l.library)
            .filter(|l| self.includes(*l))
            .collect();
        if self.minor >= 37 {
            libs.retain(|l| *l != Library::Lists);
            libs.push(Library::Lists);
        }
        libs
    }
}

/// Adds one library's declarations (for `Standard`, only what is not already declared by
/// [`EnvBuilder::standard`]).
pub fn add_library(b: &mut EnvBuilder, library: Library, minor: u32) -> Result<(), EnvError> {
    match library {
        Library::Standard => {}
        Library::Urls => add_rows(b, decls::URLS)?,
        Library::Regex => add_rows(b, decls::REGEX)?,
        Library::Lists => {
            add_rows(b, decls::LISTS)?;
            add_rows(b, decls::LISTS_V1.iter().filter(|r| r.since_minor <= minor))?;
        }
        Library::Authz => add_rows(b, decls::AUTHZ)?,
        // Declared with the standard library: `EnvBuilder::standard` adds the optional library
        // at its latest version when `EnvOptions::optional_types` is set, which it is for
        // every supported version (the library is enabled from 1.28).
        Library::OptionalTypes => {}
        Library::Quantity => add_rows(b, decls::QUANTITY)?,
        Library::ExtStrings => {
            add_rows(b, decls::EXT_STRINGS)?;
            super::format_validator::add(b);
        }
        Library::ExtSets => add_rows(b, decls::EXT_SETS)?,
        Library::Ip => {
            add_rows(b, decls::IP)?;
            b.add_provider(Arc::new(NetTypes { cidr: false }));
        }
        Library::Cidr => {
            add_rows(b, decls::CIDR)?;
            b.add_provider(Arc::new(NetTypes { cidr: true }));
        }
        Library::Format => add_rows(b, decls::FORMAT)?,
        Library::AuthzSelectors => add_rows(b, decls::AUTHZ_SELECTORS)?,
        Library::TwoVarComprehensions => crate::cel::add_two_var_comprehensions(b)?,
        Library::Semver => add_rows(b, decls::SEMVER)?,
        Library::ExtLists => {
            add_rows(b, decls::EXT_LISTS)?;
            super::macros::add_sort_by(b);
        }
    }
    Ok(())
}

/// Adds every library of `selection`, in `base.go` order.
pub fn add_libraries(b: &mut EnvBuilder, selection: LibrarySelection) -> Result<(), EnvError> {
    for lib in selection.ordered() {
        add_library(b, lib, selection.minor)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_type_parses() {
        for row in decls::all_rows() {
            assert!(overload_decl(row).is_ok(), "{}", row.id);
        }
    }

    #[test]
    fn net_types_are_opaque_and_others_objects() {
        assert!(matches!(
            table_type("net.IP").map(|t| t.type_kind().clone()),
            Ok(TypeKind::Opaque(_, _))
        ));
        assert!(matches!(
            table_type("kubernetes.URL").map(|t| t.type_kind().clone()),
            Ok(TypeKind::Struct(_))
        ));
        assert_eq!(
            table_type("optional_type(kubernetes.NamedFormat)").map(|t| t.to_string()),
            Ok("optional_type(kubernetes.NamedFormat)".to_string())
        );
    }

    #[test]
    fn lists_library_moves_last_at_1_37() {
        let at36 = LibrarySelection { minor: 36 }.ordered();
        let at37 = LibrarySelection { minor: 37 }.ordered();
        assert_eq!(at36.get(3), Some(&Library::Lists));
        assert_eq!(at37.last(), Some(&Library::Lists));
        assert!(!LibrarySelection { minor: 30 }.includes(Library::Format));
        assert!(LibrarySelection { minor: 31 }.includes(Library::Format));
    }
}
