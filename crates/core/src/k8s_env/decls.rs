//! The function declarations of the libraries Kubernetes adds to CEL, as data.
//!
//! Each [`OverloadRow`] is one overload exactly as declared upstream: the function name, member
//! or global style, the overload id, argument types (receiver first) and result type written
//! in cel-go's type syntax (`list(string)`, `optional_type(kubernetes.NamedFormat)`, type
//! parameters as single capital letters), and the Kubernetes minor version that introduced it.
//! [`crate::k8s_env::libraries`] turns the rows into `cel` declarations.
//!
//! Sources (read at the pinned versions):
//! * Kubernetes 1.37.1 `k8s.io/apiserver/pkg/cel/environment/base.go` (which library is enabled
//!   from which version, and at which library version) and `pkg/cel/library/*.go` (the
//!   overloads);
//! * cel-go v0.29.2 `ext/strings.go` (version 2), `ext/sets.go`, `ext/lists.go` (version 3).
//!
//! The standard library, the optional-types library and the two-variable comprehension
//! library are declared by the `cel` module itself (`cel::stdlib`,
//! `cel::add_two_var_comprehensions`); this table only records their introduction versions
//! in [`LIBRARIES`].

/// A library of the Kubernetes CEL environment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Library {
    /// The CEL standard library (always present).
    Standard,
    /// Kubernetes `library.URLs` (`kubernetes.urls`).
    Urls,
    /// Kubernetes `library.Regex` (`kubernetes.regex`).
    Regex,
    /// Kubernetes `library.Lists` (`kubernetes.lists`), version 0 (before 1.37) or 1.
    Lists,
    /// Kubernetes `library.Authz` (`kubernetes.authz`).
    Authz,
    /// cel-go `cel.OptionalTypes()` at its latest version (`optional` functions, `.?`, `[?`).
    OptionalTypes,
    /// Kubernetes `library.Quantity` (`kubernetes.quantity`).
    Quantity,
    /// cel-go `ext.Strings(ext.StringsVersion(2))`.
    ExtStrings,
    /// cel-go `ext.Sets()`.
    ExtSets,
    /// Kubernetes `library.IP` (`kubernetes.net.ip`).
    Ip,
    /// Kubernetes `library.CIDR` (`kubernetes.net.cidr`).
    Cidr,
    /// Kubernetes `library.Format` (`kubernetes.format`).
    Format,
    /// Kubernetes `library.AuthzSelectors` (`kubernetes.authzSelectors`).
    AuthzSelectors,
    /// cel-go `ext.TwoVarComprehensions()`.
    TwoVarComprehensions,
    /// Kubernetes `library.SemverLib(library.SemverVersion(1))` (`kubernetes.Semver`).
    Semver,
    /// cel-go `ext.Lists(ext.ListsVersion(3))`.
    ExtLists,
}

/// One library and the Kubernetes minor version whose `base.go` entry enables it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LibraryInfo {
    /// The library.
    pub library: Library,
    /// The name upstream gives it (cel-go `LibraryName()`), for messages and docs.
    pub name: &'static str,
    /// The Kubernetes minor version (1.x) from which the library is part of the environment.
    pub since_minor: u32,
}

/// Every library of the environment, in the order `base.go` adds them (the order in which
/// overloads of a function shared by several libraries are merged).
pub const LIBRARIES: &[LibraryInfo] = &[
    LibraryInfo {
        library: Library::Standard,
        name: "cel.lib.std",
        since_minor: 0,
    },
    LibraryInfo {
        library: Library::Urls,
        name: "kubernetes.urls",
        since_minor: 0,
    },
    LibraryInfo {
        library: Library::Regex,
        name: "kubernetes.regex",
        since_minor: 0,
    },
    LibraryInfo {
        library: Library::Lists,
        name: "kubernetes.lists",
        since_minor: 0,
    },
    LibraryInfo {
        library: Library::Authz,
        name: "kubernetes.authz",
        since_minor: 27,
    },
    LibraryInfo {
        library: Library::OptionalTypes,
        name: "cel.lib.optional",
        since_minor: 28,
    },
    LibraryInfo {
        library: Library::Quantity,
        name: "kubernetes.quantity",
        since_minor: 28,
    },
    LibraryInfo {
        library: Library::ExtStrings,
        name: "cel.lib.ext.strings",
        since_minor: 29,
    },
    LibraryInfo {
        library: Library::ExtSets,
        name: "cel.lib.ext.sets",
        since_minor: 29,
    },
    LibraryInfo {
        library: Library::Ip,
        name: "kubernetes.net.ip",
        since_minor: 30,
    },
    LibraryInfo {
        library: Library::Cidr,
        name: "kubernetes.net.cidr",
        since_minor: 30,
    },
    LibraryInfo {
        library: Library::Format,
        name: "kubernetes.format",
        since_minor: 31,
    },
    LibraryInfo {
        library: Library::AuthzSelectors,
        name: "kubernetes.authzSelectors",
        since_minor: 31,
    },
    LibraryInfo {
        library: Library::TwoVarComprehensions,
        name: "cel.lib.ext.comprev2",
        since_minor: 32,
    },
    LibraryInfo {
        library: Library::Semver,
        name: "kubernetes.Semver",
        since_minor: 33,
    },
    LibraryInfo {
        library: Library::ExtLists,
        name: "cel.lib.ext.lists",
        since_minor: 34,
    },
];

