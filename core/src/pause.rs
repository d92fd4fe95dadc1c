//! Where a long evaluation may be held for a while. At 5,000 nodes the host-loss prediction
//! takes most of a second; `gates watch` evaluates a changed pod's other trials meanwhile,
//! and on two cores the two slow each other (the prediction's threads take the cores and the
//! caches). So the watch holds the prediction at its next pause point until the change is
//! evaluated and published, then lets it go on where it stood.
//!
//! The core only says where it may be held: between hosts, between pods placed, between the
//! pods read into the model. What it waits for is the caller's; a one-shot run passes
//! [`NEVER`]. A pause changes when an answer comes, never the answer.

use std::fmt;

/// What a long evaluation calls at each point where it may be held.
pub trait Pause: Sync + fmt::Debug {
    /// Returns when the evaluation may go on: at once unless the caller holds it, so it is
    /// called per pod, and must cost no more than reading a flag then.
    fn point(&self);
}

/// Never holds: every run that is not a watch.
#[derive(Debug, Clone, Copy, Default)]
pub struct Never;

impl Pause for Never {
    fn point(&self) {}
}

/// [`Never`], to pass by reference.
pub static NEVER: Never = Never;
