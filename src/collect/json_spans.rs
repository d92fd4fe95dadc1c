//! Where each value of a JSON text starts and ends, found without building it.
//!
//! A snapshot of a large cluster is hundreds of megabytes of one `List`. Building a generic
//! JSON tree of it first and typing every object from that tree afterwards costs most of a
//! `check`; instead the reader finds each object's text here and types it straight from
//! that text. The scan is strict (it accepts only what `serde_json` accepts, except that it
//! does not check what numbers and escapes mean beyond their shape), and whatever it refuses is
//! read the slow way, so an odd file still gives the same answer or the same error as before.

/// Why a text could not be scanned; the caller falls back to a full parse for the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused;

/// Below serde_json's own nesting limit (it refuses 128 levels): deeper texts are refused
/// here and left to it.
const MAX_DEPTH: usize = 127;

/// The kind of the JSON value a text holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Object,
    Array,
    String,
    Number,
    Boolean,
    Null,
}

/// The shape of the single value `text` holds (surrounding whitespace allowed).
pub fn shape(text: &str) -> Shape {
    match text.trim_start().as_bytes().first() {
        Some(b'{') => Shape::Object,
        Some(b'[') => Shape::Array,
        Some(b'"') => Shape::String,
        Some(b't' | b'f') => Shape::Boolean,
        Some(b'n') => Shape::Null,
        _ => Shape::Number,
    }
}

/// The whole text is one JSON value with only whitespace around it.
pub fn validate(text: &str) -> Result<(), Refused> {
    let b = text.as_bytes();
    let start = ws(b, 0);
    let end = value_end(b, start, 0)?;
    if ws(b, end) == b.len() {
        Ok(())
    } else {
        Err(Refused)
    }
}

/// The members of the object `text` (with nothing but whitespace around it): each raw key (the text
/// between the quotes, escapes left as written) with its value's text.
pub fn members(text: &str) -> Result<Vec<(&str, &str)>, Refused> {
    let b = text.as_bytes();
    let mut i = ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return Err(Refused);
    }
    i = ws(b, i + 1);
    let mut out = Vec::new();
    if b.get(i) == Some(&b'}') {
        return if ws(b, i + 1) == b.len() {
            Ok(out)
        } else {
            Err(Refused)
        };
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return Err(Refused);
        }
        let key_end = string_end(b, i)?;
        let key = &text[i + 1..key_end - 1];
        i = ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return Err(Refused);
        }
        i = ws(b, i + 1);
        let end = value_end(b, i, 1)?;
        out.push((key, &text[i..end]));
        i = ws(b, end);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b'}') if ws(b, i + 1) == b.len() => return Ok(out),
            _ => return Err(Refused),
        }
    }
}

/// The value of `key` in the object `text`, the last one when a key repeats (as a parsed
/// object keeps it). Keys written with escapes are compared as decoded.
pub fn member<'a>(members: &[(&str, &'a str)], key: &str) -> Option<&'a str> {
    members
        .iter()
        .rev()
        .find(|(k, _)| {
            *k == key
                || (k.contains('\\')
                    && serde_json::from_str::<String>(&format!("\"{k}\"")).is_ok_and(|d| d == key))
        })
        .map(|(_, v)| *v)
}

/// The elements of the array `text` (with nothing but whitespace around it), each as its
/// text.
pub fn elements(text: &str) -> Result<Vec<&str>, Refused> {
    let b = text.as_bytes();
    let mut i = ws(b, 0);
    if b.get(i) != Some(&b'[') {
        return Err(Refused);
    }
    i = ws(b, i + 1);
    let mut out = Vec::new();
    if b.get(i) == Some(&b']') {
        return if ws(b, i + 1) == b.len() {
            Ok(out)
        } else {
            Err(Refused)
        };
    }
    loop {
        let end = value_end(b, i, 1)?;
        out.push(&text[i..end]);
        i = ws(b, end);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b']') if ws(b, i + 1) == b.len() => return Ok(out),
            _ => return Err(Refused),
        }
    }
}