/// The [`LibraryInfo`] of `library`.
pub fn library_info(library: Library) -> &'static LibraryInfo {
    LIBRARIES
        .iter()
        .find(|l| l.library == library)
        .expect("every Library variant has a LIBRARIES entry")
}

/// One overload of a function declared by a library.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverloadRow {
    /// The library declaring it.
    pub library: Library,
    /// The function name as written in expressions (`isSorted`, `format.named`, `sets.contains`).
    pub function: &'static str,
    /// Receiver style (`x.f(...)`) when true, global (`f(...)`) otherwise.
    pub member: bool,
    /// The upstream overload id.
    pub id: &'static str,
    /// Argument types in cel-go type syntax, receiver first.
    pub args: &'static [&'static str],
    /// The result type in cel-go type syntax.
    pub result: &'static str,
    /// The Kubernetes minor version (1.x) from which the overload exists.
    pub since_minor: u32,
}

macro_rules! rows {
    ($lib:ident, $since:expr; $( $style:ident $func:literal $id:literal [$($arg:literal),*] -> $res:literal ;)*) => {
        &[ $( OverloadRow {
            library: Library::$lib,
            function: $func,
            member: rows!(@style $style),
            id: $id,
            args: &[$($arg),*],
            result: $res,
            since_minor: $since,
        } ),* ]
    };
    (@style m) => { true };
    (@style g) => { false };
}

/// Kubernetes `library.URLs` (pkg/cel/library/urls.go).
pub const URLS: &[OverloadRow] = rows![Urls, 0;
    g "url" "string_to_url" ["string"] -> "kubernetes.URL";
    m "getScheme" "url_get_scheme" ["kubernetes.URL"] -> "string";
    m "getHost" "url_get_host" ["kubernetes.URL"] -> "string";
    m "getHostname" "url_get_hostname" ["kubernetes.URL"] -> "string";
    m "getPort" "url_get_port" ["kubernetes.URL"] -> "string";
    m "getEscapedPath" "url_get_escaped_path" ["kubernetes.URL"] -> "string";
    m "getQuery" "url_get_query" ["kubernetes.URL"] -> "map(string, list(string))";
    g "isURL" "is_url_string" ["string"] -> "bool";
];

/// Kubernetes `library.Regex` (pkg/cel/library/regex.go).
pub const REGEX: &[OverloadRow] = rows![Regex, 0;
    m "find" "string_find_string" ["string", "string"] -> "string";
    m "findAll" "string_find_all_string" ["string", "string"] -> "list(string)";
    m "findAll" "string_find_all_string_int" ["string", "string", "int"] -> "list(string)";
];

