//! Repository trials and drift trials. They are pure functions of the declared state (and,
//! for drift, the collected state), so they live in core as [`gates_core::trials`]; this
//! module re-exports them under their old path, and keeps their tests, which read throwaway
//! checkouts with `repo::testing` and [`super::declared::load`].

pub use gates_core::trials::*;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_argocd;
#[cfg(test)]
mod tests_capacity;
#[cfg(test)]
mod tests_coverage;
#[cfg(test)]
mod tests_drift_addresses;
#[cfg(test)]
mod tests_home_ops;
#[cfg(test)]
mod tests_l2;
#[cfg(test)]
mod tests_talos_layouts;
