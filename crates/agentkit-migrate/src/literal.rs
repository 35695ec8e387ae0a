//! Reads the value a TypeScript module exports by default, without running
//! it: the object literals of `defineAgent({...})`, `defineConnection(...)`,
//! `githubChannel(...)` and the like, so the mechanical parts of a project
//! convert on a machine without Node.
//!
//! The result is JSON with markers for what a literal cannot say (the same
//! markers the Node extraction writes, so the converters read one shape):
//!
//! | JavaScript | value |
//! |---|---|
//! | `"x"`, `` `x` ``, numbers, `true`, `null`, arrays, objects | themselves |
//! | `process.env.X`, `` `Bearer ${process.env.X}` `` | `"${X}"`, `"Bearer ${X}"` |
//! | `process.env.X ?? "d"` (or `\|\|`) | `"${X:-d}"` |
//! | a function, an arrow function, a method | `{"$function": "<source>"}` |
//! | `name(args)`, `a.b(args).c(args)` | `{"$call": "name", "args": [...], "chain": [["c", [...]]]}` |
//! | `/re/flags` | `{"$regex": "re", "flags": "flags"}` |
//! | anything else | `{"$code": "<source>"}` |
//!
//! `undefined` members are left out. Top-level `const x = ...` bindings are
//! followed when the default export (or a value inside it) names one.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

/// The module's default export, or `None` when it has none this reader
/// understands.
pub(crate) fn default_export(source: &str) -> Option<Value> {
    let tokens = tokenize(source);
    let mut parser = Parser {
        src: source,
        tokens: &tokens,
        pos: 0,
        consts: HashMap::new(),
    };
    parser.module()
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    /// A template literal: its raw text between the backticks.
    Template(String),
    Num(f64),
    Regex(String, String),
    Punct(&'static str),
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    start: usize,
    end: usize,
}

const PUNCTS: &[&str] = &[
    "...", "=>", "??", "||", "&&", "?.", "===", "!==", "==", "!=", "<=", ">=", "{", "}", "(", ")",
    "[", "]", ",", ":", ";", ".", "=", "?", "!", "<", ">", "+", "-", "*", "%", "&", "|", "^", "~",
    "@", "#", "/",
];

fn tokenize(src: &str) -> Vec<Token> {
    let bytes = src.as_bytes();
    let mut out: Vec<Token> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if src[i..].starts_with("//") {
            i = src[i..].find('\n').map_or(bytes.len(), |n| i + n);
            continue;
        }
        if src[i..].starts_with("/*") {
            i = src[i + 2..]
                .find("*/")
                .map_or(bytes.len(), |n| i + 2 + n + 2);
            continue;
        }
        let start = i;
        if c == b'"' || c == b'\'' {
            let (text, end) = quoted(src, i, c);
            out.push(Token {
                tok: Tok::Str(text),
                start,
                end,
            });
            i = end;
            continue;
        }
        if c == b'`' {
            let end = template_end(src, i + 1);
            let raw = src[i + 1..end.saturating_sub(1).max(i + 1)].to_owned();
            out.push(Token {
                tok: Tok::Template(raw),
                start,
                end,
            });
            i = end;
            continue;
        }
        if c.is_ascii_digit() || (c == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let mut j = i;
            while j < bytes.len()
                && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'.' || bytes[j] == b'_')
            {
                j += 1;
            }
            let text: String = src[i..j].chars().filter(|c| *c != '_').collect();
            let n = text.parse::<f64>().unwrap_or(f64::NAN);
            out.push(Token {
                tok: Tok::Num(n),
                start,
                end: j,
            });
            i = j;
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c >= 0x80 {
            let mut j = i;
            while j < bytes.len()
                && (bytes[j].is_ascii_alphanumeric()
                    || bytes[j] == b'_'
                    || bytes[j] == b'$'
                    || bytes[j] >= 0x80)
            {
                j += 1;
            }
            out.push(Token {
                tok: Tok::Ident(src[i..j].to_owned()),
                start,
                end: j,
            });
            i = j;
            continue;
        }
        if c == b'/'
            && regex_allowed(out.last())
            && let Some((body, flags, end)) = regex_literal(src, i)
        {
            out.push(Token {
                tok: Tok::Regex(body, flags),
                start,
                end,
            });
            i = end;
            continue;
        }
        let punct = PUNCTS.iter().find(|p| src[i..].starts_with(**p));
        match punct {
            Some(p) => {
                out.push(Token {
                    tok: Tok::Punct(p),
                    start,
                    end: i + p.len(),
                });
                i += p.len();
            }
            None => i += src[i..].chars().next().map_or(1, char::len_utf8),
        }
    }
    out
}

