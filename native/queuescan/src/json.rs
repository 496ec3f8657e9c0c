//! A strict reader for one `history.jsonl` line: the fields the queue pass reads, typed, and the rest validated
//! and skipped.
//!
//! It accepts a subset of what orjson accepts (RFC 8259 JSON, UTF-8, paired surrogate escapes, exponents of at
//! most two digits, nesting up to `MAX_DEPTH`) and answers `Bail` for anything else.  A read field it does not
//! model exactly (a float, a bool, an integer beyond 64 bits, a list where a scalar belongs) is read as
//! `Field::Other`, which the pass bails on only where the Python pass would read it.  A `Bail` hands the whole
//! file to the Python pass, which decides (and raises the precise error), so accepting less costs only speed.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::fx::FxBuild;

/// Why the compiled pass handed the file to the Python pass.
pub struct Bail(pub String);
pub type R<T> = Result<T, Bail>;

macro_rules! bail {
    ($($t:tt)*) => { return Err($crate::json::Bail(format!($($t)*))) };
}
pub(crate) use bail;

const MAX_DEPTH: u32 = 64;
/// The keys of an op the pass reads (and `time`, which it skips), quoted as spelled plainly; their bits.
const TOP_KEYS: &[&[u8]] = &[b"\"index\"", b"\"time\"", b"\"type\"", b"\"process\"", b"\"f\"", b"\"value\""];
const TOP_BITS: [u8; 6] = [1, 0, 2, 4, 8, 16];
/// The keys of an op's value the pass reads; key n has bit 1 << n.
const VALUE_KEYS: &[&[u8]] = &[b"\"queue\"", b"\"value\"", b"\"offset\"", b"\"consumer\"", b"\"records\""];

/// A value the pass keys on: an integer that fits in 64 bits, or an interned string.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Val {
    Int(i64),
    Str(u32),
}

/// A scalar field as read.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Field {
    Absent,
    Val(Val),
    Null,
    Other,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Send,
    Poll,
    Drain,
    Other,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Typ {
    Invoke,
    Ok,
    Fail,
    Info,
    Other,
}

/// A poll's `records`: a list of `[int, Val]` pairs (`Line::recs` of the caller's pair buffer), or something else.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Recs {
    Absent,
    Null,
    List,
    Other,
}

/// The fields of one op line.  `value_obj`: `value` is a JSON object (its fields are then read).
#[derive(Clone)]
pub struct Line {
    pub lineno: u64,
    pub index: Field,
    pub typ: Option<Typ>,
    pub process: Field,
    pub f: Option<Kind>,
    pub value_present: bool,
    pub value_obj: bool,
    pub queue: Field,
    pub value: Field,
    pub offset: Field,
    pub consumer: Field,
    pub records: Recs,
    pub recs: (u32, u32), // the records' range in the pair buffer passed to `read_line`
}

impl Line {
    pub fn new() -> Self {
        Line {
            lineno: 0,
            index: Field::Absent,
            typ: None,
            process: Field::Absent,
            f: None,
            value_present: false,
            value_obj: false,
            queue: Field::Absent,
            value: Field::Absent,
            offset: Field::Absent,
            consumer: Field::Absent,
            records: Recs::Absent,
            recs: (0, 0),
        }
    }

    fn clear(&mut self) {
        self.index = Field::Absent;
        self.typ = None;
        self.process = Field::Absent;
        self.f = None;
        self.value_present = false;
        self.clear_value();
    }

    fn clear_value(&mut self) {
        self.value_obj = false;
        self.queue = Field::Absent;
        self.value = Field::Absent;
        self.offset = Field::Absent;
        self.consumer = Field::Absent;
        self.records = Recs::Absent;
        self.recs = (0, 0);
    }
}

/// Strings the pass keys on, each stored once and named by its number.
#[derive(Default)]
pub struct Interner {
    ids: HashMap<Box<str>, u32, FxBuild>,
    pub strs: Vec<Box<str>>,
}

impl Interner {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.strs.len() as u32;
        self.strs.push(s.into());
        self.ids.insert(s.into(), id);
        id
    }
}

