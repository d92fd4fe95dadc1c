//! YAML read through serde with the typing gates has always given untyped values: YAML 1.2's
//! core schema, as serde_yaml did before serde-saphyr replaced it. Only `true`/`false` (in
//! three casings) are booleans, so `yes`, `no`, `on` and `off` stay strings; a plain decimal
//! with a leading zero (`0755`) or with underscores (`1_000`) stays a string when the target
//! does not say otherwise (`0o755`, `0x1F`, `0b1` are numbers). serde-saphyr's defaults read
//! YAML 1.1's booleans and `1_000` as a number, which would turn a `yes` in a manifest into
//! `true`. Typed targets (a `u32`, a `String` field) read the text as their type asks either
//! way.

use serde::de::DeserializeOwned;

/// serde-saphyr's options for the reading above; errors without a source snippet (one line).
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    #[test]
    fn scalars_are_typed_as_yaml_1_2s_core_schema_as_serde_yaml_typed_them() {
        let v: Value = super::from_str(
            "t: true\nT: TRUE\nyes: yes\non: on\nn: n\nzero: 0755\nunder: 1_000\n\
             octal: 0o17\nhex: 0x1F\nint: -3\nfloat: 1.5\nnothing: ~\nquoted: 'true'\n",
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"t": true, "T": true, "yes": "yes", "on": "on", "n": "n", "zero": "0755",
                   "under": "1_000", "octal": 15, "hex": 31, "int": -3, "float": 1.5,
                   "nothing": null, "quoted": "true"})
        );
        // A bool target refuses YAML 1.1's spellings, as serde_yaml did.
        assert!(super::from_str::<bool>("yes").is_err());
        assert!(super::from_str::<bool>("True").unwrap());
        // A typed target reads the text as its type asks.
        assert_eq!(super::from_str::<String>("0755").unwrap(), "0755");
        assert_eq!(super::from_str::<u32>("17").unwrap(), 17);
    }

    #[test]
    fn a_duplicate_key_an_unknown_tag_and_an_infinity_are_errors_and_merge_keys_merge() {
        let err = super::from_str::<Value>("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert!(err.to_string().contains("duplicate mapping key"), "{err}");
        assert!(err.to_string().contains("line 3"), "{err}");
        let err = super::from_str::<Value>("a: !secret x\n").unwrap_err();
        assert!(err.to_string().contains("!secret"), "{err}");
        assert!(super::from_str::<Value>("a: .inf\n").is_err());
        assert!(super::from_str::<Value>("~: x\n").is_err());
        let v: Value = super::from_str("base: &b {x: 1, y: 1}\nm: {<<: *b, y: 2}\n").unwrap();
        assert_eq!(v["m"], json!({"x": 1, "y": 2}));
        let docs: Vec<Value> = super::documents("a: 1\n---\n---\n~\n---\nb: 2\n").unwrap();
        assert_eq!(docs, [json!({"a": 1}), json!({"b": 2})]);
    }
}