/// A `/` starts a regex after an operator or an opening bracket, not after
/// a value.
fn regex_allowed(prev: Option<&Token>) -> bool {
    match prev.map(|t| &t.tok) {
        None => true,
        Some(Tok::Punct(p)) => !matches!(*p, ")" | "]" | "}"),
        Some(Tok::Ident(w)) => matches!(
            w.as_str(),
            "return" | "typeof" | "case" | "in" | "of" | "await" | "yield"
        ),
        Some(_) => false,
    }
}

fn regex_literal(src: &str, start: usize) -> Option<(String, String, usize)> {
    let bytes = src.as_bytes();
    let mut i = start + 1;
    let mut in_class = false;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'\n' => return None,
            b'[' => {
                in_class = true;
                i += 1;
            }
            b']' => {
                in_class = false;
                i += 1;
            }
            b'/' if !in_class => {
                let body = src[start + 1..i].to_owned();
                let mut j = i + 1;
                while j < bytes.len() && bytes[j].is_ascii_alphabetic() {
                    j += 1;
                }
                return Some((body, src[i + 1..j].to_owned(), j));
            }
            _ => i += 1,
        }
    }
    None
}

fn quoted(src: &str, start: usize, quote: u8) -> (String, usize) {
    let mut out = String::new();
    let mut chars = src[start + 1..].char_indices();
    while let Some((off, c)) = chars.next() {
        let at = start + 1 + off;
        if c as u32 == u32::from(quote) {
            return (out, at + 1);
        }
        if c == '\\' {
            match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, 't')) => out.push('\t'),
                Some((_, 'r')) => out.push('\r'),
                Some((_, '\n')) => {}
                Some((_, other)) => out.push(other),
                None => break,
            }
            continue;
        }
        if c == '\n' {
            return (out, at);
        }
        out.push(c);
    }
    (out, src.len())
}

/// The index just past the closing backtick of a template whose text
/// starts at `i`, skipping `${ ... }` expressions (which may nest strings,
/// braces and templates).
fn template_end(src: &str, mut i: usize) -> usize {
    let bytes = src.as_bytes();
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'`' => return i + 1,
            b'$' if bytes.get(i + 1) == Some(&b'{') => {
                i = expression_end(src, i + 2);
            }
            _ => i += 1,
        }
    }
    bytes.len()
}

