//! Whether a DeletingPolicy's `spec.schedule` parses, and the error when it does not, as
//! `github.com/aptible/supercronic/cronexpr` `Parse` (v0.2.48, the parser Kyverno v1.19.1's
//! `pkg/cel/policies/dpol/validate.go` `Validate` and its deleting controller use) answers.
//! Only the verdict and the error text: no schedule is computed.
//!
//! Upstream, cronexpr/cronexpr.go `parse` (non-strict) and cronexpr/cronexpr_parse.go:
//! the aliases `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@hourly` are replaced
//! wherever they occur (`cronNormalizer`); the line is split at white space (`\S+`); fewer than
//! 5 fields is `missing field(s)`, more than 7 are ignored; 7 fields start with seconds, and a
//! 6th field after the day of week is the year. Each field is split at commas (`[^,]+`) into
//! directives matched, lower-cased, against the layouts of `genericFieldParse`, the day of
//! month also against `L`, `LW`, `<n>W`, the day of week against `<n>L`, `<n>#<1-5>`.

/// One field's description (`fieldDescriptor`).
struct Field {
    name: &'static str,
    max: i64,
    /// Whether a (lower-cased) text matches `valuePattern` whole.
    value: fn(&str) -> bool,
    /// `atoi` of a matched value.
    atoi: fn(&str) -> i64,
}

fn digit(c: u8) -> bool {
    c.is_ascii_digit()
}

/// `0?[0-9]|[1-5][0-9]`.
fn sixty(s: &str) -> bool {
    match s.as_bytes() {
        [a] => digit(*a),
        [a, b] => (b'0'..=b'5').contains(a) && digit(*b),
        _ => false,
    }
}

/// `0?[0-9]|1[0-9]|2[0-3]`.
fn hour(s: &str) -> bool {
    match s.as_bytes() {
        [a] => digit(*a),
        [a, b] => {
            (matches!(a, b'0' | b'1') && digit(*b)) || (*a == b'2' && (b'0'..=b'3').contains(b))
        }
        _ => false,
    }
}

/// `0?[1-9]|[12][0-9]|3[01]`.
fn day_of_month(s: &str) -> bool {
    match s.as_bytes() {
        [a] => (b'1'..=b'9').contains(a),
        [a, b] => {
            (*a == b'0' && (b'1'..=b'9').contains(b))
                || (matches!(a, b'1' | b'2') && digit(*b))
                || (*a == b'3' && matches!(b, b'0' | b'1'))
        }
        _ => false,
    }
}

