//! Parsing with the `cel` 0.15 parser, made safe for any input and with cel-go v0.29.2
//! error texts (`parser/parser.go`): the expression size limit and the recursion limit are
//! enforced before the parser can go deep.

use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, SourceInfo};

use super::errors::{Issues, Location, Source};

/// cel-go parser default `expressionSizeCodePointLimit`.
pub const EXPRESSION_SIZE_CODE_POINT_LIMIT: usize = 100_000;

/// cel-go parser default `maxRecursionDepth`.
pub const MAX_RECURSION_DEPTH: usize = 250;

/// A successfully parsed expression with its source positions.
pub struct ParsedExpr {
    expr: IdedExpr,
    info: SourceInfo,
    source: Arc<Source>,
    max_id: u64,
    depth: usize,
}

impl std::fmt::Debug for ParsedExpr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParsedExpr")
            .field("source", &self.source.text())
            .field("max_id", &self.max_id)
            .finish()
    }
}

impl ParsedExpr {
    /// The root of the AST.
    pub fn expr(&self) -> &IdedExpr {
        &self.expr
    }

    /// The source text.
    pub fn source(&self) -> &Arc<Source> {
        &self.source
    }

    /// The largest expression id in the AST.
    pub fn max_id(&self) -> u64 {
        self.max_id
    }

    /// The number of nodes on the longest root-to-leaf path.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// The UTF-8 byte offset of the principal token of node `id`.
    pub fn offset(&self, id: u64) -> Option<usize> {
        self.info.offset_for(id).map(|(start, _)| start as usize)
    }

    /// The location of node `id` (cel-go `SourceInfo.GetStartLocation`); `None` when the node
    /// has no recorded position.
    pub fn location(&self, id: u64) -> Option<Location> {
        self.offset(id).map(|b| self.source.location_of_byte(b))
    }
}

impl Drop for ParsedExpr {
    fn drop(&mut self) {
        drop_iteratively(std::mem::take(&mut self.expr));
    }
}

