//! Splitting a large list's items on several threads.
//!
//! Where an item starts is only known by scanning everything before it, so the scan guesses:
//! a line that starts with `{` at the first item's column, right after a `,`, is very likely
//! the start of an item (in the files `gates snapshot` writes every item is such a line, and
//! in kubectl's indented output too). Each guess is scanned on its own thread. A guess is
//! only used once the scan before it arrives exactly there at an item boundary, and scanning
//! an item is the same whatever thread does it, so the documents are the ones a scan in
//! turn finds; a wrong guess costs only its thread's time. A file with no such lines (a
//! list on one line) is scanned in turn.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::ScopedJoinHandle;

use super::{AfterItem, Document, Refused, after_item, document_at, documents_in_turn, ws};

/// Lists shorter than this are scanned in turn: a thread costs more than it saves.
pub(super) const AT_LEAST: usize = 4 << 20;

/// Where the scan from one guess stopped.
#[derive(Debug, PartialEq, Eq)]
enum Stop {
    /// At the later guess with this index, reached as an item's start.
    AtGuess(usize),
    /// Past the list's closing bracket, at this index.
    Closed(usize),
}

type Part<'t> = Result<(Vec<Document<'t>>, Stop), Refused>;

/// The documents of the array that opens at `open` (items `depth + 1` containers deep) and
/// the index past it, split on up to `threads` threads.
pub(super) fn documents_at(
    text: &str,
    open: usize,
    depth: usize,
    threads: usize,
) -> Result<(Vec<Document<'_>>, usize), Refused> {
    let guesses = guesses(text.as_bytes(), open, threads);
    if guesses.is_empty() {
        return documents_in_turn(text, open, depth);
    }
    documents_from_guesses(text, open, depth, &guesses)
}

/// Item starts to scan from, one per extra thread, evenly through the text after `open`.
fn guesses(b: &[u8], open: usize, threads: usize) -> Vec<usize> {
    let first = ws(b, open + 1);
    if b.get(first) != Some(&b'{') {
        return Vec::new();
    }
    let column = first - line_start(b, first);
    let share = (b.len() - first) / threads;
    let mut out: Vec<usize> = Vec::new();
    for t in 1..threads {
        let from = (first + t * share).max(out.last().map_or(0, |g| g + 1));
        if let Some(guess) = item_line_at_or_after(b, from, column, from + share / 2) {
            out.push(guess);
        }
    }
    out
}

fn line_start(b: &[u8], i: usize) -> usize {
    b[..i]
        .iter()
        .rposition(|c| *c == b'\n')
        .map_or(0, |n| n + 1)
}

/// The first `{` at or after `from` (and before `until`) that opens a line at `column` and
/// follows a `,`.
fn item_line_at_or_after(b: &[u8], from: usize, column: usize, until: usize) -> Option<usize> {
    let mut newline = from + b.get(from..)?.iter().position(|c| *c == b'\n')?;
    while newline < until.min(b.len()) {
        let start = newline + 1;
        let brace = start + column;
        let indented = b
            .get(start..brace)
            .is_some_and(|s| s.iter().all(|c| *c == b' '));
        if indented && b.get(brace) == Some(&b'{') && after_comma(b, newline) {
            return Some(brace);
        }
        newline = start + b.get(start..)?.iter().position(|c| *c == b'\n')?;
    }
    None
}

