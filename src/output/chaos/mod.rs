//! The reporters of a chaos run (`gates chaos`): its progress on stderr, its plan on stdout,
//! and its results printed and written to the report files.

pub mod plain;
pub mod publish;
pub mod terminal;