/// Just past the `}` that closes an expression opened before `i`.
fn expression_end(src: &str, mut i: usize) -> usize {
    let bytes = src.as_bytes();
    let mut depth = 1usize;
    while i < bytes.len() {
        match bytes[i] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            b'"' | b'\'' => {
                i = quoted(src, i, bytes[i]).1;
                continue;
            }
            b'`' => {
                i = template_end(src, i + 1);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    bytes.len()
}

struct Parser<'a> {
    src: &'a str,
    tokens: &'a [Token],
    pos: usize,
    consts: HashMap<String, Value>,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.pos).map(|t| &t.tok)
    }

    fn peek_at(&self, n: usize) -> Option<&Tok> {
        self.tokens.get(self.pos + n).map(|t| &t.tok)
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Some(Tok::Punct(q)) if *q == p)
    }

    fn is_ident(&self, w: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident(x)) if x == w)
    }

    fn eat_punct(&mut self, p: &str) -> bool {
        if self.is_punct(p) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn module(&mut self) -> Option<Value> {
        let mut depth = 0i32;
        while self.pos < self.tokens.len() {
            match self.peek() {
                Some(Tok::Punct(p)) if matches!(*p, "{" | "(" | "[") => {
                    depth += 1;
                    self.pos += 1;
                }
                Some(Tok::Punct(p)) if matches!(*p, "}" | ")" | "]") => {
                    depth -= 1;
                    self.pos += 1;
                }
                Some(Tok::Ident(w))
                    if depth == 0 && matches!(w.as_str(), "const" | "let" | "var") =>
                {
                    self.pos += 1;
                    if let (Some(Tok::Ident(name)), Some(Tok::Punct("="))) =
                        (self.peek().cloned(), self.peek_at(1))
                    {
                        self.pos += 2;
                        let value = self.expression();
                        self.consts.insert(name, value);
                    } else if let (Some(Tok::Ident(name)), Some(Tok::Punct(":"))) =
                        (self.peek().cloned(), self.peek_at(1))
                    {
                        // `const x: Type = value`
                        self.pos += 2;
                        self.skip_type();
                        if self.eat_punct("=") {
                            let value = self.expression();
                            self.consts.insert(name, value);
                        }
                    }
                }
                Some(Tok::Ident(w))
                    if depth == 0
                        && w == "export"
                        && matches!(self.peek_at(1), Some(Tok::Ident(d)) if d == "default") =>
                {
                    self.pos += 2;
                    let value = self.expression();
                    return Some(value);
                }
                _ => self.pos += 1,
            }
        }
        None
    }

    /// Skips a type annotation up to `=`, `,`, `)` or `;` at depth 0.
    fn skip_type(&mut self) {
        let mut depth = 0i32;
        while let Some(tok) = self.peek() {
            match tok {
                Tok::Punct(p) if matches!(*p, "{" | "(" | "[" | "<") => depth += 1,
                Tok::Punct(p) if matches!(*p, "}" | ")" | "]" | ">") => {
                    if depth == 0 {
                        return;
                    }
                    depth -= 1;
                }
                Tok::Punct(p) if depth == 0 && matches!(*p, "=" | "," | ";") => return,
                _ => {}
            }
            self.pos += 1;
        }
    }

    fn text(&self, from: usize, to: usize) -> String {
        let start = self.tokens.get(from).map_or(self.src.len(), |t| t.start);
        let end = if to == 0 {
            start
        } else {
            self.tokens.get(to - 1).map_or(self.src.len(), |t| t.end)
        };
        self.src.get(start..end.max(start)).unwrap_or("").to_owned()
    }

    /// Skips one expression (balanced) up to `,`, `;` or a closing bracket
    /// at depth 0, and answers its source text.
    fn skip_expression(&mut self, from: usize) -> String {
        let mut depth = 0i32;
        while let Some(tok) = self.peek() {
            match tok {
                Tok::Punct(p) if matches!(*p, "{" | "(" | "[") => depth += 1,
                Tok::Punct(p) if matches!(*p, "}" | ")" | "]") => {
                    if depth == 0 {
                        break;
                    }
                    depth -= 1;
                }
                Tok::Punct(p) if depth == 0 && matches!(*p, "," | ";") => break,
                // A statement keyword at depth 0 ends an expression with no `;`.
                Tok::Ident(w)
                    if depth == 0
                        && self.pos > from
                        && matches!(w.as_str(), "export" | "import") =>
                {
                    break;
                }
                _ => {}
            }
            self.pos += 1;
        }
        self.text(from, self.pos)
    }

    fn expression(&mut self) -> Value {
        let from = self.pos;
        let value = self.primary();
        // `x as const`, `x satisfies T`, `a ?? b`: what follows a value.
        let value = match value {
            Some(v) => v,
            None => {
                self.pos = from;
                return json!({"$code": self.skip_expression(from)});
            }
        };
        if self.is_ident("as") || self.is_ident("satisfies") {
            self.pos += 1;
            self.skip_type();
            return value;
        }
        if (self.is_punct("??") || self.is_punct("||"))
            && let Some(name) = value.as_str().and_then(env_name)
        {
            let save = self.pos;
            self.pos += 1;
            if let Some(Value::String(d)) = self.primary()
                && self.at_end_of_expression()
            {
                return Value::String(format!("${{{name}:-{d}}}"));
            }
            self.pos = save;
        }
        if self.at_end_of_expression() {
            return value;
        }
        self.pos = from;
        json!({"$code": self.skip_expression(from)})
    }

    fn at_end_of_expression(&self) -> bool {
        match self.peek() {
            None => true,
            Some(Tok::Punct(p)) => matches!(*p, "," | ";" | "}" | ")" | "]"),
            Some(Tok::Ident(w)) => matches!(
                w.as_str(),
                "export" | "import" | "const" | "let" | "var" | "function"
            ),
            _ => false,
        }
    }

    fn primary(&mut self) -> Option<Value> {
        let from = self.pos;
        let tok = self.peek()?.clone();
        match tok {
            Tok::Str(s) => {
                self.pos += 1;
                Some(Value::String(s))
            }
            Tok::Template(raw) => {
                self.pos += 1;
                Some(template(&raw).unwrap_or_else(|| json!({"$code": self.text(from, self.pos)})))
            }
            Tok::Num(n) => {
                self.pos += 1;
                Some(number(n))
            }
            Tok::Regex(body, flags) => {
                self.pos += 1;
                Some(json!({"$regex": body, "flags": flags}))
            }
            Tok::Punct("{") => self.object(),
            Tok::Punct("[") => self.array(),
            Tok::Punct("-") => {
                self.pos += 1;
                match self.peek() {
                    Some(Tok::Num(n)) => {
                        let n = -*n;
                        self.pos += 1;
                        Some(number(n))
                    }
                    _ => None,
                }
            }
            Tok::Punct("(") => {
                // An arrow function `(a, b) => ...`, or a parenthesised value.
                let close = self.matching(self.pos)?;
                if matches!(
                    self.tokens.get(close + 1).map(|t| &t.tok),
                    Some(Tok::Punct("=>"))
                ) {
                    self.pos = close + 2;
                    self.arrow_body();
                    return Some(json!({"$function": self.text(from, self.pos)}));
                }
                if matches!(
                    self.tokens.get(close + 1).map(|t| &t.tok),
                    Some(Tok::Punct(":"))
                ) {
                    // `(a): T => ...`
                    self.pos = close + 2;
                    self.skip_type();
                    if self.eat_punct("=>") {
                        self.arrow_body();
                        return Some(json!({"$function": self.text(from, self.pos)}));
                    }
                    return None;
                }
                self.pos += 1;
                let inner = self.expression();
                if self.eat_punct(")") {
                    Some(inner)
                } else {
                    None
                }
            }
            Tok::Ident(word) => self.identifier(from, &word),
            Tok::Punct(_) => None,
        }
    }

    fn identifier(&mut self, from: usize, word: &str) -> Option<Value> {
        match word {
            "true" => {
                self.pos += 1;
                return Some(Value::Bool(true));
            }
            "false" => {
                self.pos += 1;
                return Some(Value::Bool(false));
            }
            "null" | "undefined" => {
                self.pos += 1;
                return Some(Value::Null);
            }
            "async" => {
                self.pos += 1;
                if self.is_ident("function")
                    || self.is_punct("(")
                    || matches!(self.peek_at(1), Some(Tok::Punct("=>")))
                {
                    let inner = self.primary()?;
                    if inner.get("$function").is_some() {
                        return Some(json!({"$function": self.text(from, self.pos)}));
                    }
                }
                return None;
            }
            "function" => {
                self.pos += 1;
                if matches!(self.peek(), Some(Tok::Ident(_))) {
                    self.pos += 1;
                }
                self.eat_punct("*");
                let close = self.matching(self.pos)?;
                self.pos = close + 1;
                if self.eat_punct(":") {
                    self.skip_until_brace();
                }
                let body_close = self.matching(self.pos)?;
                self.pos = body_close + 1;
                return Some(json!({"$function": self.text(from, self.pos)}));
            }
            "new" => return None,
            _ => {}
        }
        // `x => ...`
        if matches!(self.peek_at(1), Some(Tok::Punct("=>"))) {
            self.pos += 2;
            self.arrow_body();
            return Some(json!({"$function": self.text(from, self.pos)}));
        }
        // A dotted name: `process.env.X`, `z.object`, `env.X`.
        let mut path = vec![word.to_owned()];
        self.pos += 1;
        loop {
            if (self.is_punct(".") || self.is_punct("?."))
                && let Some(Tok::Ident(next)) = self.peek_at(1).cloned()
            {
                self.pos += 2;
                path.push(next);
                continue;
            }
            if self.is_punct("[")
                && let (Some(Tok::Str(key)), Some(Tok::Punct("]"))) =
                    (self.peek_at(1).cloned(), self.peek_at(2))
            {
                self.pos += 3;
                path.push(key);
                continue;
            }
            break;
        }
        if path.len() == 3 && path[0] == "process" && path[1] == "env" {
            return Some(Value::String(format!("${{{}}}", path[2])));
        }
        if self.is_punct("(") || self.is_punct("<") && self.generic_call() {
            if self.is_punct("<") {
                let close = self.matching_angle(self.pos)?;
                self.pos = close + 1;
            }
            let callee = path.join(".");
            let args = self.arguments()?;
            let mut chain = Vec::new();
            while self.is_punct(".") {
                let Some(Tok::Ident(method)) = self.peek_at(1).cloned() else {
                    break;
                };
                self.pos += 2;
                if self.is_punct("(") {
                    let args = self.arguments()?;
                    chain.push(json!([method, args]));
                } else {
                    return None;
                }
            }
            let mut call = json!({"$call": callee, "args": args});
            if !chain.is_empty() {
                call["chain"] = Value::Array(chain);
            }
            return Some(call);
        }
        if path.len() == 1
            && let Some(value) = self.consts.get(&path[0])
        {
            return Some(value.clone());
        }
        None
    }

    fn generic_call(&self) -> bool {
        self.matching_angle(self.pos).is_some_and(|close| {
            matches!(
                self.tokens.get(close + 1).map(|t| &t.tok),
                Some(Tok::Punct("("))
            )
        })
    }

    fn matching_angle(&self, at: usize) -> Option<usize> {
        let mut depth = 0i32;
        for (i, t) in self.tokens.iter().enumerate().skip(at) {
            match t.tok {
                Tok::Punct("<") => depth += 1,
                Tok::Punct(">") => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(i);
                    }
                }
                Tok::Punct(";") | Tok::Punct("{") | Tok::Punct("(") => return None,
                _ => {}
            }
        }
        None
    }

    fn skip_until_brace(&mut self) {
        while let Some(tok) = self.peek() {
            if matches!(tok, Tok::Punct("{")) {
                return;
            }
            self.pos += 1;
        }
    }

    fn arrow_body(&mut self) {
        if self.is_punct("{")
            && let Some(close) = self.matching(self.pos)
        {
            self.pos = close + 1;
            return;
        }
        let from = self.pos;
        self.skip_expression(from);
    }

    /// The index of the bracket closing the one at `at`.
    fn matching(&self, at: usize) -> Option<usize> {
        let mut depth = 0i32;
        for (i, t) in self.tokens.iter().enumerate().skip(at) {
            match t.tok {
                Tok::Punct("{") | Tok::Punct("(") | Tok::Punct("[") => depth += 1,
                Tok::Punct("}") | Tok::Punct(")") | Tok::Punct("]") => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(i);
                    }
                }
                _ => {}
            }
        }
        None
    }

    fn arguments(&mut self) -> Option<Vec<Value>> {
        if !self.eat_punct("(") {
            return None;
        }
        let mut args = Vec::new();
        while !self.eat_punct(")") {
            self.peek()?;
            args.push(self.expression());
            if !self.eat_punct(",") && !self.is_punct(")") {
                return None;
            }
        }
        Some(args)
    }

    fn array(&mut self) -> Option<Value> {
        self.eat_punct("[");
        let mut items = Vec::new();
        while !self.eat_punct("]") {
            self.peek()?;
            if self.eat_punct("...") {
                let from = self.pos;
                items.push(json!({"$code": format!("...{}", self.skip_expression(from))}));
            } else {
                items.push(self.expression());
            }
            if !self.eat_punct(",") && !self.is_punct("]") {
                return None;
            }
        }
        Some(Value::Array(items))
    }

    fn object(&mut self) -> Option<Value> {
        self.eat_punct("{");
        let mut map = Map::new();
        while !self.eat_punct("}") {
            self.peek()?;
            let member_start = self.pos;
            if self.eat_punct("...") {
                let from = self.pos;
                let spread = self.skip_expression(from);
                map.insert(
                    format!("...{spread}"),
                    json!({"$code": format!("...{spread}")}),
                );
            } else {
                // Modifiers of a method: `async execute(...)`, `get x()`.
                let mut is_method_modifier = false;
                if let (Some(Tok::Ident(w)), Some(next)) = (self.peek(), self.peek_at(1))
                    && matches!(w.as_str(), "async" | "get" | "set")
                    && matches!(
                        next,
                        Tok::Ident(_) | Tok::Str(_) | Tok::Punct("*") | Tok::Punct("[")
                    )
                {
                    is_method_modifier = true;
                }
                if is_method_modifier {
                    self.pos += 1;
                }
                self.eat_punct("*");
                let key = match self.peek()?.clone() {
                    Tok::Ident(k) | Tok::Str(k) => {
                        self.pos += 1;
                        k
                    }
                    Tok::Num(n) => {
                        self.pos += 1;
                        number(n).to_string()
                    }
                    Tok::Punct("[") => {
                        // A computed key: `["turn.completed"]`, or an expression.
                        let close = self.matching(self.pos)?;
                        let key = match self.peek_at(1) {
                            Some(Tok::Str(k)) if close == self.pos + 2 => k.clone(),
                            _ => self.text(self.pos, close + 1),
                        };
                        self.pos = close + 1;
                        key
                    }
                    _ => return None,
                };
                self.eat_punct("?");
                if self.is_punct("(") || self.is_punct("<") {
                    // A method: its parameters, an optional return type, its body.
                    if self.is_punct("<") {
                        let close = self.matching_angle(self.pos)?;
                        self.pos = close + 1;
                    }
                    let close = self.matching(self.pos)?;
                    self.pos = close + 1;
                    if self.eat_punct(":") {
                        self.skip_until_brace();
                    }
                    let body = self.matching(self.pos)?;
                    self.pos = body + 1;
                    map.insert(key, json!({"$function": self.text(member_start, self.pos)}));
                } else if self.eat_punct(":") {
                    let value = self.expression();
                    if !value.is_null() {
                        map.insert(key, value);
                    }
                } else {
                    // Shorthand `{ name }`: a const binding, if known.
                    let value = self
                        .consts
                        .get(&key)
                        .cloned()
                        .unwrap_or_else(|| json!({"$code": key.clone()}));
                    map.insert(key, value);
                }
            }
            if !self.eat_punct(",") && !self.is_punct("}") {
                return None;
            }
        }
        Some(Value::Object(map))
    }
}

fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9.0e15 {
        #[allow(clippy::cast_possible_truncation)]
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
    }
}

/// `"${X}"` → `X`.
fn env_name(s: &str) -> Option<&str> {
    let inner = s.strip_prefix("${")?.strip_suffix('}')?;
    inner
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
        .then_some(inner)
}

/// A template literal's value when every `${...}` in it is an environment
/// variable (`process.env.X`, optionally `?? "default"`).
fn template(raw: &str) -> Option<Value> {
    let mut out = String::new();
    let mut rest = raw;
    while let Some(at) = unescaped_interpolation(rest) {
        out.push_str(&unescape_template(&rest[..at]));
        let end = expression_end(rest, at + 2);
        let expr = rest.get(at + 2..end.saturating_sub(1))?;
        let value = default_export(&format!("export default {expr}"))?;
        match value {
            Value::String(s) if env_name(&s).is_some() || s.starts_with("${") => out.push_str(&s),
            Value::String(s) => out.push_str(&s),
            Value::Number(n) => out.push_str(&n.to_string()),
            _ => return None,
        }
        rest = &rest[end..];
    }
    out.push_str(&unescape_template(rest));
    Some(Value::String(out))
}

/// Where the first `${` that is not escaped (`\${`) starts.
fn unescaped_interpolation(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i + 1 < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'$' if bytes[i + 1] == b'{' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

fn unescape_template(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(other) => out.push(other),
                None => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use expect_test::{Expect, expect};

    fn check(src: &str, expected: Expect) {
        let value = default_export(src).map_or("none".to_owned(), |v| {
            serde_json::to_string_pretty(&v).expect("JSON")
        });
        expected.assert_eq(&value);
    }

    #[test]
    fn agent_settings_and_env() {
        check(
            r#"
import { defineAgent } from "@cursor/july";
// a comment with a { brace
export default defineAgent({
  model: { id: "claude-sonnet-4-5", params: [{ id: "effort", value: "high" }] },
  runtime: "local", // trailing
  local: { cwd: process.env.WORKDIR ?? "/tmp/w" },
  tools: ["read", 'grep'],
  maxSteps: 12,
  ratio: -0.5,
});
"#,
            expect![[r#"
                {
                  "$call": "defineAgent",
                  "args": [
                    {
                      "model": {
                        "id": "claude-sonnet-4-5",
                        "params": [
                          {
                            "id": "effort",
                            "value": "high"
                          }
                        ]
                      },
                      "runtime": "local",
                      "local": {
                        "cwd": "${WORKDIR:-/tmp/w}"
                      },
                      "tools": [
                        "read",
                        "grep"
                      ],
                      "maxSteps": 12,
                      "ratio": -0.5
                    }
                  ]
                }"#]],
        );
    }

    #[test]
    fn functions_calls_templates_and_consts() {
        check(
            r#"
const secret = process.env.HOOK_SECRET;
const BOT = "reviewer";
export default githubChannel({
  botName: BOT,
  credentials: { webhookSecret: () => process.env.GITHUB_WEBHOOK_SECRET },
  headers: { authorization: `Bearer ${process.env.LINEAR_TOKEN}` },
  inputSchema: z.object({ city: z.string().describe("the city") }).strict(),
  async onPullRequest(ctx, pr: PullRequest): Promise<X | null> {
    if (pr.action === "opened") { return { auth: defaultGitHubAuth(ctx) }; }
    return null;
  },
  pattern: /^a\/b$/i,
  sum: 1 + 2,
  secret,
} satisfies Options);
"#,
            expect![[r#"
                {
                  "$call": "githubChannel",
                  "args": [
                    {
                      "botName": "reviewer",
                      "credentials": {
                        "webhookSecret": {
                          "$function": "() => process.env.GITHUB_WEBHOOK_SECRET"
                        }
                      },
                      "headers": {
                        "authorization": "Bearer ${LINEAR_TOKEN}"
                      },
                      "inputSchema": {
                        "$call": "z.object",
                        "args": [
                          {
                            "city": {
                              "$call": "z.string",
                              "args": [],
                              "chain": [
                                [
                                  "describe",
                                  [
                                    "the city"
                                  ]
                                ]
                              ]
                            }
                          }
                        ],
                        "chain": [
                          [
                            "strict",
                            []
                          ]
                        ]
                      },
                      "onPullRequest": {
                        "$function": "async onPullRequest(ctx, pr: PullRequest): Promise<X | null> {\n    if (pr.action === \"opened\") { return { auth: defaultGitHubAuth(ctx) }; }\n    return null;\n  }"
                      },
                      "pattern": {
                        "$regex": "^a\\/b$",
                        "flags": "i"
                      },
                      "sum": {
                        "$code": "1 + 2"
                      },
                      "secret": "${HOOK_SECRET}"
                    }
                  ]
                }"#]],
        );
    }

    #[test]
    fn default_export_of_a_binding_and_of_a_string() {
        check(
            "const tool = defineTool({ description: 'x', execution: \"agent\", script: `#!/bin/sh\necho \\`hi\\``});\nexport default tool;\n",
            expect![[r##"
                {
                  "$call": "defineTool",
                  "args": [
                    {
                      "description": "x",
                      "execution": "agent",
                      "script": "#!/bin/sh\necho `hi`"
                    }
                  ]
                }"##]],
        );
        check(
            "export default `You are terse.`\n",
            expect![[r#""You are terse.""#]],
        );
        check("export const x = 1;\n", expect!["none"]);
    }

    #[test]
    fn eval_functions_keep_their_source() {
        check(
            r#"export default defineEval({
  tags: ["smoke"],
  async test(t) {
    await t.send("Hi {there}");
    t.check(t.reply, includes(/weather/i));
  },
});"#,
            expect![[r#"
                {
                  "$call": "defineEval",
                  "args": [
                    {
                      "tags": [
                        "smoke"
                      ],
                      "test": {
                        "$function": "async test(t) {\n    await t.send(\"Hi {there}\");\n    t.check(t.reply, includes(/weather/i));\n  }"
                      }
                    }
                  ]
                }"#]],
        );
    }
}