/// Kubernetes `library.Lists` version 0 (pkg/cel/library/lists.go). The element types of the
/// templated overloads are `comparableTypes` / `summableTypes` in that file, in that order.
pub const LISTS: &[OverloadRow] = rows![Lists, 0;
    m "isSorted" "list_int_is_sorted_bool" ["list(int)"] -> "bool";
    m "isSorted" "list_uint_is_sorted_bool" ["list(uint)"] -> "bool";
    m "isSorted" "list_double_is_sorted_bool" ["list(double)"] -> "bool";
    m "isSorted" "list_bool_is_sorted_bool" ["list(bool)"] -> "bool";
    m "isSorted" "list_duration_is_sorted_bool" ["list(duration)"] -> "bool";
    m "isSorted" "list_timestamp_is_sorted_bool" ["list(timestamp)"] -> "bool";
    m "isSorted" "list_string_is_sorted_bool" ["list(string)"] -> "bool";
    m "isSorted" "list_bytes_is_sorted_bool" ["list(bytes)"] -> "bool";
    m "sum" "list_int_sum_int" ["list(int)"] -> "int";
    m "sum" "list_uint_sum_uint" ["list(uint)"] -> "uint";
    m "sum" "list_double_sum_double" ["list(double)"] -> "double";
    m "sum" "list_duration_sum_duration" ["list(duration)"] -> "duration";
    m "max" "list_int_max_int" ["list(int)"] -> "int";
    m "max" "list_uint_max_uint" ["list(uint)"] -> "uint";
    m "max" "list_double_max_double" ["list(double)"] -> "double";
    m "max" "list_bool_max_bool" ["list(bool)"] -> "bool";
    m "max" "list_duration_max_duration" ["list(duration)"] -> "duration";
    m "max" "list_timestamp_max_timestamp" ["list(timestamp)"] -> "timestamp";
    m "max" "list_string_max_string" ["list(string)"] -> "string";
    m "max" "list_bytes_max_bytes" ["list(bytes)"] -> "bytes";
    m "min" "list_int_min_int" ["list(int)"] -> "int";
    m "min" "list_uint_min_uint" ["list(uint)"] -> "uint";
    m "min" "list_double_min_double" ["list(double)"] -> "double";
    m "min" "list_bool_min_bool" ["list(bool)"] -> "bool";
    m "min" "list_duration_min_duration" ["list(duration)"] -> "duration";
    m "min" "list_timestamp_min_timestamp" ["list(timestamp)"] -> "timestamp";
    m "min" "list_string_min_string" ["list(string)"] -> "string";
    m "min" "list_bytes_min_bytes" ["list(bytes)"] -> "bytes";
    m "indexOf" "list_a_index_of_int" ["list(A)", "A"] -> "int";
    m "lastIndexOf" "list_a_last_index_of_int" ["list(A)", "A"] -> "int";
];

/// Kubernetes `library.Lists` version 1 additions (`ListsVersion(1)`, enabled by base.go's
/// 1.37 entry; the version-0 entry is removed at 1.37).
pub const LISTS_V1: &[OverloadRow] = rows![Lists, 37;
    m "includes" "list_includes_dyn_dyn" ["dyn", "dyn"] -> "bool";
];

/// Kubernetes `library.Authz` (pkg/cel/library/authz.go).
pub const AUTHZ: &[OverloadRow] = rows![Authz, 27;
    m "path" "authorizer_path" ["kubernetes.authorization.Authorizer", "string"] -> "kubernetes.authorization.PathCheck";
    m "group" "authorizer_group" ["kubernetes.authorization.Authorizer", "string"] -> "kubernetes.authorization.GroupCheck";
    m "serviceAccount" "authorizer_serviceaccount" ["kubernetes.authorization.Authorizer", "string", "string"] -> "kubernetes.authorization.Authorizer";
    m "resource" "groupcheck_resource" ["kubernetes.authorization.GroupCheck", "string"] -> "kubernetes.authorization.ResourceCheck";
    m "subresource" "resourcecheck_subresource" ["kubernetes.authorization.ResourceCheck", "string"] -> "kubernetes.authorization.ResourceCheck";
    m "namespace" "resourcecheck_namespace" ["kubernetes.authorization.ResourceCheck", "string"] -> "kubernetes.authorization.ResourceCheck";
    m "name" "resourcecheck_name" ["kubernetes.authorization.ResourceCheck", "string"] -> "kubernetes.authorization.ResourceCheck";
    m "check" "pathcheck_check" ["kubernetes.authorization.PathCheck", "string"] -> "kubernetes.authorization.Decision";
    m "check" "resourcecheck_check" ["kubernetes.authorization.ResourceCheck", "string"] -> "kubernetes.authorization.Decision";
    m "errored" "decision_errored" ["kubernetes.authorization.Decision"] -> "bool";
    m "error" "decision_error" ["kubernetes.authorization.Decision"] -> "string";
    m "allowed" "decision_allowed" ["kubernetes.authorization.Decision"] -> "bool";
    m "reason" "decision_reason" ["kubernetes.authorization.Decision"] -> "string";
];

/// Kubernetes `library.AuthzSelectors` (pkg/cel/library/authz.go).
pub const AUTHZ_SELECTORS: &[OverloadRow] = rows![AuthzSelectors, 31;
    m "fieldSelector" "authorizer_fieldselector" ["kubernetes.authorization.ResourceCheck", "string"] -> "kubernetes.authorization.ResourceCheck";
    m "labelSelector" "authorizer_labelselector" ["kubernetes.authorization.ResourceCheck", "string"] -> "kubernetes.authorization.ResourceCheck";
];

