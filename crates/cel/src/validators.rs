//! The AST validators Kubernetes enables (cel-go v0.29.2 `cel/validator.go`): duration,
//! timestamp and regex literals, and homogeneous aggregate literals. They run on a checked
//! expression only.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::checker::{CheckedTypes, string_literal};
use super::env::EnvOptions;
use super::errors::Issues;
use super::parse::ParsedExpr;
use super::types::Type;

/// Runs the validators selected in `options` (in cel-go's order) and reports into `issues`.
pub fn validate(
    options: &EnvOptions,
    parsed: &ParsedExpr,
    types: &CheckedTypes,
    issues: &mut Issues,
) {
    let root = parsed.expr();
    let mut nodes: Vec<(&IdedExpr, bool)> = Vec::new();
    collect_post_order(root, &options.homogeneous_exempt_functions, &mut nodes);
    let report =
        |issues: &mut Issues, id: u64, msg: String| issues.report(parsed.location(id), id, msg);
    for (name, enabled, check) in [
        (
            "duration",
            options.validate_duration_literals,
            valid_duration_literal as fn(&IdedExpr) -> bool,
        ),
        (
            "timestamp",
            options.validate_timestamp_literals,
            valid_timestamp_literal,
        ),
        (
            "matches",
            options.validate_regex_literals,
            valid_regex_literal,
        ),
    ] {
        if !enabled {
            continue;
        }
        for (e, _) in &nodes {
            let Expr::Call(call) = &e.expr else { continue };
            if call.func_name != name {
                continue;
            }
            let Some(arg) = call.args.first() else {
                continue;
            };
            if !matches!(arg.expr, Expr::Literal(_)) {
                continue;
            }
            if !check(arg) {
                // cel-go v0.29.2 cel/validator.go: formatValidator.Validate
                report(issues, arg.id, format!("invalid {name} argument"));
            }
        }
    }
    if options.homogeneous_aggregate_literals {
        let ty = |id: u64| types.type_of(id).cloned().unwrap_or_else(Type::dyn_type);
        let unwrap_opt = |t: Type| t.param(0).cloned().unwrap_or(t);
        let mismatch = |issues: &mut Issues, id: u64, expected: &Type, actual: &Type| {
            // cel-go v0.29.2 cel/validator.go: homogeneousAggregateLiteralValidator.typeMismatch
            report(
                issues,
                id,
                format!("expected type '{expected}' but found '{actual}'"),
            );
        };
        for (e, in_exempt) in &nodes {
            if !matches!(e.expr, Expr::List(_)) || *in_exempt {
                continue;
            }
            let Expr::List(list) = &e.expr else { continue };
            let mut elem_t: Option<Type> = None;
            for (i, el) in list.elements.iter().enumerate() {
                let mut t = ty(el.id);
                if list.optional_indices.contains(&i) {
                    t = unwrap_opt(t);
                }
                match &elem_t {
                    None => elem_t = Some(t),
                    Some(prev) => {
                        if !prev.is_equivalent(&t) {
                            mismatch(issues, el.id, prev, &t);
                            break;
                        }
                    }
                }
            }
        }
        for (e, in_exempt) in &nodes {
            if !matches!(e.expr, Expr::Map(_)) || *in_exempt {
                continue;
            }
            let Expr::Map(map) = &e.expr else { continue };
            let mut first: Option<(Type, Type)> = None;
            for entry in &map.entries {
                let EntryExpr::MapEntry(me) = &entry.expr else {
                    continue;
                };
                let kt = ty(me.key.id);
                let mut vt = ty(me.value.id);
                if me.optional {
                    vt = unwrap_opt(vt);
                }
                match &first {
                    None => first = Some((kt, vt)),
                    Some((k0, v0)) => {
                        if !k0.is_equivalent(&kt) {
                            mismatch(issues, me.key.id, k0, &kt);
                        }
                        if !v0.is_equivalent(&vt) {
                            mismatch(issues, me.value.id, v0, &vt);
                        }
                    }
                }
            }
        }
    }
}

