//! CLI integration tests: the real `gates` binary over the shipped configuration and the
//! snapshot fixtures, asserting exit codes, trial names, evidence and JUnit validity.

mod chaos;
mod check;
mod config_errors;
mod control_plane;
mod junit;
mod lab;
mod real_kube;
mod real_kube_node_loss;
mod support;
