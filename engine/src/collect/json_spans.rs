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

mod parallel;

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

/// An object as the snapshot reader dispatches on it, found in one pass over its text: the
/// texts of its `kind`, `apiVersion` and `metadata` members (an object that repeats a key
/// is refused) and, when its `items` member is an array, that array's
/// documents in turn. A value that is not an object is a document with no members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document<'t> {
    pub text: &'t str,
    pub kind: Option<&'t str>,
    pub api_version: Option<&'t str>,
    pub metadata: Option<&'t str>,
    pub items: Option<Vec<Document<'t>>>,
}

/// The document `text` holds (with nothing but whitespace around it). Every byte is read
/// once: a list's items are split while the list is, and each item's members while the
/// item is, rather than finding each level's end and then scanning it again.
pub fn document(text: &str) -> Result<Document<'_>, Refused> {
    let b = text.as_bytes();
    let (doc, end) = document_at(text, ws(b, 0), 0)?;
    if ws(b, end) == b.len() {
        Ok(doc)
    } else {
        Err(Refused)
    }
}

/// The documents of the array `text` holds (with nothing but whitespace around it): the
/// YAML documents of a file, read as one array.
pub fn documents(text: &str) -> Result<Vec<Document<'_>>, Refused> {
    let b = text.as_bytes();
    let start = ws(b, 0);
    if b.get(start) != Some(&b'[') {
        return Err(Refused);
    }
    let (docs, end) = documents_at(text, start, 0)?;
    if ws(b, end) == b.len() {
        Ok(docs)
    } else {
        Err(Refused)
    }
}

/// For the snapshot fuzz target: panics when splitting the first array of `text` from
/// guessed item starts finds other documents than a scan in turn.
#[doc(hidden)]
pub fn assert_guessed_split_agrees(text: &str) {
    parallel::assert_split_agrees(text);
}

/// The keys of one object, to refuse an object that repeats one (a parsed object would
/// keep only the last, silently): the full parse then names the key and its line. Keys are
/// compared as written; a key with an escape is compared decoded (managed fields write keys
/// such as `k:{\"type\":\"Ready\"}`), and one that decodes to a member the scan keeps
/// (`kind`, `apiVersion`, `metadata`, `items`) is left to the full parse. The first few keys
/// are checked as they come; an object with more, or with an escaped key, is checked once,
/// sorted, at its end.
struct Keys<'b> {
    few: [&'b [u8]; FEW],
    len: usize,
    more: Vec<&'b [u8]>,
    /// Escaped keys, decoded.
    decoded: Vec<Vec<u8>>,
}

const FEW: usize = 16;

impl<'b> Keys<'b> {
    fn new() -> Self {
        Keys {
            few: [&[]; FEW],
            len: 0,
            more: Vec::new(),
            decoded: Vec::new(),
        }
    }

    /// Add the raw text of a key (between its quotes).
    fn add(&mut self, key: &'b [u8]) -> Result<(), Refused> {
        if key.contains(&b'\\') {
            let mut quoted = Vec::with_capacity(key.len() + 2);
            quoted.push(b'"');
            quoted.extend_from_slice(key);
            quoted.push(b'"');
            let text: String = serde_json::from_slice(&quoted).map_err(|_| Refused)?;
            if kept(&text).is_some() {
                return Err(Refused);
            }
            self.decoded.push(text.into_bytes());
            return Ok(());
        }
        if self.len < FEW {
            if self.few[..self.len].contains(&key) {
                return Err(Refused);
            }
            self.few[self.len] = key;
            self.len += 1;
        } else {
            self.more.push(key);
        }
        Ok(())
    }

    /// At the object's end: whether all its keys differ.
    fn close(mut self) -> Result<(), Refused> {
        if self.more.is_empty() && self.decoded.is_empty() {
            return Ok(());
        }
        self.more.extend_from_slice(&self.few[..self.len]);
        let mut all: Vec<&[u8]> = self.more;
        all.extend(self.decoded.iter().map(Vec::as_slice));
        all.sort_unstable();
        if all.windows(2).any(|pair| pair[0] == pair[1]) {
            Err(Refused)
        } else {
            Ok(())
        }
    }
}

/// The members a [`Document`] keeps.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kept {
    Kind,
    ApiVersion,
    Metadata,
    Items,
}

