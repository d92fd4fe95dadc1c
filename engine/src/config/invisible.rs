//! Characters that change how text reads without being seen: bidirectional controls
//! (U+202E turns `zone` around on screen), zero-width spaces and joiners, the byte order
//! mark, other Unicode format characters and control characters. A label or name holding
//! one looks right and matches nothing (or something else), so every key and string value
//! of a configuration file that holds one is an error at its node.

use std::path::Path;

use gates_core::config::ConfigError;

use super::spans::{Node, NodeValue};

/// Every key and string value of `tree` that holds an invisible character.
pub fn check(file: &Path, tree: &Node) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    walk(file, tree, "", &mut errors);
    errors
}

fn walk(file: &Path, node: &Node, path: &str, errors: &mut Vec<ConfigError>) {
    match &node.value {
        NodeValue::Str(text) => {
            // Prose may run over lines and hold tabs; nothing else does.
            let prose = path == "description";
            if let Some(c) = text
                .chars()
                .find(|c| !(prose && matches!(c, '\n' | '\t')) && invisible(*c))
            {
                let shown = if path.is_empty() { "the file" } else { path };
                errors.push(
                    ConfigError::new(
                        file,
                        format!("the value of {shown} contains {}", describe(c)),
                    )
                    .at(Some(node.position()))
                    .key(path)
                    .hint(HINT),
                );
            }
        }
        NodeValue::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(file, item, &format!("{path}[{i}]"), errors);
            }
        }
        NodeValue::Map(entries) => {
            for (key, value) in entries {
                let name = key.as_text().unwrap_or_default();
                if let Some(c) = name.chars().find(|c| invisible(*c)) {
                    let place = if path.is_empty() {
                        String::new()
                    } else {
                        format!(" in {path}")
                    };
                    errors.push(
                        ConfigError::new(
                            file,
                            format!("the key {name:?}{place} contains {}", describe(c)),
                        )
                        .at(Some(key.position()))
                        .key(format!("{name:?}"))
                        .hint(HINT),
                    );
                }
                let child = if path.is_empty() {
                    name
                } else {
                    format!("{path}.{name}")
                };
                walk(file, value, &child, errors);
            }
        }
        _ => {}
    }
}

const HINT: &str =
    "retype the text: the character cannot be seen, and names holding it match nothing you meant";

/// A control character, a format character (Unicode category Cf) or a line or paragraph
/// separator.
pub fn invisible(c: char) -> bool {
    c.is_control() || format_character(c) || matches!(c, '\u{2028}' | '\u{2029}')
}

/// Unicode's format characters (general category Cf, Unicode 16).
fn format_character(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{0600}'..='\u{0605}'
            | '\u{061C}'
            | '\u{06DD}'
            | '\u{070F}'
            | '\u{0890}'..='\u{0891}'
            | '\u{08E2}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{110BD}'
            | '\u{110CD}'
            | '\u{13430}'..='\u{1343F}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0001}'
            | '\u{E0020}'..='\u{E007F}'
    )
}

/// `U+202E RIGHT-TO-LEFT OVERRIDE`; the code point and what it is for the others.
pub fn describe(c: char) -> String {
    let name = match c {
        '\u{00AD}' => "SOFT HYPHEN",
        '\u{061C}' => "ARABIC LETTER MARK",
        '\u{180E}' => "MONGOLIAN VOWEL SEPARATOR",
        '\u{200B}' => "ZERO WIDTH SPACE",
        '\u{200C}' => "ZERO WIDTH NON-JOINER",
        '\u{200D}' => "ZERO WIDTH JOINER",
        '\u{200E}' => "LEFT-TO-RIGHT MARK",
        '\u{200F}' => "RIGHT-TO-LEFT MARK",
        '\u{202A}' => "LEFT-TO-RIGHT EMBEDDING",
        '\u{202B}' => "RIGHT-TO-LEFT EMBEDDING",
        '\u{202C}' => "POP DIRECTIONAL FORMATTING",
        '\u{202D}' => "LEFT-TO-RIGHT OVERRIDE",
        '\u{202E}' => "RIGHT-TO-LEFT OVERRIDE",
        '\u{2028}' => "LINE SEPARATOR",
        '\u{2029}' => "PARAGRAPH SEPARATOR",
        '\u{2060}' => "WORD JOINER",
        '\u{2066}' => "LEFT-TO-RIGHT ISOLATE",
        '\u{2067}' => "RIGHT-TO-LEFT ISOLATE",
        '\u{2068}' => "FIRST STRONG ISOLATE",
        '\u{2069}' => "POP DIRECTIONAL ISOLATE",
        '\u{FEFF}' => "ZERO WIDTH NO-BREAK SPACE",
        c if c.is_control() => return format!("U+{:04X} (a control character)", u32::from(c)),
        c => return format!("U+{:04X} (a format character)", u32::from(c)),
    };
    format!("U+{:04X} {name}", u32::from(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bidirectional_controls_and_zero_widths_are_invisible_letters_are_not() {
        for c in [
            '\u{202E}',
            '\u{200B}',
            '\u{200E}',
            '\u{200F}',
            '\u{2066}',
            '\u{2069}',
            '\u{FEFF}',
            '\u{7}',
            '\u{7F}',
            '\u{85}',
            '\u{E0041}',
        ] {
            assert!(invisible(c), "{c:?}");
        }
        for c in ['a', 'é', 'ß', '中', ' ', '-', '.', '/', '\u{1F600}'] {
            assert!(!invisible(c), "{c:?}");
        }
    }

    #[test]
    fn a_code_point_is_named_in_unicode_words() {
        assert_eq!(describe('\u{202E}'), "U+202E RIGHT-TO-LEFT OVERRIDE");
        assert_eq!(describe('\u{1}'), "U+0001 (a control character)");
        assert_eq!(describe('\u{E0001}'), "U+E0001 (a format character)");
    }
}
