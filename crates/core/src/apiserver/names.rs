//! Name and label format checks of apimachinery 0.37.1, with their exact messages:
//! `pkg/util/validation/validation.go` (`IsDNS1123Subdomain`, `IsDNS1035Label`; lengths in
//! "characters") and `pkg/api/validate/content` (`IsLabelKey` = `IsQualifiedName`,
//! `IsLabelValue`, `IsPathSegmentName`; lengths in "bytes").

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

fn dns1123_subdomain_fmt() -> String {
    format!("{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*")
}

/// apimachinery `RegexError`.
fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{re}')");
    }
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{re}')"));
    s
}

fn is_lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn matches_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && is_lower_alnum(b[0])
        && is_lower_alnum(b[b.len() - 1])
        && b.iter().all(|&c| is_lower_alnum(c) || c == b'-')
}

fn matches_dns1123_subdomain(s: &str) -> bool {
    s.split('.').all(matches_dns1123_label)
}

/// `[a-z]([-a-z0-9]*[a-z0-9])?`
fn matches_dns1035_label(s: &str) -> bool {
    matches_dns1123_label(s) && s.as_bytes()[0].is_ascii_lowercase()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn matches_label_key_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `utilvalidation.IsDNS1123Subdomain` (lengths in characters).
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    dns1123_subdomain(value, "characters")
}

/// `content.IsDNS1123Subdomain` (lengths in bytes), used by `IsLabelKey` for the prefix.
fn content_is_dns1123_subdomain(value: &str) -> Vec<String> {
    dns1123_subdomain(value, "bytes")
}

/// The two `IsDNS1123Subdomain`s, which differ only in the unit of their length message.
fn dns1123_subdomain(value: &str, unit: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(format!("must be no more than 253 {unit}"));
    }
    if !matches_dns1123_subdomain(value) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            &dns1123_subdomain_fmt(),
            &["example.com"],
        ));
    }
    errs
}

/// `utilvalidation.IsDNS1035Label`.
pub fn is_dns1035_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_owned());
    }
    if !matches_dns1035_label(value) {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `genericvalidation.NameIsDNSSubdomain(name, prefix)`: for a `generateName` prefix,
/// `maskTrailingDash` replaces the last two characters of a name ending in `-` by `a`
/// (apimachinery `pkg/api/validation/generic.go`, exactly so).
pub fn name_is_dns_subdomain(name: &str, prefix: bool) -> Vec<String> {
    if prefix && name.len() > 1 && name.ends_with('-') {
        let cut = name.len() - 2;
        let masked = match name.get(..cut) {
            Some(head) => format!("{head}a"),
            // A multi-byte character before the dash: the Go slice cuts bytes; the result is
            // not a valid subdomain either way.
            None => format!("{}a", String::from_utf8_lossy(&name.as_bytes()[..cut])),
        };
        return is_dns1123_subdomain(&masked);
    }
    is_dns1123_subdomain(name)
}

/// `content.IsLabelKey` (= `IsQualifiedName`).
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                for m in content_is_dns1123_subdomain(prefix) {
                    errs.push(format!("prefix part {m}"));
                }
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_ERR, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 bytes".to_owned());
    }
    if !matches_label_key_name(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_ERR,
                LABEL_KEY_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `content.IsLabelValue`.
pub fn is_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 bytes".to_owned());
    }
    if !value.is_empty() && !matches_label_key_name(value) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            &format!("({LABEL_KEY_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `content.IsPathSegmentName`.
pub fn is_path_segment_name(name: &str) -> Vec<String> {
    for illegal in [".", ".."] {
        if name == illegal {
            return vec![format!("may not be '{illegal}'")];
        }
    }
    ["/", "%"]
        .iter()
        .filter(|c| name.contains(**c))
        .map(|c| format!("may not contain '{c}'"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert!(is_dns1123_subdomain("a.b-c.d1").is_empty());
        assert_eq!(is_dns1123_subdomain("Bad_Name").len(), 1);
        assert!(is_dns1123_subdomain("Bad_Name")[0].ends_with(
            "(e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        ));
        assert!(is_dns1123_subdomain("a..b").len() == 1);
        assert!(is_dns1035_label("v1").is_empty());
        assert_eq!(is_dns1035_label("1v").len(), 1);
        assert!(is_qualified_name("example.com/My_name.x").is_empty());
        assert_eq!(
            is_qualified_name("/x"),
            vec!["prefix part must be non-empty"]
        );
        assert_eq!(is_qualified_name("a/b/c").len(), 1);
        assert_eq!(is_qualified_name("-x").len(), 1);
        assert_eq!(is_qualified_name(""), {
            let e = is_qualified_name("");
            assert_eq!(e[0], "name part must be non-empty");
            e
        });
        assert!(is_label_value("").is_empty());
        assert_eq!(is_label_value("a b").len(), 1);
        assert_eq!(is_path_segment_name(".."), vec!["may not be '..'"]);
        assert_eq!(
            is_path_segment_name("a/%"),
            vec!["may not contain '/'", "may not contain '%'"]
        );
        assert!(name_is_dns_subdomain("gen-", true).is_empty());
    }
}