fn kept(raw_key: &str) -> Option<Kept> {
    let known = |key: &str| match key {
        "kind" => Some(Kept::Kind),
        "apiVersion" => Some(Kept::ApiVersion),
        "metadata" => Some(Kept::Metadata),
        "items" => Some(Kept::Items),
        _ => None,
    };
    // A key written with escapes that decodes to one of these never gets here: [`Keys`]
    // leaves it to the full parse.
    known(raw_key)
}

/// The document whose value starts at `i`, `depth` containers deep, and the index just
/// past it.
fn document_at(text: &str, i: usize, depth: usize) -> Result<(Document<'_>, usize), Refused> {
    let b = text.as_bytes();
    let mut doc = Document {
        text: "",
        kind: None,
        api_version: None,
        metadata: None,
        items: None,
    };
    if b.get(i) != Some(&b'{') {
        let end = value_end(b, i, depth)?;
        doc.text = &text[i..end];
        return Ok((doc, end));
    }
    if depth + 1 > MAX_DEPTH {
        return Err(Refused);
    }
    let mut j = ws(b, i + 1);
    if b.get(j) == Some(&b'}') {
        doc.text = &text[i..=j];
        return Ok((doc, j + 1));
    }
    let mut keys = Keys::new();
    loop {
        if b.get(j) != Some(&b'"') {
            return Err(Refused);
        }
        let key_end = string_end(b, j)?;
        keys.add(&b[j + 1..key_end - 1])?;
        let key = kept(&text[j + 1..key_end - 1]);
        j = ws(b, key_end);
        if b.get(j) != Some(&b':') {
            return Err(Refused);
        }
        j = ws(b, j + 1);
        let end = if key == Some(Kept::Items) && b.get(j) == Some(&b'[') {
            let (items, end) = documents_at(text, j, depth + 1)?;
            doc.items = Some(items);
            end
        } else {
            let end = value_end(b, j, depth + 1)?;
            let value = &text[j..end];
            match key {
                Some(Kept::Kind) => doc.kind = Some(value),
                Some(Kept::ApiVersion) => doc.api_version = Some(value),
                Some(Kept::Metadata) => doc.metadata = Some(value),
                // An `items` that is not an array holds no documents.
                Some(Kept::Items) => doc.items = None,
                None => {}
            }
            end
        };
        j = ws(b, end);
        match b.get(j) {
            Some(b',') => j = ws(b, j + 1),
            Some(b'}') => {
                keys.close()?;
                doc.text = &text[i..=j];
                return Ok((doc, j + 1));
            }
            _ => return Err(Refused),
        }
    }
}

/// The documents of the array that starts at `open`, `depth` containers deep, and the
/// index just past it. A large top-level list is split on several threads.
fn documents_at(
    text: &str,
    open: usize,
    depth: usize,
) -> Result<(Vec<Document<'_>>, usize), Refused> {
    if depth + 1 > MAX_DEPTH {
        return Err(Refused);
    }
    if depth == 1 && text.len() - open >= parallel::AT_LEAST {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        if threads > 1 {
            return parallel::documents_at(text, open, depth, threads);
        }
    }
    documents_in_turn(text, open, depth)
}

/// [`documents_at`] on this thread alone.
fn documents_in_turn(
    text: &str,
    open: usize,
    depth: usize,
) -> Result<(Vec<Document<'_>>, usize), Refused> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = ws(b, open + 1);
    if b.get(i) == Some(&b']') {
        return Ok((out, i + 1));
    }
    loop {
        let (doc, end) = document_at(text, i, depth + 1)?;
        out.push(doc);
        match after_item(b, end)? {
            AfterItem::Next(next) => i = next,
            AfterItem::Closed(end) => return Ok((out, end)),
        }
    }
}

/// What follows an array's item.
enum AfterItem {
    /// Another item, starting here.
    Next(usize),
    /// The array's end; the index just past it.
    Closed(usize),
}