const MONTH_NAMES: &[&str] = &[
    "jan",
    "feb",
    "mar",
    "apr",
    "may",
    "jun",
    "jul",
    "aug",
    "sep",
    "oct",
    "nov",
    "dec",
    "january",
    "february",
    "march",
    "april",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// `0?[1-9]|1[012]|<month names>`.
fn month(s: &str) -> bool {
    MONTH_NAMES.contains(&s)
        || match s.as_bytes() {
            [a] => (b'1'..=b'9').contains(a),
            [a, b] => {
                (*a == b'0' && (b'1'..=b'9').contains(b))
                    || (*a == b'1' && matches!(b, b'0'..=b'2'))
            }
            _ => false,
        }
}

const DOW_NAMES: &[&str] = &[
    "sun",
    "mon",
    "tue",
    "wed",
    "thu",
    "fri",
    "sat",
    "sunday",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
];

/// `0?[0-7]|<day names>`.
fn day_of_week(s: &str) -> bool {
    DOW_NAMES.contains(&s)
        || match s.as_bytes() {
            [a] => (b'0'..=b'7').contains(a),
            [a, b] => *a == b'0' && (b'0'..=b'7').contains(b),
            _ => false,
        }
}

/// `19[789][0-9]|20[0-9]{2}`.
fn year(s: &str) -> bool {
    match s.as_bytes() {
        [b'1', b'9', c, d] => (b'7'..=b'9').contains(c) && digit(*d),
        [b'2', b'0', c, d] => digit(*c) && digit(*d),
        _ => false,
    }
}

/// `numberTokens`: `0`–`59`, `00`–`09`, `1970`–`2099`; anything else is 0.
fn number(s: &str) -> i64 {
    let known = match s.len() {
        1 => true,
        2 => s.as_bytes()[0] == b'0' || s.as_bytes()[0] <= b'5',
        4 => year(s),
        _ => false,
    };
    if known && s.bytes().all(|c| c.is_ascii_digit()) {
        s.parse().unwrap_or(0)
    } else {
        0
    }
}

/// `monthTokens`: `1`–`12`, `01`–`09`, the names.
fn month_number(s: &str) -> i64 {
    if let Some(i) = MONTH_NAMES.iter().position(|m| *m == s) {
        // The short names then the long ones, May only once.
        let index = i64::try_from(i).unwrap_or(0);
        return if index < 12 {
            index + 1
        } else {
            let long = index - 12;
            if long < 4 { long + 1 } else { long + 2 }
        };
    }
    match s {
        "1" | "01" => 1,
        "2" | "02" => 2,
        "3" | "03" => 3,
        "4" | "04" => 4,
        "5" | "05" => 5,
        "6" | "06" => 6,
        "7" | "07" => 7,
        "8" | "08" => 8,
        "9" | "09" => 9,
        "10" => 10,
        "11" => 11,
        "12" => 12,
        _ => 0,
    }
}

/// `dowTokens`: `0`–`7` (`7` is Sunday, 0), the names; anything else (`05`) is 0.
fn dow_number(s: &str) -> i64 {
    if let Some(i) = DOW_NAMES.iter().position(|d| *d == s) {
        return i64::try_from(i % 7).unwrap_or(0);
    }
    match s.as_bytes() {
        [a] if (b'0'..=b'6').contains(a) => i64::from(a - b'0'),
        _ => 0,
    }
}

const SECOND: Field = Field {
    name: "second",
    max: 59,
    value: sixty,
    atoi: number,
};
const MINUTE: Field = Field {
    name: "minute",
    max: 59,
    value: sixty,
    atoi: number,
};
const HOUR: Field = Field {
    name: "hour",
    max: 23,
    value: hour,
    atoi: number,
};
const DAY_OF_MONTH: Field = Field {
    name: "day-of-month",
    max: 31,
    value: day_of_month,
    atoi: number,
};
const MONTH: Field = Field {
    name: "month",
    max: 12,
    value: month,
    atoi: month_number,
};
const DAY_OF_WEEK: Field = Field {
    name: "day-of-week",
    max: 6,
    value: day_of_week,
    atoi: dow_number,
};
const YEAR: Field = Field {
    name: "year",
    max: 2099,
    value: year,
    atoi: number,
};

/// `\d+` (ASCII digits).
fn digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())
}

/// What `genericFieldParse` makes of one directive.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Directive {
    /// `*` or `?` (`all`).
    All,
    /// A value, a range or an interval (`one`, `span`).
    Known,
    /// None of its layouts (`none`): left to the field's handler.
    Other,
}

/// One directive as `genericFieldParse` reads it, or its error.
fn directive(d: &str, f: &Field) -> Result<Directive, String> {
    let s = d.to_lowercase();
    if s == "*" || s == "?" {
        return Ok(Directive::All);
    }
    if (f.value)(&s) {
        return Ok(Directive::Known);
    }
    let interval = |step: &str| -> Result<Directive, String> {
        let step = number(step);
        if step < 1 || step > f.max {
            return Err(format!("invalid interval {s}"));
        }
        Ok(Directive::Known)
    };
    // `5-20`: the value patterns have no `-`, so the split is at the first `-`.
    if let Some((a, b)) = s.split_once('-')
        && (f.value)(a)
        && (f.value)(b)
    {
        let (first, last) = ((f.atoi)(a), (f.atoi)(b));
        if last < first {
            return Err(format!(
                "invalid interval {s} (normalized to {first}-{last})"
            ));
        }
        return Ok(Directive::Known);
    }
    if let Some((head, step)) = s.split_once('/')
        && digits(step)
    {
        // `*/2`, `5/2`
        if head == "*" || (f.value)(head) {
            return interval(step);
        }
        // `5-20/2`
        if let Some((a, b)) = head.split_once('-')
            && (f.value)(a)
            && (f.value)(b)
        {
            return interval(step);
        }
    }
    Ok(Directive::Other)
}

/// Whether the day-of-month or day-of-week handler knows a directive `genericFieldParse` left:
/// `L`, `LW`, `15W` (`domFieldHandler`); `5L`, `5#3` (`dowFieldHandler`).
fn special(s: &str, f: &Field) -> bool {
    match f.name {
        "day-of-month" => {
            s == "l" || s == "lw" || s.strip_suffix('w').is_some_and(|v| (f.value)(v))
        }
        "day-of-week" => {
            s.strip_suffix('l').is_some_and(|v| (f.value)(v))
                || s.split_once('#')
                    .is_some_and(|(v, w)| (f.value)(v) && matches!(w, "1" | "2" | "3" | "4" | "5"))
        }
        _ => false,
    }
}