/// Kubernetes `library.Quantity` (pkg/cel/library/quantity.go). Note `sign` is a global
/// overload there (its doc comment shows the member style, which does not type-check).
pub const QUANTITY: &[OverloadRow] = rows![Quantity, 28;
    g "quantity" "string_to_quantity" ["string"] -> "kubernetes.Quantity";
    g "isQuantity" "is_quantity_string" ["string"] -> "bool";
    g "sign" "quantity_sign" ["kubernetes.Quantity"] -> "int";
    m "isGreaterThan" "quantity_is_greater_than" ["kubernetes.Quantity", "kubernetes.Quantity"] -> "bool";
    m "isLessThan" "quantity_is_less_than" ["kubernetes.Quantity", "kubernetes.Quantity"] -> "bool";
    m "compareTo" "quantity_compare_to" ["kubernetes.Quantity", "kubernetes.Quantity"] -> "int";
    m "asApproximateFloat" "quantity_get_float" ["kubernetes.Quantity"] -> "double";
    m "asInteger" "quantity_get_int" ["kubernetes.Quantity"] -> "int";
    m "isInteger" "quantity_is_integer" ["kubernetes.Quantity"] -> "bool";
    m "add" "quantity_add" ["kubernetes.Quantity", "kubernetes.Quantity"] -> "kubernetes.Quantity";
    m "add" "quantity_add_int" ["kubernetes.Quantity", "int"] -> "kubernetes.Quantity";
    m "sub" "quantity_sub" ["kubernetes.Quantity", "kubernetes.Quantity"] -> "kubernetes.Quantity";
    m "sub" "quantity_sub_int" ["kubernetes.Quantity", "int"] -> "kubernetes.Quantity";
];

/// Kubernetes `library.IP` (pkg/cel/library/ip.go). `net.IP` is an opaque type.
pub const IP: &[OverloadRow] = rows![Ip, 30;
    g "ip" "string_to_ip" ["string"] -> "net.IP";
    m "family" "ip_family" ["net.IP"] -> "int";
    g "ip.isCanonical" "ip_is_canonical" ["string"] -> "bool";
    m "isUnspecified" "ip_is_unspecified" ["net.IP"] -> "bool";
    m "isLoopback" "ip_is_loopback" ["net.IP"] -> "bool";
    m "isLinkLocalMulticast" "ip_is_link_local_multicast" ["net.IP"] -> "bool";
    m "isLinkLocalUnicast" "ip_is_link_local_unicast" ["net.IP"] -> "bool";
    m "isGlobalUnicast" "ip_is_global_unicast" ["net.IP"] -> "bool";
    g "isIP" "is_ip" ["string"] -> "bool";
    g "string" "ip_to_string" ["net.IP"] -> "string";
];

/// Kubernetes `library.CIDR` (pkg/cel/library/cidr.go). `net.CIDR` is an opaque type.
pub const CIDR: &[OverloadRow] = rows![Cidr, 30;
    g "cidr" "string_to_cidr" ["string"] -> "net.CIDR";
    m "containsIP" "cidr_contains_ip_string" ["net.CIDR", "string"] -> "bool";
    m "containsIP" "cidr_contains_ip_ip" ["net.CIDR", "net.IP"] -> "bool";
    m "containsCIDR" "cidr_contains_cidr_string" ["net.CIDR", "string"] -> "bool";
    m "containsCIDR" "cidr_contains_cidr" ["net.CIDR", "net.CIDR"] -> "bool";
    m "ip" "cidr_ip" ["net.CIDR"] -> "net.IP";
    m "prefixLength" "cidr_prefix_length" ["net.CIDR"] -> "int";
    m "masked" "cidr_masked" ["net.CIDR"] -> "net.CIDR";
    g "isCIDR" "is_cidr" ["string"] -> "bool";
    g "string" "cidr_to_string" ["net.CIDR"] -> "string";
];