/// What follows the array item that ends just before `end`.
fn after_item(b: &[u8], end: usize) -> Result<AfterItem, Refused> {
    let i = ws(b, end);
    match b.get(i) {
        Some(b',') => Ok(AfterItem::Next(ws(b, i + 1))),
        Some(b']') => Ok(AfterItem::Closed(i + 1)),
        _ => Err(Refused),
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
    let mut keys = Keys::new();
    loop {
        if object {
            if b.get(i) != Some(&b'"') {
                return Err(Refused);
            }
            let key_end = string_end(b, i)?;
            keys.add(&b[i + 1..key_end - 1])?;
            i = ws(b, key_end);
            if b.get(i) != Some(&b':') {
                return Err(Refused);
            }
            i = ws(b, i + 1);
        }
        i = ws(b, value_end(b, i, depth + 1)?);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(c) if *c == close => {
                keys.close()?;
                return Ok(i + 1);
            }
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
    fn every_kind_of_value_is_scanned_to_its_end() {
        let text = r#" {"kind": "List", "items": [ {"a": [1, 2.5e3, -0]}, "x\"y", null, true, false, {} ] } "#;
        let items: Vec<&str> = document(text)
            .unwrap()
            .items
            .unwrap()
            .iter()
            .map(|d| d.text)
            .collect();
        assert_eq!(
            items,
            vec![
                r#"{"a": [1, 2.5e3, -0]}"#,
                r#""x\"y""#,
                "null",
                "true",
                "false",
                "{}"
            ]
        );
    }

    #[test]
    fn a_list_splits_into_its_documents_in_one_pass() {
        let text = r#" {"kind": "PodList", "apiVersion": "v1", "metadata": {"a": 1},
            "items": [ {"kind": "Pod", "spec": {"items": 1}},
                       {"kind": "List", "items": [ {"apiVersion": "x"} ]}, 7 ] } "#;
        let doc = document(text).unwrap();
        assert_eq!(doc.text, text.trim());
        assert_eq!(doc.kind, Some(r#""PodList""#));
        assert_eq!(doc.api_version, Some(r#""v1""#));
        assert_eq!(doc.metadata, Some(r#"{"a": 1}"#));
        let items = doc.items.unwrap();
        assert_eq!(items.len(), 3);
        // An `items` deeper down is not the object's own.
        assert_eq!(items[0].kind, Some(r#""Pod""#));
        assert_eq!(items[0].items, None);
        assert_eq!(
            items[1].items.as_ref().unwrap()[0].api_version,
            Some(r#""x""#)
        );
        assert_eq!(items[2].text, "7");
        assert_eq!(items[2].kind, None);
    }

    #[test]
    fn an_items_member_that_is_not_a_list_leaves_the_document_without_items() {
        assert_eq!(document(r#"{"items": 1}"#).unwrap().items, None);
        let docs = documents(r#"[{"kind": "A"}, []]"#).unwrap();
        assert_eq!(docs[0].kind, Some(r#""A""#));
        assert_eq!(docs[1].text, "[]");
    }

    #[test]
    fn a_repeated_key_even_behind_an_escape_is_refused_for_the_full_parse_to_name() {
        for text in [
            r#"{"kind": "A", "kind": "B"}"#,
            r#"{"items": [], "items": {}}"#,
            r#"{"a": {"x": 1, "y": 2, "x": 3}}"#,
            r#"[{"k\u0069nd": "A"}]"#,
            r#"{"a": {"n\u0061me": 1, "name": 2}}"#,
        ] {
            assert_eq!(document(text), Err(Refused), "{text}");
        }
        // Managed fields write keys with escaped quotes; distinct ones are read fast.
        let managed = r#"{"kind": "Node", "metadata": {"managedFields": [{"fieldsV1": {"f:status": {"k:{\"type\":\"Ready\"}": {}, "k:{\"type\":\"MemoryPressure\"}": {}}}}]}}"#;
        assert!(document(managed).is_ok(), "{managed}");
        // Past the first few keys, a repeat is found at the object's end.
        let many: Vec<String> = (0..40).map(|i| format!("\"k{i}\": {i}")).collect();
        let distinct = format!("{{\"a\": {{{}}}}}", many.join(", "));
        assert!(document(&distinct).is_ok());
        let repeated = format!("{{\"a\": {{{}, \"k3\": 0}}}}", many.join(", "));
        assert_eq!(document(&repeated), Err(Refused));
        let repeated_late = format!("{{\"a\": {{{}, \"k39\": 0}}}}", many.join(", "));
        assert_eq!(document(&repeated_late), Err(Refused));
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
            if bad.starts_with('[') {
                assert_eq!(documents(bad), Err(Refused), "{bad}");
            }
            assert_eq!(document(bad), Err(Refused), "{bad}");
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
        assert!(document(&deep).is_ok());
        let deeper = format!("{}{}", "[".repeat(128), "]".repeat(128));
        assert_eq!(document(&deeper), Err(Refused));
    }
}
