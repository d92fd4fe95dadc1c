//! Builder functions for the objects checks read, so tests state only what matters.
