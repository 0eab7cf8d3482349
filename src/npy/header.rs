//! The `.npy` header: a Python dict literal such as
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`, parsed as Python's
//! `ast.literal_eval` would (NumPy reads it that way), then checked as NumPy's
//! `_read_array_header` does: exactly the keys `descr`, `fortran_order` and `shape`, a later
//! duplicate key replacing an earlier one.
//!
//! The grammar accepted is the literal subset the format can hold: strings in either quote
//! style with Python's escapes, integers, `True`/`False`/`None`, tuples and lists, with
//! trailing commas. Searching the text for a key instead would believe a `'descr'` written
//! inside another key's string value, and take the first of two `shape` keys.

/// A value of the header's dict literal.
#[derive(Debug, Clone, PartialEq)]
enum Literal {
    Str(String),
    /// Python integers are unbounded; beyond `i128` is never a valid dimension anyway.
    Int(i128),
    Bool(bool),
    None,
    Tuple(Vec<Literal>),
    List(Vec<Literal>),
}

impl Literal {
    fn describe(&self) -> String {
        match self {
            Literal::Str(s) => format!("{s:?}"),
            Literal::Int(i) => i.to_string(),
            Literal::Bool(b) => if *b { "True" } else { "False" }.into(),
            Literal::None => "None".into(),
            Literal::Tuple(v) | Literal::List(v) => {
                let items: Vec<String> = v.iter().map(Literal::describe).collect();
                let (open, close) = if matches!(self, Literal::Tuple(_)) {
                    ("(", ")")
                } else {
                    ("[", "]")
                };
                format!("{open}{}{close}", items.join(", "))
            }
        }
    }
}

/// What a header describes.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// The dtype string, e.g. `<f4` (structured dtypes, written as lists, are rejected).
    pub descr: String,
    pub fortran_order: bool,
    pub shape: Vec<usize>,
}

/// Nesting beyond this is rejected, so a hostile header cannot exhaust the stack.
const MAX_DEPTH: usize = 16;

/// Parse and check a header's text; the error names the byte offset of a syntax error.
pub fn parse(text: &str) -> Result<Header, String> {
    let mut p = Parser { text, pos: 0 };
    p.skip_space();
    let entries = p.dict()?;
    p.skip_space();
    if p.pos != text.len() {
        return Err(p.error("unexpected text after the closing '}'"));
    }
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    // Later duplicates replace earlier ones, as in a Python dict display.
    for (key, value) in entries {
        match key.as_str() {
            "descr" => descr = Some(value),
            "fortran_order" => fortran = Some(value),
            "shape" => shape = Some(value),
            other => {
                return Err(format!(
                "unknown key {other:?} (a header has exactly 'descr', 'fortran_order' and 'shape')"
            ))
            }
        }
    }
    let missing = |k: &str| format!("header has no '{k}'");
    let descr = match descr.ok_or_else(|| missing("descr"))? {
        Literal::Str(s) => s,
        other => {
            return Err(format!(
                "'descr' is {}, not a dtype string (structured dtypes are not supported)",
                other.describe()
            ))
        }
    };
    let fortran_order = match fortran.ok_or_else(|| missing("fortran_order"))? {
        Literal::Bool(b) => b,
        other => {
            return Err(format!(
                "'fortran_order' is {}, not True or False",
                other.describe()
            ))
        }
    };
    let shape = match shape.ok_or_else(|| missing("shape"))? {
        Literal::Tuple(dims) => dims
            .iter()
            .map(|d| match d {
                Literal::Int(i) => usize::try_from(*i)
                    .map_err(|_| format!("bad dimension {i} in 'shape' (must be 0..2^64)")),
                other => Err(format!(
                    "bad dimension {} in 'shape' (must be an integer)",
                    other.describe()
                )),
            })
            .collect::<Result<Vec<_>, _>>()?,
        other => {
            return Err(format!(
                "'shape' is {}, not a tuple of integers",
                other.describe()
            ))
        }
    };
    Ok(Header {
        descr,
        fortran_order,
        shape,
    })
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, message: &str) -> String {
        format!("malformed header at byte {}: {message}", self.pos)
    }

    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\n' | '\r' | '\x0c')) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, c: char, context: &str) -> Result<(), String> {
        self.skip_space();
        match self.peek() {
            Some(x) if x == c => {
                self.pos += 1;
                Ok(())
            }
            Some(x) => Err(self.error(&format!("expected '{c}' {context}, found {x:?}"))),
            None => Err(self.error(&format!("expected '{c}' {context}, found the end"))),
        }
    }

    /// `{ key: value, ... }` with string keys, in order.
    fn dict(&mut self) -> Result<Vec<(String, Literal)>, String> {
        self.expect('{', "opening the header dict")?;
        let mut entries = Vec::new();
        loop {
            self.skip_space();
            match self.peek() {
                Some('}') => {
                    self.pos += 1;
                    return Ok(entries);
                }
                Some('\'' | '"') => {
                    let key = self.string()?;
                    self.expect(':', &format!("after the key {key:?}"))?;
                    let value = self.value(1)?;
                    entries.push((key, value));
                    self.skip_space();
                    match self.peek() {
                        Some(',') => self.pos += 1,
                        Some('}') => {
                            self.pos += 1;
                            return Ok(entries);
                        }
                        _ => return Err(self.error("expected ',' or '}' after a value")),
                    }
                }
                _ => return Err(self.error("expected a quoted key or '}'")),
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Literal, String> {
        if depth > MAX_DEPTH {
            return Err(self.error(&format!("nested deeper than {MAX_DEPTH} levels")));
        }
        self.skip_space();
        match self.peek() {
            Some('\'' | '"') => Ok(Literal::Str(self.string()?)),
            Some('(') => {
                self.pos += 1;
                let (items, comma) = self.sequence(')', depth)?;
                // `(3)` is the integer 3, not a tuple; only `()` and a comma make one.
                match (items.len(), comma) {
                    (1, false) => Ok(items.into_iter().next().unwrap_or(Literal::None)),
                    _ => Ok(Literal::Tuple(items)),
                }
            }
            Some('[') => {
                self.pos += 1;
                Ok(Literal::List(self.sequence(']', depth)?.0))
            }
            Some(c) if c.is_ascii_digit() || c == '-' || c == '+' => self.int(),
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let start = self.pos;
                while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == '_') {
                    self.pos += 1;
                }
                match &self.text[start..self.pos] {
                    "True" => Ok(Literal::Bool(true)),
                    "False" => Ok(Literal::Bool(false)),
                    "None" => Ok(Literal::None),
                    word => {
                        self.pos = start;
                        Err(self.error(&format!(
                            "'{word}' is not a literal (True, False, None, a string, an integer, a tuple or a list)"
                        )))
                    }
                }
            }
            Some(c) => Err(self.error(&format!("unexpected {c:?} where a value belongs"))),
            None => Err(self.error("the header ends where a value belongs")),
        }
    }

    /// Items up to `close`; also whether a comma was seen (which makes `(x,)` a tuple).
    fn sequence(&mut self, close: char, depth: usize) -> Result<(Vec<Literal>, bool), String> {
        let mut items = Vec::new();
        let mut comma = false;
        loop {
            self.skip_space();
            if self.peek() == Some(close) {
                self.pos += 1;
                return Ok((items, comma));
            }
            items.push(self.value(depth + 1)?);
            self.skip_space();
            match self.peek() {
                Some(',') => {
                    self.pos += 1;
                    comma = true;
                }
                Some(c) if c == close => {}
                _ => return Err(self.error(&format!("expected ',' or '{close}'"))),
            }
        }
    }

    /// A decimal integer with an optional sign (Python also allows `_` between digits).
    fn int(&mut self) -> Result<Literal, String> {
        let start = self.pos;
        let negative = match self.peek() {
            Some('-') => {
                self.pos += 1;
                true
            }
            Some('+') => {
                self.pos += 1;
                false
            }
            _ => false,
        };
        self.skip_space();
        let digits_at = self.pos;
        let mut value: i128 = 0;
        let mut last_digit = false;
        while let Some(c) = self.peek() {
            if let Some(d) = c.to_digit(10) {
                value = value
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(i128::from(d)))
                    .ok_or_else(|| self.error("integer too large"))?;
                last_digit = true;
            } else if c == '_' && last_digit {
                last_digit = false;
            } else {
                break;
            }
            self.pos += 1;
        }
        let digits = &self.text[digits_at..self.pos];
        if digits.is_empty() || !last_digit {
            self.pos = start;
            return Err(self.error("expected an integer"));
        }
        if digits.len() > 1 && digits.starts_with('0') && value != 0 {
            self.pos = start;
            return Err(self.error("an integer may not have leading zeros"));
        }
        if matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == '.') {
            return Err(self.error("expected an integer (floats and suffixes are not dimensions)"));
        }
        Ok(Literal::Int(if negative { -value } else { value }))
    }

    /// A string in single or double quotes with Python's escapes.
    fn string(&mut self) -> Result<String, String> {
        let start = self.pos;
        let quote = self.bump().ok_or_else(|| self.error("expected a string"))?;
        let mut out = String::new();
        loop {
            let c = self.bump().ok_or_else(|| {
                format!("malformed header at byte {start}: the string starting here is not closed")
            })?;
            match c {
                c if c == quote => return Ok(out),
                '\n' => return Err(self.error("a newline inside a quoted string")),
                '\\' => self.escape(&mut out)?,
                c => out.push(c),
            }
        }
    }

    fn escape(&mut self, out: &mut String) -> Result<(), String> {
        let c = self
            .bump()
            .ok_or_else(|| self.error("the header ends inside an escape"))?;
        let simple = match c {
            '\n' => Some(None),
            '\\' => Some(Some('\\')),
            '\'' => Some(Some('\'')),
            '"' => Some(Some('"')),
            'a' => Some(Some('\x07')),
            'b' => Some(Some('\x08')),
            'f' => Some(Some('\x0c')),
            'n' => Some(Some('\n')),
            'r' => Some(Some('\r')),
            't' => Some(Some('\t')),
            'v' => Some(Some('\x0b')),
            _ => None,
        };
        if let Some(ch) = simple {
            out.extend(ch);
            return Ok(());
        }
        let code = match c {
            '0'..='7' => {
                let mut v = c.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match self.peek().and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            v = v * 8 + d;
                            self.pos += 1;
                        }
                        None => break,
                    }
                }
                v
            }
            'x' => self.hex(2)?,
            'u' => self.hex(4)?,
            'U' => self.hex(8)?,
            // Python keeps an unrecognised escape as written.
            other => {
                out.push('\\');
                out.push(other);
                return Ok(());
            }
        };
        let ch = char::from_u32(code)
            .ok_or_else(|| self.error(&format!("escape \\{c} gives {code:#x}, not a character")))?;
        out.push(ch);
        Ok(())
    }

    fn hex(&mut self, n: usize) -> Result<u32, String> {
        let digits = self.text[self.pos..].get(..n).unwrap_or("");
        if digits.len() != n || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(self.error(&format!("expected {n} hex digits in an escape")));
        }
        self.pos += n;
        u32::from_str_radix(digits, 16).map_err(|_| self.error("bad hex escape"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Header {
        parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn err(text: &str) -> String {
        parse(text).expect_err(text)
    }

    #[test]
    fn reads_what_numpy_writes_and_python_accepts() {
        let h = ok("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }          \n");
        assert_eq!(h.descr, "<f4");
        assert!(!h.fortran_order);
        assert_eq!(h.shape, vec![2, 3]);
        assert_eq!(
            ok(r#"{"shape": (), "descr": "|b1", "fortran_order": True}"#).shape,
            Vec::<usize>::new()
        );
        assert_eq!(
            ok("{'descr':'<i4','fortran_order':False,'shape':(5,)}").shape,
            vec![5]
        );
        assert_eq!(
            ok("{'descr': '\\x3ci4', 'fortran_order': False, 'shape': (1_000, +2,),}").descr,
            "<i4"
        );
        assert_eq!(
            ok("{'descr': \"<\\u0069\\U00000034\", 'fortran_order': False, 'shape': (1,)}").descr,
            "<i4"
        );
    }

    #[test]
    fn duplicate_keys_take_the_last_and_strings_hide_nothing() {
        let h = ok("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (3,)}");
        assert_eq!(h.shape, vec![3]);
        let h = ok("{'descr': '<f4', 'descr': '<i4', 'fortran_order': False, 'shape': (2,)}");
        assert_eq!(h.descr, "<i4");
        // A key written inside another key's value is just text of that value.
        let smuggled =
            "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), 'x': \"'descr': '<f4'\"}";
        assert!(err(smuggled).contains("unknown key \"x\""));
        let h = ok("{'descr': '<i4 \\'descr\\': <f4', 'fortran_order': False, 'shape': (2,)}");
        assert_eq!(h.descr, "<i4 'descr': <f4");
    }

    #[test]
    fn rejects_malformed_and_unexpected_headers() {
        for (text, want) in [
            ("", "expected '{'"),
            ("{'descr': '<f4', 'fortran_order': False}", "no 'shape'"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", "expected ',' or '}'"),
            ("{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}", "expected ',' or '}'"),
            ("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", "not True or False"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': 2}", "not a tuple"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (2)}", "not a tuple"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", "not a tuple"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", "bad dimension -1"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': ('2',)}", "must be an integer"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,)}", "floats"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (02,)}", "leading zeros"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}", "where a value"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", "after the closing"),
            ("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", "structured"),
            ("{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}", "'false' is not"),
            ("{descr: '<f4'}", "quoted key"),
            ("{'descr': '<f4\\x4'}", "hex digits"),
            ("{'descr': '<f4", "not closed"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999999999999999999999,)}", "too large"),
        ] {
            let e = err(text);
            assert!(e.contains(want), "{text}: {e} (wanted {want})");
        }
        let deep = format!(
            "{{'descr': '<f4', 'fortran_order': False, 'shape': {}{}}}",
            "(".repeat(10_000),
            ")".repeat(10_000)
        );
        assert!(err(&deep).contains("nested deeper"));
    }
}