/// Post-order list of nodes, each with whether it is inside a call of one of the `exempt`
/// functions (iteratively).
fn collect_post_order<'e>(
    root: &'e IdedExpr,
    exempt: &[String],
    out: &mut Vec<(&'e IdedExpr, bool)>,
) {
    // Pre-order collection with children pushed in reverse, then reversed: parents come
    // after their subtrees (the report order matters only for errors at the same position).
    let mut pre: Vec<(&'e IdedExpr, bool)> = Vec::new();
    let mut stack: Vec<(&'e IdedExpr, bool)> = vec![(root, false)];
    let mut kids = Vec::new();
    while let Some((e, in_exempt)) = stack.pop() {
        let child_exempt =
            in_exempt || matches!(&e.expr, Expr::Call(c) if exempt.contains(&c.func_name));
        kids.clear();
        kids.extend(super::parse::children(e));
        for k in kids.iter().rev() {
            stack.push((k, child_exempt));
        }
        pre.push((e, in_exempt));
    }
    pre.reverse();
    out.extend(pre);
}

fn valid_duration_literal(arg: &IdedExpr) -> bool {
    match &arg.expr {
        Expr::Literal(LiteralValue::String(_)) => {
            string_literal(arg).is_some_and(|s| parse_go_duration(s).is_some())
        }
        // Other literal types have no overload and were rejected by the checker; cel-go's
        // evaluation of such a call would fail too.
        _ => false,
    }
}

fn valid_timestamp_literal(arg: &IdedExpr) -> bool {
    match &arg.expr {
        Expr::Literal(LiteralValue::String(_)) => string_literal(arg)
            .and_then(parse_rfc3339_seconds)
            .is_some_and(timestamp_in_range),
        Expr::Literal(LiteralValue::Int(i)) => timestamp_in_range(*i.inner()),
        _ => false,
    }
}

fn valid_regex_literal(arg: &IdedExpr) -> bool {
    match string_literal(arg) {
        Some(p) => valid_re2(p),
        None => false,
    }
}

/// cel-go types/timestamp.go: minUnixTime (0001-01-01T00:00:00Z) and maxUnixTime
/// (9999-12-31T23:59:59Z).
pub fn timestamp_in_range(secs: i64) -> bool {
    (-62_135_596_800..=253_402_300_799).contains(&secs)
}

/// Go `time.ParseDuration`: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, units ns us µs μs ms s m h,
/// `0` alone allowed; the total must fit in an int64 of nanoseconds.
pub fn parse_go_duration(s: &str) -> Option<i128> {
    let mut rest = s;
    let mut neg = false;
    if let Some(r) = rest.strip_prefix('-') {
        neg = true;
        rest = r;
    } else if let Some(r) = rest.strip_prefix('+') {
        rest = r;
    }
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &rest[..int_len];
        rest = &rest[int_len..];
        let mut frac_part = "";
        if let Some(r) = rest.strip_prefix('.') {
            let n = r.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &r[..n];
            rest = &r[n..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return None;
        }
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let mut v: i128 = 0;
        for d in int_part.bytes() {
            v = v.checked_mul(10)?.checked_add(i128::from(d - b'0'))?;
            if v > i128::from(i64::MAX) {
                return None;
            }
        }
        let mut value = v.checked_mul(scale)?;
        if !frac_part.is_empty() {
            let mut f: i128 = 0;
            let mut denom: i128 = 1;
            for d in frac_part.bytes().take(18) {
                f = f * 10 + i128::from(d - b'0');
                denom *= 10;
            }
            value += f * scale / denom;
        }
        total = total.checked_add(value)?;
        if total > i128::from(i64::MAX) + i128::from(neg) {
            return None;
        }
    }
    Some(if neg { -total } else { total })
}

/// Go `time.Parse(time.RFC3339, s)` returning Unix seconds.
pub fn parse_rfc3339_seconds(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(r)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, min, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || hour > 23 || min > 59 || sec > 59 {
        return None;
    }
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days_in_month = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if day < 1 || day > days_in_month[(month - 1) as usize] {
        return None;
    }
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        let n = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return None;
        }
        i += 1 + n;
    }
    let offset = match b.get(i) {
        Some(b'Z') if i + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let (h, m) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            if h > 23 || m > 59 {
                return None;
            }
            let o = h * 3600 + m * 60;
            if *sign == b'-' { -o } else { o }
        }
        _ => return None,
    };
    // Days from civil (proleptic Gregorian), Howard Hinnant's algorithm.
    let (y, m) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hour * 3600 + min * 60 + sec - offset)
}