fn ws(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = b.get(i) {
        i += 1;
    }
    i
}

/// The index just past the value that starts at `i`.
fn value_end(b: &[u8], i: usize, depth: usize) -> Result<usize, Refused> {
    match b.get(i) {
        Some(b'"') => string_end(b, i),
        Some(b'{') => container_end(b, i, depth, b'}', true),
        Some(b'[') => container_end(b, i, depth, b']', false),
        Some(b't') => literal_end(b, i, b"true"),
        Some(b'f') => literal_end(b, i, b"false"),
        Some(b'n') => literal_end(b, i, b"null"),
        Some(b'-' | b'0'..=b'9') => number_end(b, i),
        _ => Err(Refused),
    }
}

fn container_end(
    b: &[u8],
    open: usize,
    depth: usize,
    close: u8,
    object: bool,
) -> Result<usize, Refused> {
    if depth + 1 > MAX_DEPTH {
        return Err(Refused);
    }
    let mut i = ws(b, open + 1);
    if b.get(i) == Some(&close) {
        return Ok(i + 1);
    }
    loop {
        if object {
            if b.get(i) != Some(&b'"') {
                return Err(Refused);
            }
            i = ws(b, string_end(b, i)?);
            if b.get(i) != Some(&b':') {
                return Err(Refused);
            }
            i = ws(b, i + 1);
        }
        i = ws(b, value_end(b, i, depth + 1)?);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(c) if *c == close => return Ok(i + 1),
            _ => return Err(Refused),
        }
    }
}

/// The bytes a string's plain run stops at: the closing quote, an escape, and the control
/// characters JSON forbids raw inside a string.
static STOPS: [bool; 256] = {
    let mut stops = [false; 256];
    let mut c = 0;
    while c < 0x20 {
        stops[c] = true;
        c += 1;
    }
    stops[b'"' as usize] = true;
    stops[b'\\' as usize] = true;
    stops
};

/// Where the plain run of a string that continues at `j` ends: the first byte at or after
/// `j` that [`STOPS`] names, or the end of the text. Most of a snapshot's bytes are inside
/// strings, so eight bytes are tested at a time while none of them can stop the run.
fn plain_run_end(b: &[u8], mut j: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A byte of `x` is zero exactly when the matching byte of the result has its high bit.
    let zero_byte = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
    while let Some(chunk) = b.get(j..j + 8) {
        let x = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        let control = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
        if zero_byte(x ^ (ONES * u64::from(b'"')))
            | zero_byte(x ^ (ONES * u64::from(b'\\')))
            | control
            != 0
        {
            break;
        }
        j += 8;
    }
    while b.get(j).is_some_and(|c| !STOPS[usize::from(*c)]) {
        j += 1;
    }
    j
}

/// The index past the closing quote of the string opening at `i`.
fn string_end(b: &[u8], i: usize) -> Result<usize, Refused> {
    let mut j = i + 1;
    loop {
        j = plain_run_end(b, j);
        match b.get(j) {
            Some(b'"') => return Ok(j + 1),
            Some(b'\\') => match b.get(j + 1) {
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => j += 2,
                // Surrogate pairs and their validity are left to serde_json: refuse and
                // let the full parse decide.
                Some(b'u') => {
                    let hex = b.get(j + 2..j + 6).ok_or(Refused)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return Err(Refused);
                    }
                    let code =
                        u16::from_str_radix(std::str::from_utf8(hex).map_err(|_| Refused)?, 16)
                            .map_err(|_| Refused)?;
                    if (0xD800..=0xDFFF).contains(&code) {
                        return Err(Refused);
                    }
                    j += 6;
                }
                _ => return Err(Refused),
            },
            // A control character, or the text ended inside the string.
            _ => return Err(Refused),
        }
    }
}

fn literal_end(b: &[u8], i: usize, word: &[u8]) -> Result<usize, Refused> {
    if b.get(i..i + word.len()) == Some(word) {
        Ok(i + word.len())
    } else {
        Err(Refused)
    }
}