/// Read the line that starts at `b[at]` into `line`: whether it held an op (false: a blank line, JSON
/// whitespace only) and where the next line starts.  The line ends at a newline or at the end of `b`; a
/// newline inside it (a pretty-printed op) bails, as the Python reader parses each line alone.
pub fn read_line(b: &[u8], at: usize, line: &mut Line, strs: &mut Interner, out: &mut Vec<(i64, Val)>)
    -> R<(bool, usize)> {
    let mut p = P { b, i: at, strs, out };
    p.ws();
    let blank = p.i == b.len() || p.peek() == b'\n';
    if !blank {
        line.clear();
        p.top(line)?;
        p.ws();
    }
    match p.peek() {
        b'\n' => Ok((!blank, p.i + 1)),
        _ if p.i == b.len() => Ok((!blank, p.i)),
        _ => bail!("text after the op object at byte {}", p.i - at),
    }
}

const LOW: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Nonzero if some byte of `w` is zero (exact for the lowest such byte; the caller only needs "maybe").
#[inline]
fn zero_byte(w: u64) -> u64 {
    w.wrapping_sub(LOW) & !w & HIGH
}

fn utf8(raw: &[u8]) -> R<&str> {
    std::str::from_utf8(raw).map_err(|_| Bail("invalid UTF-8 in a string".into()))
}

struct P<'a, 'b> {
    b: &'a [u8],
    i: usize,
    strs: &'b mut Interner,
    out: &'b mut Vec<(i64, Val)>, // poll records of the batch
}

impl<'a, 'b> P<'a, 'b> {
    #[inline]
    fn peek(&self) -> u8 {
        *self.b.get(self.i).unwrap_or(&0)
    }

    #[inline]
    fn ws(&mut self) {
        while matches!(self.peek(), b' ' | b'\t' | b'\r') {
            self.i += 1;
        }
    }

    fn expect(&mut self, c: u8) -> R<()> {
        if self.peek() != c {
            bail!("expected {:?} at byte {}", c as char, self.i);
        }
        self.i += 1;
        Ok(())
    }

    /// After `{`: true if the object is empty (its `}` consumed).
    fn obj_empty(&mut self) -> R<bool> {
        self.expect(b'{')?;
        self.ws();
        if self.peek() == b'}' {
            self.i += 1;
            return Ok(true);
        }
        Ok(false)
    }