fn after_comma(b: &[u8], before: usize) -> bool {
    b[..before]
        .iter()
        .rev()
        .find(|c| !matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
        == Some(&b',')
}

/// [`documents_at`] from given guesses (ascending, all after the first item).
fn documents_from_guesses<'t>(
    text: &'t str,
    open: usize,
    depth: usize,
    guesses: &[usize],
) -> Result<(Vec<Document<'t>>, usize), Refused> {
    let cancelled: Vec<AtomicBool> = guesses.iter().map(|_| AtomicBool::new(false)).collect();
    std::thread::scope(|scope| {
        let mut parts: Vec<Option<ScopedJoinHandle<'_, Part<'t>>>> = (0..guesses.len())
            .map(|k| {
                let cancelled = &cancelled;
                Some(scope.spawn(move || scan(text, guesses, k, depth, &cancelled[k])))
            })
            .collect();
        let mut take = |k: usize| -> Part<'t> {
            parts[k]
                .take()
                .map_or(Err(Refused), |h| h.join().unwrap_or(Err(Refused)))
        };
        let result = scan_joining(text, open, depth, guesses, &cancelled, &mut take);
        for flag in &cancelled {
            flag.store(true, Ordering::Relaxed);
        }
        result
    })
}

/// The scan in turn from the list's first item, taking over each thread's documents when it
/// arrives at that thread's guess.
fn scan_joining<'t>(
    text: &'t str,
    open: usize,
    depth: usize,
    guesses: &[usize],
    cancelled: &[AtomicBool],
    take: &mut dyn FnMut(usize) -> Part<'t>,
) -> Result<(Vec<Document<'t>>, usize), Refused> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = ws(b, open + 1);
    if b.get(i) == Some(&b']') {
        return Ok((out, i + 1));
    }
    let mut next = 0;
    loop {
        while next < guesses.len() && guesses[next] < i {
            cancelled[next].store(true, Ordering::Relaxed);
            next += 1;
        }
        if guesses.get(next) == Some(&i) {
            // Every scan taken over from here on started where an item does.
            let mut k = next;
            loop {
                let (documents, stop) = take(k)?;
                out.extend(documents);
                match stop {
                    Stop::AtGuess(later) => {
                        for flag in &cancelled[k + 1..later] {
                            flag.store(true, Ordering::Relaxed);
                        }
                        k = later;
                    }
                    Stop::Closed(end) => return Ok((out, end)),
                }
            }
        }
        let (doc, end) = document_at(text, i, depth + 1)?;
        out.push(doc);
        match after_item(b, end)? {
            AfterItem::Next(next) => i = next,
            AfterItem::Closed(end) => return Ok((out, end)),
        }
    }
}

/// The items from guess `k` on, until a later guess is reached as an item's start or the
/// list closes. A wrong guess usually fails or closes soon; it also stops when cancelled.
fn scan<'t>(
    text: &'t str,
    guesses: &[usize],
    k: usize,
    depth: usize,
    cancelled: &AtomicBool,
) -> Part<'t> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = guesses[k];
    let mut next = k + 1;
    loop {
        if cancelled.load(Ordering::Relaxed) {
            return Err(Refused);
        }
        let (doc, end) = document_at(text, i, depth + 1)?;
        out.push(doc);
        match after_item(b, end)? {
            AfterItem::Next(next) => i = next,
            AfterItem::Closed(end) => return Ok((out, Stop::Closed(end))),
        }
        while next < guesses.len() && guesses[next] < i {
            next += 1;
        }
        if guesses.get(next) == Some(&i) {
            return Ok((out, Stop::AtGuess(next)));
        }
    }
}

