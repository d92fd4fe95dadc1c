//! YAML read through serde with the typing gates has always given untyped values (the same
//! rules as `gates_core::yaml` and `gates_infra::yaml`; the lab depends on neither): YAML
//! 1.2's core schema as serde_yaml read it. Only `true`/`false` are booleans (`yes`, `on` stay
//! strings), and a plain decimal with a leading zero (`0755`) or underscores (`1_000`) stays a
//! string when the target does not say otherwise. Errors are one line, without a source
//! snippet.

use serde::de::DeserializeOwned;

/// serde-saphyr's options for the reading above.
pub fn options() -> serde_saphyr::Options {
    // `Options` is non-exhaustive: start from the defaults.
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    options.leading_zero_numbers_as_strings = true;
    options.underscored_numbers_as_strings = true;
    // A tag serde-saphyr does not know (`!secret x`) is refused, not dropped: serde_yaml
    // refused it too, and dropping it would read the value as something it was not.
    options.reject_unsupported_tags = true;
    options.ignore_binary_tag_for_string = true;
    options.with_snippet = false;
    options
}

/// One YAML document.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, serde_saphyr::Error> {
    serde_saphyr::from_str_with_options(text, options())
}

/// Every document of a YAML stream; empty and null documents are left out.
pub fn documents<T: DeserializeOwned>(text: &str) -> Result<Vec<T>, serde_saphyr::Error> {
    serde_saphyr::from_multiple_with_options(text, options())
}
