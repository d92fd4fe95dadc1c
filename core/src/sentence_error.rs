//! Errors that are one sentence. Many boundaries refuse with a sentence written where the
//! problem is found (a malformed label query, a protobuf field that does not decode, a chaos
//! plan's refusal) and said as it is; each still gets a type of its own, so a function's
//! signature names its boundary, and this macro writes the type once.

/// Declares `struct Name(pub String)`, an error displayed as its sentence, made from a
/// `String` or a `&str`. Attributes written before `struct` (docs, serde) are kept.
///
/// ```
/// gates_core::sentence_error! {
///     /// Why a widget is refused.
///     pub struct WidgetRefused;
/// }
/// let err: WidgetRefused = "no widget".into();
/// assert_eq!(err.to_string(), "no widget");
/// ```
#[macro_export]
macro_rules! sentence_error {
    ($(#[$attr:meta])* $vis:vis struct $name:ident;) => {
        $(#[$attr])*
        #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
        #[error("{0}")]
        $vis struct $name(pub String);

        impl From<String> for $name {
            fn from(why: String) -> Self {
                $name(why)
            }
        }

        impl From<&str> for $name {
            fn from(why: &str) -> Self {
                $name(why.to_string())
            }
        }
    };
}