/// The children of a node, moved out (so that dropping never recurses deeply).
fn take_children(e: &mut IdedExpr, out: &mut Vec<IdedExpr>) {
    match &mut e.expr {
        Expr::Call(c) => {
            if let Some(t) = c.target.take() {
                out.push(*t);
            }
            out.append(&mut c.args);
        }
        Expr::Comprehension(c) => {
            let c = &mut **c;
            for x in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                out.push(std::mem::take(x));
            }
        }
        Expr::List(l) => out.append(&mut l.elements),
        Expr::Map(m) => {
            for entry in m.entries.iter_mut() {
                if let EntryExpr::MapEntry(me) = &mut entry.expr {
                    out.push(std::mem::take(&mut me.key));
                    out.push(std::mem::take(&mut me.value));
                }
            }
        }
        Expr::Struct(s) => {
            for entry in s.entries.iter_mut() {
                if let EntryExpr::StructField(f) = &mut entry.expr {
                    out.push(std::mem::take(&mut f.value));
                }
            }
        }
        Expr::Select(s) => out.push(std::mem::take(&mut *s.operand)),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn drop_iteratively(root: IdedExpr) {
    let mut stack = vec![root];
    while let Some(mut e) = stack.pop() {
        take_children(&mut e, &mut stack);
    }
}

/// The direct sub-expressions of `e`, in source order (a call's target first; a
/// comprehension's range, init, condition, step and result; map keys and values; struct field
/// values; a select's operand).
pub fn children(e: &IdedExpr) -> Vec<&IdedExpr> {
    let mut out = Vec::new();
    for_each_child(e, |c| out.push(c));
    out
}

/// Calls `f` on each of [`children`]`(e)`, in the same order, without collecting them.
pub fn for_each_child<'e>(e: &'e IdedExpr, mut f: impl FnMut(&'e IdedExpr)) {
    match &e.expr {
        Expr::Call(c) => {
            if let Some(t) = &c.target {
                f(t);
            }
            c.args.iter().for_each(f);
        }
        Expr::Comprehension(c) => {
            [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ]
            .into_iter()
            .for_each(f);
        }
        Expr::List(l) => l.elements.iter().for_each(f),
        Expr::Map(m) => {
            for entry in &m.entries {
                if let EntryExpr::MapEntry(me) = &entry.expr {
                    f(&me.key);
                    f(&me.value);
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &s.entries {
                if let EntryExpr::StructField(sf) = &entry.expr {
                    f(&sf.value);
                }
            }
        }
        Expr::Select(s) => f(&s.operand),
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// Visits every node (pre-order, iteratively) and returns (max id, max depth).
fn measure(root: &IdedExpr) -> (u64, usize) {
    let mut max_id = 0;
    let mut max_depth = 0;
    let mut stack = vec![(root, 1usize)];
    while let Some((e, d)) = stack.pop() {
        max_id = max_id.max(e.id);
        max_depth = max_depth.max(d);
        for c in children(e) {
            stack.push((c, d + 1));
        }
    }
    (max_id, max_depth)
}

/// Whether cel-go's parser visitor counts this node against its recursion limit
/// (`checkAndIncrementRecursionDepth` in parser/parser.go: ternaries, relations, arithmetic,
/// selections, member calls and indexing). Macro-generated nodes (placed at the macro call's
/// offset) do not count.
fn counts_for_visitor(e: &IdedExpr, info: &SourceInfo, macro_offset: Option<u32>) -> bool {
    if let Some(off) = macro_offset
        && info.offset_for(e.id).map(|(s, _)| s) == Some(off)
        && !matches!(e.expr, Expr::Comprehension(_) | Expr::Select(_))
    {
        return false;
    }
    match &e.expr {
        Expr::Select(_) | Expr::Comprehension(_) => true,
        Expr::Call(c) => match c.func_name.as_str() {
            "_<_" | "_<=_" | "_>_" | "_>=_" | "_==_" | "_!=_" | "@in" | "_+_" | "_*_" | "_/_"
            | "_%_" | "_?_:_" | "_[_]" | "_[?_]" | "_?._" => true,
            "_-_" => c.args.len() == 2,
            "-_" | "!_" | "_&&_" | "_||_" => false,
            _ => c.target.is_some(),
        },
        _ => false,
    }
}

/// cel-go's parser visitor recursion depth of the expression (see [`counts_for_visitor`]).
fn visitor_depth(root: &IdedExpr, info: &SourceInfo) -> usize {
    let mut max = 0;
    let mut stack = vec![(root, 0usize, None::<u32>)];
    while let Some((e, d, macro_offset)) = stack.pop() {
        let d = d + usize::from(counts_for_visitor(e, info, macro_offset));
        max = max.max(d);
        let inner_offset = match &e.expr {
            Expr::Comprehension(_) => info.offset_for(e.id).map(|(s, _)| s),
            _ => macro_offset,
        };
        for c in children(e) {
            stack.push((c, d, inner_offset));
        }
    }
    max
}

/// Calls `f` on every node of the tree, iteratively (pre-order).
pub fn walk<'e>(root: &'e IdedExpr, mut f: impl FnMut(&'e IdedExpr)) {
    let mut stack = vec![root];
    while let Some(e) = stack.pop() {
        f(e);
        let cs = children(e);
        stack.extend(cs.into_iter().rev());
    }
}

/// The deepest nesting of `(`, `[` and `{` outside string and bytes literals: a cheap
/// lower bound of the parser's expression recursion depth.
fn bracket_depth(text: &str) -> usize {
    let b = text.as_bytes();
    let mut i = 0;
    let mut depth = 0usize;
    let mut max = 0usize;
    while i < b.len() {
        match b[i] {
            b'(' | b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            q @ (b'"' | b'\'') => {
                let triple = b.len() >= i + 3 && b[i + 1] == q && b[i + 2] == q;
                // A raw-string prefix (r/R) disables escapes.
                let raw = i > 0 && matches!(b[i - 1], b'r' | b'R');
                if triple {
                    i += 3;
                    while i < b.len()
                        && !(b.len() >= i + 3 && b[i] == q && b[i + 1] == q && b[i + 2] == q)
                    {
                        if b[i] == b'\\' && !raw {
                            i += 1;
                        }
                        i += 1;
                    }
                    i += 2;
                } else {
                    i += 1;
                    while i < b.len() && b[i] != q && b[i] != b'\n' {
                        if b[i] == b'\\' && !raw {
                            i += 1;
                        }
                        i += 1;
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    max
}

/// Parses `text` (optional syntax enabled) as cel-go would, reporting errors in cel-go form.
pub fn parse(text: &str) -> Result<ParsedExpr, Issues> {
    parse_with_options(text, true)
}

/// [`parse`], with the optional syntax (`a.?b`, `a[?i]`, `[?x]`, `{?k: v}`) enabled or not
/// (cel-go enables it with the `OptionalTypes()` library; without it the parser reports
/// `unsupported syntax '.?'` and the like).
pub fn parse_with_options(text: &str, optional_syntax: bool) -> Result<ParsedExpr, Issues> {
    let source = Arc::new(Source::new(text));
    let mut issues = Issues::new(source.clone());
    let size = text.chars().count();
    if size > EXPRESSION_SIZE_CODE_POINT_LIMIT {
        // cel-go v0.29.2 parser/parser.go: Parse
        issues.report(
            None,
            0,
            format!("expression code point size exceeds limit: size: {size}, limit {EXPRESSION_SIZE_CODE_POINT_LIMIT}"),
        );
        return Err(issues);
    }
    if bracket_depth(text) >= MAX_RECURSION_DEPTH {
        issues.report(None, 0, recursion_message());
        return Err(issues);
    }
    let result = cel::parser::Parser::new()
        .enable_optional_syntax(optional_syntax)
        // cel-go v0.29.2 parser.NewParser enables backtick-escaped identifiers by default.
        .enable_ident_escape_syntax(true)
        .max_recursion_depth((MAX_RECURSION_DEPTH - 1) as u16)
        .parse_with_source_info(text);
    match result {
        Ok((expr, mut info)) => {
            move_negative_literal_offsets(&expr, &mut info, text);
            if visitor_depth(&expr, &info) > MAX_RECURSION_DEPTH {
                // cel-go v0.29.2 parser/parser.go: checkAndIncrementRecursionDepth
                issues.report(None, 0, "max recursion depth exceeded".to_string());
                drop_iteratively(expr);
                return Err(issues);
            }
            if let Some(loc) = overwritten_accumulator(&expr, &info, &source) {
                // cel-go v0.29.2 parser/macro.go: the iteration variable may not be named like
                // the accumulator (`__result__`); the `cel` parser does not check this.
                issues.report(
                    Some(loc),
                    0,
                    "iteration variable overwrites accumulator variable".to_string(),
                );
                drop_iteratively(expr);
                return Err(issues);
            }
            let (max_id, depth) = measure(&expr);
            Ok(ParsedExpr {
                expr,
                info,
                source,
                max_id,
                depth,
            })
        }
        Err(errs) => {
            if errs
                .errors
                .iter()
                .any(|e| e.msg.contains("Recursion limit of"))
            {
                issues.report(None, 0, recursion_message());
                return Err(issues);
            }
            // The `cel` parser also reports the incomplete parse-tree nodes it meets after a
            // syntax error (`Incomplete ...`, `No ...`); cel-go's visitor stays silent.
            let follow_up = |m: &str| m.starts_with("Incomplete ") || m.starts_with("No `");
            let has_syntax_error = errs.errors.iter().any(|e| !follow_up(&e.msg));
            for e in &errs.errors {
                if has_syntax_error && follow_up(&e.msg) {
                    continue;
                }
                let (line, col) = e.pos;
                let loc = (line >= 1 && col >= 1).then(|| Location {
                    line: line as usize,
                    column: (col - 1) as usize,
                });
                let msg = cel_go_message(&source, loc, &e.msg);
                let loc = macro_argument_location(&source, loc, &msg);
                issues.report(loc, e.expr_id, msg);
            }
            if issues.is_empty() {
                issues.report(None, 0, "Syntax error: unknown parse failure".to_string());
            }
            Err(issues)
        }
    }
}

/// cel-go places a negative numeric literal (`-1`, grammar `sign=MINUS? tok=NUM_INT`) at its
/// sign; the `cel` parser places it at the digits. Moves such literals' offsets to the sign.
fn move_negative_literal_offsets(root: &IdedExpr, info: &mut SourceInfo, text: &str) {
    use cel::common::ast::LiteralValue;
    let mut moves = Vec::new();
    walk(root, |e| {
        let negative = match &e.expr {
            Expr::Literal(LiteralValue::Int(i)) => *i.inner() < 0,
            Expr::Literal(LiteralValue::Double(d)) => d.inner().is_sign_negative(),
            _ => false,
        };
        if negative && let Some((start, stop)) = info.offset_for(e.id) {
            let before = text.get(..start as usize).unwrap_or_default().trim_end();
            if before.ends_with('-') {
                moves.push((e.id, (before.len() - 1) as u32, stop));
            }
        }
    });
    for (id, start, stop) in moves {
        info.add_offset(id, start, stop);
    }
}

/// The location of the first macro whose iteration variable is `__result__`: its first
/// argument, the first non-blank character after the macro call's `(`.
fn overwritten_accumulator(
    root: &IdedExpr,
    info: &SourceInfo,
    source: &Source,
) -> Option<Location> {
    let mut found = None;
    walk(root, |e| {
        if found.is_some() {
            return;
        }
        if let Expr::Comprehension(c) = &e.expr
            && c.iter_var == "__result__"
            && let Some((start, _)) = info.offset_for(e.id)
        {
            let text = source.text();
            let after = text.get(start as usize + 1..).unwrap_or_default();
            let skipped = after.len() - after.trim_start().len();
            found = Some(source.location_of_byte(start as usize + 1 + skipped));
        }
    });
    found
}

/// Macro errors are reported at the argument, and a number literal's errors at the literal;
/// for a negative number literal cel-go's position is its sign (grammar `sign=MINUS?
/// tok=NUM_INT`, cel-go v0.29.2 parser/parser.go VisitInt), the `cel` parser's its digits.
fn macro_argument_location(source: &Source, loc: Option<Location>, msg: &str) -> Option<Location> {
    let loc = loc?;
    if !matches!(
        msg,
        "invalid argument to has() macro"
            | "argument must be a simple name"
            | "argument is not an identifier"
            | "invalid int literal"
            | "invalid double literal"
    ) {
        return Some(loc);
    }
    let line: Vec<char> = source.snippet(loc.line)?.chars().collect();
    if !line
        .get(loc.column)
        .is_some_and(|c| c.is_ascii_digit() || *c == '.')
    {
        return Some(loc);
    }
    let mut i = loc.column;
    while i > 0 && line[i - 1].is_whitespace() {
        i -= 1;
    }
    if i > 0 && line[i - 1] == '-' {
        return Some(Location {
            line: loc.line,
            column: i - 1,
        });
    }
    Some(loc)
}

/// Rewrites a `cel` parser message into cel-go's wording.
fn cel_go_message(source: &Source, loc: Option<Location>, msg: &str) -> String {
    // cel-go parser/parser.go SyntaxError: the regexp
    // `no viable alternative at input '.(true|false|null)'` (any one character before the
    // word) becomes `mismatched input '<word>' expecting IDENTIFIER`.
    const PREFIX: &str = "no viable alternative at input '";
    if let Some(i) = msg.find(PREFIX) {
        let rest = &msg[i + PREFIX.len()..];
        let mut chars = rest.chars();
        if let Some(c) = chars.next().filter(|c| *c != '\n') {
            let after = &rest[c.len_utf8()..];
            for word in ["true", "false", "null"] {
                if let Some(tail) = after.strip_prefix(word).and_then(|t| t.strip_prefix('\'')) {
                    return format!(
                        "{}mismatched input '{word}' expecting IDENTIFIER{tail}",
                        &msg[..i]
                    );
                }
            }
        }
    }
    // cel-go parser/macro.go: map and filter say "argument is not an identifier", the
    // quantifiers "argument must be a simple name"; the `cel` parser uses the latter for all.
    // The error is at the argument, which may be a call or a selection (`cel.iterVar(0, 0)`):
    // the macro is named before the `(` that opens the argument list, the first bracket left
    // of the argument that is not closed before it.
    if msg == "argument must be a simple name"
        && let Some(loc) = loc
        && let Some(line) = source.snippet(loc.line)
    {
        let before: Vec<char> = line.chars().take(loc.column).collect();
        let mut depth = 0usize;
        let mut open = None;
        for (i, c) in before.iter().enumerate().rev() {
            match c {
                ')' | ']' | '}' => depth += 1,
                '(' | '[' | '{' if depth > 0 => depth -= 1,
                '(' => {
                    open = Some(i);
                    break;
                }
                '[' | '{' => break,
                _ => {}
            }
        }
        if let Some(i) = open {
            let head: String = before[..i].iter().collect();
            let head = head.trim_end();
            if head.ends_with(".map") || head.ends_with(".filter") {
                return "argument is not an identifier".to_string();
            }
        }
    }
    // cel-go v0.29.2 parser/unescape.go unescapeChar: a `\u`/`\U` escape that names a
    // surrogate or a value above U+10FFFF is "invalid unicode code point"; the `cel` parser
    // prints the Debug form of its error (`invalid string literal: InvalidUnicode { source:
    // Unicode { value: 55296 }, .. }`). Only string literals: for bytes cel-go rejects `\u`.
    if msg.starts_with("invalid string literal: InvalidUnicode { source: Unicode {") {
        return "invalid unicode code point".to_string();
    }
    msg.to_string()
}

fn recursion_message() -> String {
    // cel-go v0.29.2 parser/parser.go: recursionListener
    format!("expression recursion limit exceeded: {MAX_RECURSION_DEPTH}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bracket_depth_skips_strings() {
        assert_eq!(bracket_depth("f((1), '((((')"), 2);
        assert_eq!(bracket_depth("[[[ \"]]]\" ]]]"), 3);
        assert_eq!(bracket_depth("'''((('''"), 0);
    }

    #[test]
    fn size_limit() {
        let text = "1".repeat(EXPRESSION_SIZE_CODE_POINT_LIMIT + 1);
        let err = parse(&text).err().map(|e| e.to_display_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "ERROR: <input>:-1:0: expression code point size exceeds limit: size: 100001, limit 100000"
            )
        );
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let text = format!("{}1{}", "(".repeat(300), ")".repeat(300));
        let err = parse(&text).err().map(|e| e.to_display_string());
        assert_eq!(
            err.as_deref(),
            Some("ERROR: <input>:-1:0: expression recursion limit exceeded: 250")
        );
    }

    #[test]
    fn syntax_error_display() {
        let err = parse("object.spec.(").err().map(|e| e.to_display_string());
        assert_eq!(
            err.as_deref(),
            Some(
                "ERROR: <input>:1:13: Syntax error: no viable alternative at input '.('\n | object.spec.(\n | ............^"
            )
        );
    }
}