/// Kubernetes `library.Format` (pkg/cel/library/format.go): `validate`, `format.named` and
/// one zero-argument global function `format.<name>` per entry of `ConstantFormats`, whose
/// overload id is the function name.
pub const FORMAT: &[OverloadRow] = rows![Format, 31;
    m "validate" "format-validate" ["kubernetes.NamedFormat", "string"] -> "optional_type(list(string))";
    g "format.named" "format-named" ["string"] -> "optional_type(kubernetes.NamedFormat)";
    g "format.dns1123Label" "format.dns1123Label" [] -> "kubernetes.NamedFormat";
    g "format.dns1123Subdomain" "format.dns1123Subdomain" [] -> "kubernetes.NamedFormat";
    g "format.dns1035Label" "format.dns1035Label" [] -> "kubernetes.NamedFormat";
    g "format.qualifiedName" "format.qualifiedName" [] -> "kubernetes.NamedFormat";
    g "format.dns1123LabelPrefix" "format.dns1123LabelPrefix" [] -> "kubernetes.NamedFormat";
    g "format.dns1123SubdomainPrefix" "format.dns1123SubdomainPrefix" [] -> "kubernetes.NamedFormat";
    g "format.dns1035LabelPrefix" "format.dns1035LabelPrefix" [] -> "kubernetes.NamedFormat";
    g "format.labelValue" "format.labelValue" [] -> "kubernetes.NamedFormat";
    g "format.uri" "format.uri" [] -> "kubernetes.NamedFormat";
    g "format.uuid" "format.uuid" [] -> "kubernetes.NamedFormat";
    g "format.byte" "format.byte" [] -> "kubernetes.NamedFormat";
    g "format.date" "format.date" [] -> "kubernetes.NamedFormat";
    g "format.datetime" "format.datetime" [] -> "kubernetes.NamedFormat";
];

/// Kubernetes `library.SemverLib` at `SemverVersion(1)` (pkg/cel/library/semverlib.go); the
/// version-1 overloads (`string_bool_to_semver`, `is_semver_string_bool`) are appended after
/// the version-0 ones of the same function.
pub const SEMVER: &[OverloadRow] = rows![Semver, 33;
    g "semver" "string_to_semver" ["string"] -> "kubernetes.Semver";
    g "semver" "string_bool_to_semver" ["string", "bool"] -> "kubernetes.Semver";
    g "isSemver" "is_semver_string" ["string"] -> "bool";
    g "isSemver" "is_semver_string_bool" ["string", "bool"] -> "bool";
    m "isGreaterThan" "semver_is_greater_than" ["kubernetes.Semver", "kubernetes.Semver"] -> "bool";
    m "isLessThan" "semver_is_less_than" ["kubernetes.Semver", "kubernetes.Semver"] -> "bool";
    m "compareTo" "semver_compare_to" ["kubernetes.Semver", "kubernetes.Semver"] -> "int";
    m "major" "semver_major" ["kubernetes.Semver"] -> "int";
    m "minor" "semver_minor" ["kubernetes.Semver"] -> "int";
    m "patch" "semver_patch" ["kubernetes.Semver"] -> "int";
];

/// cel-go `ext.Strings` at version 2 (ext/strings.go `CompileOptions`, in declaration order;
/// `reverse` is version 3 and not enabled by Kubernetes).
pub const EXT_STRINGS: &[OverloadRow] = rows![ExtStrings, 29;
    m "charAt" "string_char_at_int" ["string", "int"] -> "string";
    m "indexOf" "string_index_of_string" ["string", "string"] -> "int";
    m "indexOf" "string_index_of_string_int" ["string", "string", "int"] -> "int";
    m "lastIndexOf" "string_last_index_of_string" ["string", "string"] -> "int";
    m "lastIndexOf" "string_last_index_of_string_int" ["string", "string", "int"] -> "int";
    m "lowerAscii" "string_lower_ascii" ["string"] -> "string";
    m "replace" "string_replace_string_string" ["string", "string", "string"] -> "string";
    m "replace" "string_replace_string_string_int" ["string", "string", "string", "int"] -> "string";
    m "split" "string_split_string" ["string", "string"] -> "list(string)";
    m "split" "string_split_string_int" ["string", "string", "int"] -> "list(string)";
    m "substring" "string_substring_int" ["string", "int"] -> "string";
    m "substring" "string_substring_int_int" ["string", "int", "int"] -> "string";
    m "trim" "string_trim" ["string"] -> "string";
    m "upperAscii" "string_upper_ascii" ["string"] -> "string";
    m "format" "string_format" ["string", "list(dyn)"] -> "string";
    g "strings.quote" "strings_quote" ["string"] -> "string";
    m "join" "list_join" ["list(string)"] -> "string";
    m "join" "list_join_string" ["list(string)", "string"] -> "string";
];