/// The fuzz target's check: the array at the first `[` of `text`, split from guesses (the
/// ones [`guesses`] makes and `{` bytes after the first item, right or wrong), gives what a
/// scan in turn gives, documents or refusal.
pub(super) fn assert_split_agrees(text: &str) {
    let Some(open) = text.find('[') else {
        return;
    };
    let mut starts = guesses(text.as_bytes(), open, 4);
    starts.extend(
        text.match_indices('{')
            .map(|(i, _)| i)
            .filter(|&i| i > open)
            .skip(1)
            .take(6),
    );
    starts.sort_unstable();
    starts.dedup();
    if starts.is_empty() {
        return;
    }
    assert_eq!(
        documents_from_guesses(text, open, 1, &starts),
        documents_in_turn(text, open, 1),
        "guesses {starts:?}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_turn(text: &str) -> Result<(Vec<Document<'_>>, usize), Refused> {
        documents_in_turn(text, text.find('[').unwrap(), 1)
    }

    fn from_guesses<'t>(
        text: &'t str,
        guesses: &[usize],
    ) -> Result<(Vec<Document<'t>>, usize), Refused> {
        documents_from_guesses(text, text.find('[').unwrap(), 1, guesses)
    }

    /// A list as `gates snapshot` writes it, one item per line.
    fn list(items: usize) -> String {
        nested_lines(items)
            .replace("[\n{\"a", "[{\"a")
            .replace(",\n{\"b", ",{\"b")
    }

    /// A list like [`list`] in which nested objects also open lines: lines a guess takes
    /// for items.
    fn nested_lines(items: usize) -> String {
        let mut text = String::from("{\"items\": [");
        for n in 0..items {
            text.push_str(if n == 0 { "\n" } else { ",\n" });
            text.push_str(&format!(
                "{{\"kind\":\"Pod\",\"metadata\":{{\"name\":\"p{n}\"}},\"spec\":[\n{{\"a\":{n}}},\n{{\"b\":[1,2]}}]}}"
            ));
        }
        text.push_str("\n]}");
        text
    }

    fn every_brace(text: &str) -> Vec<usize> {
        text.match_indices('{').map(|(i, _)| i).skip(2).collect()
    }

    #[test]
    fn any_guesses_right_or_wrong_give_the_documents_a_scan_in_turn_gives() {
        let text = nested_lines(40);
        let expected = in_turn(&text).unwrap();
        let braces = every_brace(&text);
        // Each brace alone, every pair of braces, and all of them at once.
        for (n, &a) in braces.iter().enumerate() {
            assert_eq!(from_guesses(&text, &[a]).unwrap(), expected, "guess {a}");
            for &b in &braces[n + 1..] {
                assert_eq!(from_guesses(&text, &[a, b]).unwrap(), expected, "{a} {b}");
            }
        }
        assert_eq!(from_guesses(&text, &braces).unwrap(), expected);
        // Guesses at bytes that open nothing at all.
        assert_eq!(from_guesses(&text, &[13, 57, 200]).unwrap(), expected);
    }

    #[test]
    fn the_guesses_are_item_lines_spread_through_the_list() {
        let text = list(400);
        let guesses = guesses(text.as_bytes(), text.find('[').unwrap(), 4);
        assert_eq!(guesses.len(), 3, "{guesses:?}");
        let items: Vec<usize> = in_turn(&text)
            .unwrap()
            .0
            .iter()
            .map(|d| d.text.as_ptr() as usize - text.as_ptr() as usize)
            .collect();
        for (t, guess) in guesses.iter().enumerate() {
            assert!(items.contains(guess), "{guess} is not an item's start");
            let quarter = text.len() * (t + 1) / 4;
            assert!(
                guess.abs_diff(quarter) < text.len() / 20,
                "{guess} far from {quarter}"
            );
        }
    }

    #[test]
    fn a_list_on_one_line_has_nothing_to_guess() {
        let text = nested_lines(50).replace('\n', "");
        assert!(guesses(text.as_bytes(), text.find('[').unwrap(), 4).is_empty());
    }

    #[test]
    fn a_bad_item_after_a_guess_is_refused_as_in_turn() {
        let text = nested_lines(30).replacen("\"p25\"", "\"p25\" x", 1);
        assert_eq!(in_turn(&text), Err(Refused));
        for guess in every_brace(&text) {
            assert_eq!(from_guesses(&text, &[guess]), Err(Refused), "guess {guess}");
        }
    }

    #[test]
    fn a_large_list_scans_to_the_same_documents_on_several_threads() {
        let text = list(60_000);
        assert!(text.len() >= AT_LEAST);
        let open = text.find('[').unwrap();
        let parallel = documents_at(&text, open, 1, 3).unwrap();
        assert_eq!(parallel, in_turn(&text).unwrap());
        assert_eq!(parallel.0.len(), 60_000);
    }
}