    /// A key and its colon.
    fn key(&mut self) -> R<Cow<'a, str>> {
        let k = self.string()?;
        self.ws();
        self.expect(b':')?;
        self.ws();
        Ok(k)
    }

    /// After a member: true if another follows (its comma consumed), false at the closing `c`.
    fn more(&mut self, close: u8) -> R<bool> {
        self.ws();
        match self.peek() {
            b',' => {
                self.i += 1;
                self.ws();
                Ok(true)
            }
            c if c == close => {
                self.i += 1;
                Ok(false)
            }
            _ => bail!("expected ',' or {:?} at byte {}", close as char, self.i),
        }
    }

    fn top(&mut self, line: &mut Line) -> R<()> {
        if self.obj_empty()? {
            return Ok(());
        }
        let mut seen = 0u8;
        loop {
            let bit = match self.known(TOP_KEYS)? {
                Some(n) => TOP_BITS[n],
                None => match &*self.key()? {
                    "index" => 1,
                    "type" => 2,
                    "process" => 4,
                    "f" => 8,
                    "value" => 16,
                    _ => 0,
                },
            };
            if seen & bit != 0 {
                bail!("a key read by the pass twice in one op");
            }
            seen |= bit;
            match bit {
                1 => line.index = self.field()?,
                2 => line.typ = Some(self.typ()?),
                4 => line.process = self.field()?,
                8 => line.f = Some(self.kind()?),
                16 => {
                    line.value_present = true;
                    if line.f == Some(Kind::Other) {
                        self.skip(1)?; // an op the queue pass ignores
                    } else {
                        self.qvalue(line)?;
                    }
                }
                _ => self.skip(1)?,
            }
            if !self.more(b'}')? {
                return Ok(());
            }
        }
    }

    /// The number of the entry of `keys` (each quoted) spelled plainly next, with its colon consumed; None
    /// (nothing consumed) if the next key is any other, or spelled with escapes.
    #[inline]
    fn known(&mut self, keys: &[&[u8]]) -> R<Option<usize>> {
        let rest = &self.b[self.i..];
        for (n, k) in keys.iter().enumerate() {
            if rest.starts_with(k) {
                self.i += k.len();
                self.ws();
                self.expect(b':')?;
                self.ws();
                return Ok(Some(n));
            }
        }
        Ok(None)
    }

    /// The number of the entry of `words` (each quoted) spelled plainly next, consumed; else None.
    #[inline]
    fn word(&mut self, words: &[&[u8]]) -> Option<usize> {
        let rest = &self.b[self.i..];
        let n = words.iter().position(|w| rest.starts_with(w))?;
        self.i += words[n].len();
        Some(n)
    }

    fn typ(&mut self) -> R<Typ> {
        if let Some(n) = self.word(&[b"\"invoke\"", b"\"ok\"", b"\"fail\"", b"\"info\""]) {
            return Ok([Typ::Invoke, Typ::Ok, Typ::Fail, Typ::Info][n]);
        }
        if self.peek() != b'"' {
            self.skip(1)?;
            return Ok(Typ::Other);
        }
        Ok(match &*self.string()? {
            "invoke" => Typ::Invoke,
            "ok" => Typ::Ok,
            "fail" => Typ::Fail,
            "info" => Typ::Info,
            _ => Typ::Other,
        })
    }

    fn kind(&mut self) -> R<Kind> {
        if let Some(n) = self.word(&[b"\"send\"", b"\"poll\"", b"\"drain\""]) {
            return Ok([Kind::Send, Kind::Poll, Kind::Drain][n]);
        }
        if self.peek() != b'"' {
            self.skip(1)?;
            return Ok(Kind::Other);
        }
        Ok(match &*self.string()? {
            "send" => Kind::Send,
            "poll" => Kind::Poll,
            "drain" => Kind::Drain,
            _ => Kind::Other,
        })
    }

    /// An op's `value`: the five fields the pass reads if it is an object.
    fn qvalue(&mut self, line: &mut Line) -> R<()> {
        line.clear_value();
        if self.peek() != b'{' {
            return self.skip(1);
        }
        line.value_obj = true;
        if self.obj_empty()? {
            return Ok(());
        }
        let mut seen = 0u8;
        loop {
            let bit = match self.known(VALUE_KEYS)? {
                Some(n) => 1 << n,
                None => match &*self.key()? {
                    "queue" => 1,
                    "value" => 2,
                    "offset" => 4,
                    "consumer" => 8,
                    "records" => 16,
                    _ => 0,
                },
            };
            if seen & bit != 0 {
                bail!("a value key read by the pass twice in one op");
            }
            seen |= bit;
            match bit {
                1 => line.queue = self.field()?,
                2 => line.value = self.field()?,
                4 => line.offset = self.field()?,
                8 => line.consumer = self.field()?,
                16 => {
                    let from = self.out.len();
                    line.records = self.records()?;
                    line.recs = (from as u32, self.out.len() as u32);
                }
                _ => self.skip(2)?,
            }
            if !self.more(b'}')? {
                return Ok(());
            }
        }
    }

    /// A poll's records: `List` when every element is an `[int, Val]` pair (collected in `out`).
    fn records(&mut self) -> R<Recs> {
        match self.peek() {
            b'n' => {
                self.literal(b"null")?;
                return Ok(Recs::Null);
            }
            b'[' => {}
            _ => {
                self.skip(2)?;
                return Ok(Recs::Other);
            }
        }
        self.i += 1;
        self.ws();
        if self.peek() == b']' {
            self.i += 1;
            return Ok(Recs::List);
        }
        let mut ok = true;
        loop {
            if ok && self.peek() == b'[' {
                ok = self.pair()?;
            } else {
                self.skip(3)?;
                ok = false;
            }
            if !self.more(b']')? {
                return Ok(if ok { Recs::List } else { Recs::Other });
            }
        }
    }

    /// One `[offset, value]` record; false (its text still validated) if it is not exactly that.
    fn pair(&mut self) -> R<bool> {
        self.i += 1;
        self.ws();
        if self.peek() == b']' {
            self.i += 1;
            return Ok(false);
        }
        let mut items = [Field::Absent; 2];
        let mut n = 0;
        loop {
            let f = self.field_at(4)?;
            if n < 2 {
                items[n] = f;
            }
            n += 1;
            if !self.more(b']')? {
                break;
            }
        }
        match (n, items[0], items[1]) {
            (2, Field::Val(Val::Int(o)), Field::Val(v)) => {
                self.out.push((o, v));
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn field(&mut self) -> R<Field> {
        self.field_at(2)
    }

    /// A scalar the pass may key on: a 64-bit integer or a string; null; or anything else (validated).
    fn field_at(&mut self, depth: u32) -> R<Field> {
        match self.peek() {
            b'"' => {
                let s = self.string()?;
                Ok(Field::Val(Val::Str(self.strs.id(&s))))
            }
            b'-' | b'0'..=b'9' => self.number(),
            b'n' => {
                self.literal(b"null")?;
                Ok(Field::Null)
            }
            _ => {
                self.skip(depth)?;
                Ok(Field::Other)
            }
        }
    }

    fn literal(&mut self, lit: &[u8]) -> R<()> {
        if !self.b[self.i..].starts_with(lit) {
            bail!("bad literal at byte {}", self.i);
        }
        self.i += lit.len();
        Ok(())
    }

    /// A number: `Val(Int)` if it is an integer that fits in 64 bits, else `Other`.
    #[inline]
    fn number(&mut self) -> R<Field> {
        // the common case in one pass: an integer of at most 18 digits (any other number goes the long way)
        let b = self.b;
        let neg = self.peek() == b'-';
        let d0 = self.i + neg as usize;
        let mut i = d0;
        let mut v: i64 = 0;
        while i < b.len() && b[i].is_ascii_digit() && i - d0 < 18 {
            v = v * 10 + (b[i] - b'0') as i64;
            i += 1;
        }
        let next = if i < b.len() { b[i] } else { b' ' };
        if i > d0 && (b[d0] != b'0' || i == d0 + 1) && !matches!(next, b'.' | b'e' | b'E' | b'0'..=b'9') {
            self.i = i;
            return Ok(Field::Val(Val::Int(if neg { -v } else { v })));
        }
        self.number_slow()
    }

    fn number_slow(&mut self) -> R<Field> {
        let (start, d0, int_end, int) = self.number_span()?;
        if !int || int_end - d0 > 19 {
            return Ok(Field::Other);
        }
        let mut v: i128 = 0;
        for &c in &self.b[d0..int_end] {
            v = v * 10 + (c - b'0') as i128;
        }
        if d0 > start {
            v = -v;
        }
        Ok(i64::try_from(v).map(|v| Field::Val(Val::Int(v))).unwrap_or(Field::Other))
    }

    /// Step over a number: where it starts, where its digits start and end, and whether it is an integer.
    fn number_span(&mut self) -> R<(usize, usize, usize, bool)> {
        let start = self.i;
        if self.peek() == b'-' {
            self.i += 1;
        }
        let d0 = self.i;
        match self.peek() {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => bail!("bad number at byte {start}"),
        }
        let int_end = self.i;
        let mut int = true;
        if self.peek() == b'.' {
            self.i += 1;
            if !self.peek().is_ascii_digit() {
                bail!("bad number at byte {start}");
            }
            self.digits();
            int = false;
        }
        if matches!(self.peek(), b'e' | b'E') {
            self.i += 1;
            if matches!(self.peek(), b'+' | b'-') {
                self.i += 1;
            }
            let e0 = self.i;
            self.digits();
            if self.i == e0 || self.i - e0 > 2 {
                bail!("number with an exponent outside 0..99 at byte {start}");
            }
            int = false;
        }
        Ok((start, d0, int_end, int))
    }

    #[inline]
    fn digits(&mut self) {
        while self.peek().is_ascii_digit() {
            self.i += 1;
        }
    }

    /// A JSON string's content, unescaped and checked to be UTF-8.
    fn string(&mut self) -> R<Cow<'a, str>> {
        self.expect(b'"')?;
        let start = self.i;
        let b = self.b;
        let mut j = start;
        let mut high = false; // whether a non-ASCII byte was seen: ASCII-only text needs no UTF-8 check
        loop {
            if j + 8 <= b.len() {
                // the first byte of the next eight that is a quote, a backslash, a control character or
                // non-ASCII (each test flags exactly the lowest such byte, which is all we use)
                let w = u64::from_le_bytes(b[j..j + 8].try_into().expect("8 bytes"));
                let special = (w & HIGH)
                    | zero_byte(w ^ (LOW * b'"' as u64))
                    | zero_byte(w ^ (LOW * b'\\' as u64))
                    | (w.wrapping_sub(LOW * 0x20) & !w & HIGH);
                if special == 0 {
                    j += 8;
                    continue;
                }
                j += (special.trailing_zeros() / 8) as usize;
            }
            let Some(&c) = b.get(j) else { break };
            match c {
                b'"' => {
                    self.i = j + 1;
                    let raw = &b[start..j];
                    if !high {
                        // SAFETY: every byte is below 0x80, so the text is ASCII and hence UTF-8
                        return Ok(Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(raw) }));
                    }
                    return utf8(raw).map(Cow::Borrowed);
                }
                b'\\' => break,
                c if c < 0x20 => bail!("control character in a string at byte {j}"),
                _ => {
                    high |= c >= 0x80;
                    j += 1;
                }
            }
        }
        if j >= b.len() {
            bail!("unterminated string at byte {start}");
        }
        let mut out = b[start..j].to_vec();
        self.i = j;
        self.escaped(&mut out)?;
        Ok(Cow::Owned(String::from_utf8(out).map_err(|_| Bail("invalid UTF-8 in a string".into()))?))
    }

    /// The rest of a string that has escapes, from the first backslash.
    fn escaped(&mut self, out: &mut Vec<u8>) -> R<()> {
        loop {
            let c = self.peek();
            if self.i >= self.b.len() {
                bail!("unterminated string");
            }
            self.i += 1;
            match c {
                b'"' => return Ok(()),
                b'\\' => {
                    let e = self.peek();
                    self.i += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => self.unicode_escape(out)?,
                        _ => bail!("bad escape at byte {}", self.i),
                    }
                }
                c if c < 0x20 => bail!("control character in a string at byte {}", self.i),
                c => out.push(c),
            }
        }
    }

    fn hex4(&mut self) -> R<u32> {
        let h = self.b.get(self.i..self.i + 4).ok_or_else(|| Bail("short \\u escape".into()))?;
        let s = std::str::from_utf8(h).map_err(|_| Bail("bad \\u escape".into()))?;
        let v = u32::from_str_radix(s, 16).map_err(|_| Bail(format!("bad \\u escape at byte {}", self.i)))?;
        if !h.iter().all(u8::is_ascii_hexdigit) {
            bail!("bad \\u escape at byte {}", self.i);
        }
        self.i += 4;
        Ok(v)
    }

    /// After `\u`: one code point, or a surrogate pair; a lone surrogate bails (orjson refuses it).
    fn unicode_escape(&mut self, out: &mut Vec<u8>) -> R<()> {
        let hi = self.hex4()?;
        let cp = if (0xD800..0xDC00).contains(&hi) {
            if !self.b[self.i..].starts_with(b"\\u") {
                bail!("lone surrogate escape at byte {}", self.i);
            }
            self.i += 2;
            let lo = self.hex4()?;
            if !(0xDC00..0xE000).contains(&lo) {
                bail!("lone surrogate escape at byte {}", self.i);
            }
            0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
        } else if (0xDC00..0xE000).contains(&hi) {
            bail!("lone surrogate escape at byte {}", self.i);
        } else {
            hi
        };
        let ch = char::from_u32(cp).ok_or_else(|| Bail("bad code point".into()))?;
        let mut buf = [0u8; 4];
        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
        Ok(())
    }

    /// Validate and step over any JSON value.
    fn skip(&mut self, depth: u32) -> R<()> {
        if depth > MAX_DEPTH {
            bail!("nesting deeper than {MAX_DEPTH} at byte {}", self.i);
        }
        match self.peek() {
            b'"' => {
                self.string()?;
            }
            b'-' | b'0'..=b'9' => {
                self.number_span()?;
            }
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            b'n' => self.literal(b"null")?,
            b'[' => {
                self.i += 1;
                self.ws();
                if self.peek() == b']' {
                    self.i += 1;
                    return Ok(());
                }
                loop {
                    self.skip(depth + 1)?;
                    if !self.more(b']')? {
                        return Ok(());
                    }
                }
            }
            b'{' => {
                if self.obj_empty()? {
                    return Ok(());
                }
                loop {
                    self.key()?;
                    self.skip(depth + 1)?;
                    if !self.more(b'}')? {
                        return Ok(());
                    }
                }
            }
            _ => bail!("not a JSON value at byte {}", self.i),
        }
        Ok(())
    }
}
