//! A small reader of the text format of protocol buffers, enough for the CEL conformance
//! suite (`shared/cel-spec/tests/simple/testdata/*.textproto`): fields, nested messages, and
//! string literals with their C escapes, adjacent literals joined. Shared by the integration
//! tests (`cel_conformance`) and the e2e tests (`e2e/support/apiserver_truth.rs` includes it).

#[derive(Debug, Clone)]
pub enum Value {
    Scalar(String),
    Str(Vec<u8>),
    Msg(Msg),
}

#[derive(Debug, Clone, Default)]
pub struct Msg(pub Vec<(String, Value)>);

impl Msg {
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.0
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v)
    }
    pub fn msg(&self, name: &str) -> Option<&Msg> {
        match self.get(name)? {
            Value::Msg(m) => Some(m),
            _ => None,
        }
    }
    pub fn str(&self, name: &str) -> Option<String> {
        match self.get(name)? {
            Value::Str(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Value::Scalar(s) => Some(s.clone()),
            Value::Msg(_) => None,
        }
    }
    pub fn flag(&self, name: &str) -> bool {
        matches!(self.get(name), Some(Value::Scalar(s)) if s == "true")
    }
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl Reader<'_> {
    fn skip(&mut self) {
        while self.i < self.b.len() {
            match self.b[self.i] {
                b' ' | b'\n' | b'\r' | b'\t' | b',' | b';' => self.i += 1,
                b'#' => {
                    while self.i < self.b.len() && self.b[self.i] != b'\n' {
                        self.i += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn ident(&mut self) -> String {
        let start = self.i;
        while self.i < self.b.len()
            && (self.b[self.i].is_ascii_alphanumeric()
                || matches!(self.b[self.i], b'_' | b'.' | b'-' | b'+'))
        {
            self.i += 1;
        }
        String::from_utf8_lossy(&self.b[start..self.i]).into_owned()
    }

    fn string(&mut self) -> Vec<u8> {
        let q = self.b[self.i];
        self.i += 1;
        let mut out = Vec::new();
        while self.i < self.b.len() && self.b[self.i] != q {
            let c = self.b[self.i];
            self.i += 1;
            if c != b'\\' {
                out.push(c);
                continue;
            }
            let e = self.b[self.i];
            self.i += 1;
            match e {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'r' => out.push(b'\r'),
                b'a' => out.push(7),
                b'b' => out.push(8),
                b'f' => out.push(12),
                b'v' => out.push(11),
                b'x' | b'X' => {
                    let mut v = 0u32;
                    let mut n = 0;
                    while n < 2 && self.i < self.b.len() && self.b[self.i].is_ascii_hexdigit() {
                        v = v * 16 + (self.b[self.i] as char).to_digit(16).unwrap_or(0);
                        self.i += 1;
                        n += 1;
                    }
                    out.push(v as u8);
                }
                b'u' | b'U' => {
                    let len = if e == b'u' { 4 } else { 8 };
                    let hex = String::from_utf8_lossy(&self.b[self.i..self.i + len]).into_owned();
                    self.i += len;
                    let ch = u32::from_str_radix(&hex, 16)
                        .ok()
                        .and_then(char::from_u32)
                        .unwrap_or('\u{fffd}');
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                }
                b'0'..=b'7' => {
                    let mut v = u32::from(e - b'0');
                    let mut n = 1;
                    while n < 3 && self.i < self.b.len() && (b'0'..=b'7').contains(&self.b[self.i])
                    {
                        v = v * 8 + u32::from(self.b[self.i] - b'0');
                        self.i += 1;
                        n += 1;
                    }
                    out.push(v as u8);
                }
                other => out.push(other),
            }
        }
        self.i += 1;
        out
    }

    fn value(&mut self) -> Value {
        self.skip();
        match self.b.get(self.i) {
            Some(b'{') | Some(b'<') => {
                let close = if self.b[self.i] == b'{' { b'}' } else { b'>' };
                self.i += 1;
                let m = self.fields(Some(close));
                Value::Msg(m)
            }
            Some(b'"') | Some(b'\'') => {
                let mut s = self.string();
                loop {
                    self.skip();
                    match self.b.get(self.i) {
                        Some(b'"') | Some(b'\'') => s.extend(self.string()),
                        _ => break,
                    }
                }
                Value::Str(s)
            }
            _ => Value::Scalar(self.ident()),
        }
    }

    fn fields(&mut self, close: Option<u8>) -> Msg {
        let mut m = Msg::default();
        loop {
            self.skip();
            match self.b.get(self.i) {
                None => return m,
                Some(c) if Some(*c) == close => {
                    self.i += 1;
                    return m;
                }
                _ => {}
            }
            let name = if self.b[self.i] == b'[' {
                // extension field name
                let start = self.i;
                while self.i < self.b.len() && self.b[self.i] != b']' {
                    self.i += 1;
                }
                self.i += 1;
                String::from_utf8_lossy(&self.b[start..self.i]).into_owned()
            } else {
                self.ident()
            };
            if name.is_empty() {
                // Unknown token: skip it to guarantee progress.
                self.i += 1;
                continue;
            }
            self.skip();
            if self.b.get(self.i) == Some(&b':') {
                self.i += 1;
                self.skip();
            }
            if self.b.get(self.i) == Some(&b'[') {
                self.i += 1;
                loop {
                    self.skip();
                    if self.b.get(self.i) == Some(&b']') || self.i >= self.b.len() {
                        self.i += 1;
                        break;
                    }
                    let v = self.value();
                    m.0.push((name.clone(), v));
                }
            } else {
                let v = self.value();
                m.0.push((name, v));
            }
        }
    }
}

/// The fields of a text-format protobuf document.
pub fn parse_textproto(text: &str) -> Msg {
    Reader {
        b: text.as_bytes(),
        i: 0,
    }
    .fields(None)
}

/// The bytes of the string literal that is the whole of `text` (adjacent literals joined), or
/// `None` when `text` is not exactly that. Used by the e2e tests only.
#[allow(dead_code)]
pub fn string_literal(text: &str) -> Option<Vec<u8>> {
    let b = text.as_bytes();
    if !matches!(b.first(), Some(b'"' | b'\'')) {
        return None;
    }
    let mut r = Reader { b, i: 0 };
    let mut out = r.string();
    loop {
        r.skip();
        match b.get(r.i) {
            None => return Some(out),
            Some(b'"' | b'\'') => out.extend(r.string()),
            Some(_) => return None,
        }
    }
}