/// One field: its directives (`genericFieldParse`, every interval error first), then its
/// handler over them in order. `genericFieldHandler` (every field but the days) stops at the
/// first `*`, so an unknown directive after one is not an error there.
fn field(text: &str, f: &Field) -> Result<(), String> {
    let entries: Vec<&str> = text.split(',').filter(|e| !e.is_empty()).collect();
    if entries.is_empty() {
        return Err(format!("{} field: missing directive", f.name));
    }
    let kinds = entries
        .iter()
        .map(|e| directive(e, f))
        .collect::<Result<Vec<_>, _>>()?;
    let days = matches!(f.name, "day-of-month" | "day-of-week");
    for (e, kind) in entries.iter().zip(kinds) {
        match kind {
            Directive::All if !days => return Ok(()),
            Directive::All | Directive::Known => {}
            Directive::Other => {
                if !(days && special(&e.to_lowercase(), f)) {
                    return Err(format!("syntax error in {} field: '{e}'", f.name));
                }
            }
        }
    }
    Ok(())
}

/// The aliases (`cronNormalizer`), replaced left to right wherever they occur.
fn normalize(line: &str) -> String {
    const ALIASES: [(&str, &str); 6] = [
        ("@yearly", "0 0 0 1 1 * *"),
        ("@annually", "0 0 0 1 1 * *"),
        ("@monthly", "0 0 0 1 * * *"),
        ("@weekly", "0 0 0 * * 0 *"),
        ("@daily", "0 0 0 * * * *"),
        ("@hourly", "0 0 * * * * *"),
    ];
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    'scan: while !rest.is_empty() {
        for (alias, with) in ALIASES {
            if let Some(after) = rest.strip_prefix(alias) {
                out.push_str(with);
                rest = after;
                continue 'scan;
            }
        }
        let mut chars = rest.chars();
        if let Some(c) = chars.next() {
            out.push(c);
        }
        rest = chars.as_str();
    }
    out
}

/// `cronexpr.Parse(line)`: `Ok(())`, or its error text.
pub fn parse(line: &str) -> Result<(), String> {
    let cron = normalize(line);
    // RE2's `\s`: `[\t\n\f\r ]`.
    let fields: Vec<&str> = cron
        .split(['\t', '\n', '\x0c', '\r', ' '])
        .filter(|f| !f.is_empty())
        .collect();
    if fields.len() < 5 {
        return Err("missing field(s)".into());
    }
    let count = fields.len().min(7);
    let mut order: Vec<&Field> = Vec::new();
    if count == 7 {
        order.push(&SECOND);
    }
    order.extend([&MINUTE, &HOUR, &DAY_OF_MONTH, &MONTH, &DAY_OF_WEEK]);
    if order.len() < count {
        order.push(&YEAR);
    }
    for (text, f) in fields.iter().zip(order) {
        field(text, f)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn schedules_and_errors_as_cronexpr_gives_them() {
        for ok in [
            "* * * * *",
            "*/1 * * * *",
            "0 0 * * 0",
            "@daily",
            "@hourly",
            "0 0 1 jan mon",
            "0 0 L * 5L",
            "0 0 15W * 1#3",
            "0 0 LW * *",
            "1-5/2 0 * * *",
            "0 0 0 1 1 * 2030",
            "0 0 * * * 2030",
            "5/10 * * * *",
            "0 0 * * 7",
            "*,foo * * * *",
        ] {
            assert_eq!(parse(ok), Ok(()), "{ok}");
        }
        for (bad, err) in [
            ("", "missing field(s)"),
            ("* * * *", "missing field(s)"),
            ("60 * * * *", "syntax error in minute field: '60'"),
            ("* 24 * * *", "syntax error in hour field: '24'"),
            ("* * 0 * *", "syntax error in day-of-month field: '0'"),
            ("* * * 13 *", "syntax error in month field: '13'"),
            ("* * * * 8", "syntax error in day-of-week field: '8'"),
            ("*/0 * * * *", "invalid interval */0"),
            ("*/60 * * * *", "invalid interval */60"),
            ("5-1 * * * *", "invalid interval 5-1 (normalized to 5-1)"),
            (
                "* * * * MON-sun",
                "invalid interval mon-sun (normalized to 1-0)",
            ),
            (", * * * *", "minute field: missing directive"),
            ("* * * * * 1960", "syntax error in year field: '1960'"),
            ("every minute", "missing field(s)"),
            ("foo,* * * * *", "syntax error in minute field: 'foo'"),
        ] {
            assert_eq!(parse(bad), Err(err.to_owned()), "{bad}");
        }
    }
}