fn number_end(b: &[u8], i: usize) -> Result<usize, Refused> {
    let mut j = i;
    if b.get(j) == Some(&b'-') {
        j += 1;
    }
    let digits = |j: usize| {
        let mut k = j;
        while b.get(k).is_some_and(u8::is_ascii_digit) {
            k += 1;
        }
        k
    };
    match b.get(j) {
        Some(b'0') => j += 1,
        Some(b'1'..=b'9') => j = digits(j),
        _ => return Err(Refused),
    }
    if b.get(j) == Some(&b'.') {
        let k = digits(j + 1);
        if k == j + 1 {
            return Err(Refused);
        }
        j = k;
    }
    if let Some(b'e' | b'E') = b.get(j) {
        j += 1;
        if let Some(b'+' | b'-') = b.get(j) {
            j += 1;
        }
        let k = digits(j);
        if k == j {
            return Err(Refused);
        }
        j = k;
    }
    Ok(j)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_splits_into_its_members_and_elements() {
        let text = r#" {"kind": "List", "items": [ {"a": [1, 2.5e3, -0]}, "x\"y", null ], "k\u0065y": true } "#;
        validate(text).unwrap();
        let m = members(text).unwrap();
        assert_eq!(member(&m, "kind"), Some(r#""List""#));
        assert_eq!(member(&m, "key"), Some("true"));
        let items = elements(member(&m, "items").unwrap()).unwrap();
        assert_eq!(items, vec![r#"{"a": [1, 2.5e3, -0]}"#, r#""x\"y""#, "null"]);
    }

    #[test]
    fn a_repeated_key_reads_as_its_last_value() {
        let m = members(r#"{"kind": "A", "kind": "B"}"#).unwrap();
        assert_eq!(member(&m, "kind"), Some(r#""B""#));
    }

    #[test]
    fn whatever_serde_json_refuses_is_refused() {
        for bad in [
            "{",
            r#"{"a" 1}"#,
            "[1,]",
            "[01]",
            "[1.]",
            "tru",
            "\"a\nb\"",
            r#""\x""#,
            "{} {}",
            "[] 1",
            "[-]",
            "[1e]",
            &"[".repeat(200),
        ] {
            assert!(
                serde_json::from_str::<serde::de::IgnoredAny>(bad).is_err(),
                "{bad}"
            );
            assert_eq!(validate(bad), Err(Refused), "{bad}");
            if bad.starts_with('{') {
                assert_eq!(members(bad), Err(Refused), "{bad}");
            }
            if bad.starts_with('[') {
                assert_eq!(elements(bad), Err(Refused), "{bad}");
            }
        }
    }

    #[test]
    fn a_string_ends_at_its_first_unescaped_quote_wherever_it_falls_in_an_eight_byte_step() {
        for len in 0..40 {
            let body = "a".repeat(len);
            for (text, end) in [
                (format!("\"{body}\" rest"), len + 2),
                (format!("\"{body}\\\"x\" rest"), len + 5),
                (format!("\"{body}\\\\\" rest"), len + 4),
                (format!("\"{body}é\" rest"), len + 4),
            ] {
                assert_eq!(string_end(text.as_bytes(), 0), Ok(end), "{text:?}");
            }
            for bad in [
                format!("\"{body}\nb\""),
                format!("\"{body}\u{1f}\""),
                format!("\"{body}"),
                format!("\"{body}\\"),
            ] {
                assert_eq!(string_end(bad.as_bytes(), 0), Err(Refused), "{bad:?}");
                assert!(serde_json::from_str::<String>(&bad).is_err(), "{bad:?}");
            }
        }
    }

    #[test]
    fn nesting_as_deep_as_serde_json_allows_still_scans() {
        let deep = format!("{}{}", "[".repeat(127), "]".repeat(127));
        assert!(serde_json::from_str::<serde_json::Value>(&deep).is_ok());
        assert_eq!(validate(&deep), Ok(()));
    }
}