/// Whether Go's `regexp.Compile` (RE2 syntax) accepts `pattern`, approximated with
/// `regex-syntax` plus the RE2 restrictions it does not have: flags limited to `imsU`,
/// repetition counts at most 1000.
pub fn valid_re2(pattern: &str) -> bool {
    use regex_syntax::ast::{self, Ast};
    let Some(pattern) = expand_quoted_literals(pattern) else {
        return false;
    };
    let pattern = pattern.as_str();
    let Ok(parsed) = ast::parse::ParserBuilder::new()
        .nest_limit(1000)
        .build()
        .parse(pattern)
    else {
        return false;
    };
    struct Re2Rules;
    impl ast::Visitor for Re2Rules {
        type Output = ();
        type Err = ();
        fn finish(self) -> Result<(), ()> {
            Ok(())
        }
        fn visit_pre(&mut self, a: &Ast) -> Result<(), ()> {
            let flags = match a {
                Ast::Flags(f) => Some(&f.flags),
                Ast::Group(g) => match &g.kind {
                    ast::GroupKind::NonCapturing(f) => Some(f),
                    _ => None,
                },
                Ast::Repetition(r) => {
                    // RE2: "invalid nested repetition operator" (`a**`, `a+{2}`).
                    if matches!(*r.ast, Ast::Repetition(_)) {
                        return Err(());
                    }
                    if let ast::RepetitionKind::Range(range) = &r.op.kind {
                        let (lo, hi) = match *range {
                            ast::RepetitionRange::Exactly(n) => (n, n),
                            ast::RepetitionRange::AtLeast(n) => (n, n),
                            ast::RepetitionRange::Bounded(a, b) => (a, b),
                        };
                        if lo > 1000 || hi > 1000 {
                            return Err(());
                        }
                    }
                    None
                }
                _ => None,
            };
            if let Some(flags) = flags {
                for item in &flags.items {
                    if let ast::FlagsItemKind::Flag(f) = &item.kind {
                        match f {
                            ast::Flag::CaseInsensitive
                            | ast::Flag::MultiLine
                            | ast::Flag::DotMatchesNewLine
                            | ast::Flag::SwapGreed => {}
                            _ => return Err(()),
                        }
                    }
                }
            }
            Ok(())
        }
    }
    if ast::visit(&parsed, Re2Rules).is_err() {
        return false;
    }
    regex_syntax::hir::translate::TranslatorBuilder::new()
        .utf8(false)
        .build()
        .translate(pattern, &parsed)
        .is_ok()
}