/// cel-go `ext.Sets()` (ext/sets.go).
pub const EXT_SETS: &[OverloadRow] = rows![ExtSets, 29;
    g "sets.contains" "list_sets_contains_list" ["list(T)", "list(T)"] -> "bool";
    g "sets.equivalent" "list_sets_equivalent_list" ["list(T)", "list(T)"] -> "bool";
    g "sets.intersects" "list_sets_intersects_list" ["list(T)", "list(T)"] -> "bool";
];

/// cel-go `ext.Lists(ext.ListsVersion(3))` (ext/lists.go). The templated overload ids use the
/// cel-go runtime type name, hence `list_google.protobuf.Duration_sort`. The `sortBy`
/// receiver macro expands to a call of `@sortByAssociatedKeys` (see
/// [`crate::k8s_env::macros`]).
pub const EXT_LISTS: &[OverloadRow] = rows![ExtLists, 34;
    m "slice" "list_slice" ["list(T)", "int", "int"] -> "list(T)";
    m "flatten" "list_flatten" ["list(list(T))"] -> "list(T)";
    m "flatten" "list_flatten_int" ["list(dyn)", "int"] -> "list(dyn)";
    m "sort" "list_int_sort" ["list(int)"] -> "list(int)";
    m "sort" "list_uint_sort" ["list(uint)"] -> "list(uint)";
    m "sort" "list_double_sort" ["list(double)"] -> "list(double)";
    m "sort" "list_bool_sort" ["list(bool)"] -> "list(bool)";
    m "sort" "list_google.protobuf.Duration_sort" ["list(duration)"] -> "list(duration)";
    m "sort" "list_google.protobuf.Timestamp_sort" ["list(timestamp)"] -> "list(timestamp)";
    m "sort" "list_string_sort" ["list(string)"] -> "list(string)";
    m "sort" "list_bytes_sort" ["list(bytes)"] -> "list(bytes)";
    m "@sortByAssociatedKeys" "list_int_sortByAssociatedKeys" ["list(T)", "list(int)"] -> "list(T)";
    m "@sortByAssociatedKeys" "list_uint_sortByAssociatedKeys" ["list(T)", "list(uint)"] -> "list(T)";
    m "@sortByAssociatedKeys" "list_double_sortByAssociatedKeys" ["list(T)", "list(double)"] -> "list(T)";
    m "@sortByAssociatedKeys" "list_bool_sortByAssociatedKeys" ["list(T)", "list(bool)"] -> "list(T)";
    m "@sortByAssociatedKeys" "list_google.protobuf.Duration_sortByAssociatedKeys" ["list(T)", "list(duration)"] -> "list(T)";
    m "@sortByAssociatedKeys" "list_google.protobuf.Timestamp_sortByAssociatedKeys" ["list(T)", "list(timestamp)"] -> "list(T)";
    m "@sortByAssociatedKeys" "list_string_sortByAssociatedKeys" ["list(T)", "list(string)"] -> "list(T)";
    m "@sortByAssociatedKeys" "list_bytes_sortByAssociatedKeys" ["list(T)", "list(bytes)"] -> "list(T)";
    g "lists.range" "lists_range" ["int"] -> "list(int)";
    m "reverse" "list_reverse" ["list(T)"] -> "list(T)";
    m "distinct" "list_distinct" ["list(T)"] -> "list(T)";
];

/// The table of every library declared in this module, in `base.go` order.
pub fn tables() -> [&'static [OverloadRow]; 14] {
    [
        URLS,
        REGEX,
        LISTS,
        AUTHZ,
        QUANTITY,
        EXT_STRINGS,
        EXT_SETS,
        IP,
        CIDR,
        FORMAT,
        AUTHZ_SELECTORS,
        SEMVER,
        EXT_LISTS,
        LISTS_V1,
    ]
}

/// Every overload of the tables, in merge order.
pub fn all_rows() -> impl Iterator<Item = &'static OverloadRow> {
    tables().into_iter().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overload_ids_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for r in all_rows() {
            assert!(seen.insert(r.id), "duplicate overload id {}", r.id);
        }
    }

    #[test]
    fn rows_are_not_newer_than_their_library_or_the_pinned_release() {
        for r in all_rows() {
            assert!(
                r.since_minor >= library_info(r.library).since_minor,
                "{}",
                r.id
            );
            assert!(r.since_minor <= 37, "{}", r.id);
            assert_eq!(r.member, !r.args.is_empty() && r.member, "{}", r.id);
        }
    }
}