/// Rewrites RE2 syntax that `regex-syntax` spells differently into an equivalent pattern:
/// `\Q...\E` quoting becomes escaped literals, a `{` that does not start a valid repetition is
/// a literal in RE2 (`a{,3}`, `a{`), and the empty flag group `(?)` is a plain group.
fn expand_quoted_literals(pattern: &str) -> Option<String> {
    fn valid_repeat(rest: &str) -> bool {
        // rest starts after `{`: digits, optionally `,` and digits, then `}`.
        let b = rest.as_bytes();
        let mut i = 0;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == 0 {
            return false;
        }
        if b.get(i) == Some(&b',') {
            i += 1;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
        }
        b.get(i) == Some(&b'}')
    }
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    // Inside `[...]`: RE2 treats `[` (unless `[:name:]`), `&`, `~` as literals and `-` after a
    // class (`[\d-z]`) as a literal; `regex-syntax` gives them set-operator meanings.
    let mut in_class = false;
    let mut class_start = false;
    let mut prev_was_class = false;
    let mut prev_was_dash = false;
    while let Some(c) = chars.next() {
        let was_class = std::mem::replace(&mut prev_was_class, false);
        let at_start = std::mem::replace(&mut class_start, false);
        let was_dash = std::mem::replace(&mut prev_was_dash, false);
        match c {
            // RE2 knows no `\Q` inside a class.
            '\\' if in_class && chars.as_str().starts_with('Q') => return None,
            '\\' => match chars.next() {
                Some('Q') => {
                    let rest = chars.as_str();
                    let (quoted, after) = match rest.find("\\E") {
                        Some(i) => (&rest[..i], &rest[i + 2..]),
                        None => (rest, ""),
                    };
                    out.push_str(&regex_syntax::escape(quoted));
                    chars = after.chars();
                }
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                    // `\x{..}`, `\p{..}`, `\P{..}`: the braces belong to the escape;
                    // `\pL`: so does the one-letter class name.
                    if matches!(n, 'x' | 'p' | 'P') && chars.as_str().starts_with('{') {
                        let rest = chars.as_str();
                        let end = rest.find('}').map_or(rest.len(), |i| i + 1);
                        out.push_str(&rest[..end]);
                        chars = rest[end..].chars();
                    } else if matches!(n, 'p' | 'P')
                        && let Some(letter) = chars.next()
                    {
                        out.push(letter);
                    }
                    prev_was_class = matches!(n, 'd' | 'D' | 'w' | 'W' | 's' | 'S' | 'p' | 'P');
                }
                None => out.push('\\'),
            },
            ']' if in_class && !at_start => {
                out.push(']');
                in_class = false;
            }
            ']' if in_class => out.push_str("\\]"),
            '[' if in_class => {
                let rest = chars.as_str();
                // Go's regexp/syntax parseNamedClass looks for the closing `:]` only after
                // the opening `[:`, so `[[:]` is a literal `[`, `:` and not a named class.
                let close = rest
                    .strip_prefix(':')
                    .and_then(|after| after.find(":]"))
                    .map(|i| i + 1);
                match (rest.strip_prefix(':'), close) {
                    (Some(_), Some(end)) => {
                        const NAMES: &[&str] = &[
                            "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower",
                            "print", "punct", "space", "upper", "word", "xdigit",
                        ];
                        let name = &rest[1..end];
                        if !NAMES.contains(&name.strip_prefix('^').unwrap_or(name)) {
                            // RE2: invalid character class range.
                            return None;
                        }
                        out.push('[');
                        out.push_str(&rest[..end + 2]);
                        chars = rest[end + 2..].chars();
                        prev_was_class = true;
                    }
                    _ => out.push_str("\\["),
                }
            }
            '&' | '~' if in_class => {
                out.push('\\');
                out.push(c);
            }
            '-' if in_class && (was_class || was_dash) => out.push_str("\\-"),
            '-' if in_class => {
                out.push('-');
                prev_was_dash = true;
            }
            '[' => {
                out.push('[');
                in_class = true;
                class_start = true;
                if chars.as_str().starts_with('^') {
                    out.push('^');
                    chars.next();
                }
            }
            '{' if !in_class && !valid_repeat(chars.as_str()) => out.push_str("\\{"),
            '(' if !in_class && chars.as_str().starts_with("?)") => {
                out.push_str("(?:");
                chars.next();
            }
            _ => out.push(c),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        for ok in [
            "0",
            "1h",
            "1.5h",
            "-2m3s",
            "300ms",
            "1µs",
            ".5s",
            "1h2m3s4ms5us6ns",
        ] {
            assert!(parse_go_duration(ok).is_some(), "{ok}");
        }
        for bad in [
            "",
            "1",
            "h",
            "1d",
            "1hh",
            "--1s",
            "1.s.",
            "9999999999999999999h",
        ] {
            assert!(parse_go_duration(bad).is_none(), "{bad}");
        }
        assert_eq!(parse_go_duration("1.5s"), Some(1_500_000_000));
        // Long fractions must not overflow.
        assert!(parse_go_duration(&format!("1.{}h", "9".repeat(60))).is_some());
    }

    #[test]
    fn rfc3339() {
        assert_eq!(parse_rfc3339_seconds("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339_seconds("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(
            parse_rfc3339_seconds("2009-02-13T23:31:30.123Z"),
            Some(1_234_567_890)
        );
        assert!(parse_rfc3339_seconds("2023-02-29T00:00:00Z").is_none());
        assert!(parse_rfc3339_seconds("2023-01-01 00:00:00Z").is_none());
        assert!(parse_rfc3339_seconds("2023-01-01T00:00:00").is_none());
    }

    #[test]
    fn re2_rules() {
        assert!(valid_re2("^[a-z]+(-[a-z0-9]+)*$"));
        assert!(valid_re2("(?i)abc"));
        assert!(!valid_re2("(?x)abc"));
        assert!(!valid_re2("a{1001}"));
        assert!(!valid_re2("(abc"));
        assert!(!valid_re2("a(?=b)"));
        assert!(!valid_re2("\\1"));
        assert!(!valid_re2("a**"));
        assert!(valid_re2("(?:a*)*"));
        assert!(valid_re2("\\Q...\\E"));
        assert!(valid_re2("\\Qa(b"));
        assert!(valid_re2("a{,3}"));
        assert!(valid_re2("a{"));
        assert!(valid_re2("(?)"));
        assert!(valid_re2("\\x{10FFFF}\\p{Greek}"));
        assert!(valid_re2("[\\d-z]"));
        assert!(valid_re2("[a&&b~~c]"));
        // Named classes: Go's regexp (go1.26 `regexp.Compile`) accepts the first two and rejects the
        // rest with "invalid character class range"; `[[:]` once panicked here.
        assert!(valid_re2("[[:]"));
        assert!(valid_re2("[[:]]"));
        assert!(!valid_re2("[[::]]"));
        assert!(!valid_re2("[[:a:]]"));
        assert!(!valid_re2("a[[:]:]"));
        assert!(valid_re2("[[:alpha:]]"));
        assert!(valid_re2("[[]"));
        assert!(valid_re2("[]a]"));
        assert!(valid_re2("[^]a]"));
        assert!(valid_re2("[[:alpha:]-]"));
        assert!(valid_re2("[\\pL-]"));
        assert!(!valid_re2("[z-a]"));
        assert!(!valid_re2("[a-\\d]"));
        assert!(!valid_re2("[a--b]"));
        assert!(!valid_re2("[[:foo:]]"));
        assert!(!valid_re2("[\\Q]\\E]"));
        assert!(valid_re2("a{2,3}"));
        assert!(!valid_re2("a{3,2}"));
    }
}
