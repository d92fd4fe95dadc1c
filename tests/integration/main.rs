//! CLI integration tests: the real `gates` binary over the shipped configuration and the
//! snapshot fixtures, asserting exit codes, trial names, evidence and JUnit validity.

mod chaos;
mod check;
mod config_errors;
mod control_plane;
mod credentials;
mod fixtures_agree;
mod fleet;
mod fuzz_corpus;
mod guard;
mod helm_chart;
mod junit;
mod lab;
mod predict;
mod prometheus;
mod real_kube;
mod real_kube_host_loss;
mod real_kube_in_cluster;
mod real_kube_node_loss;
mod real_kube_policy_report;
mod real_kube_protobuf;
mod real_kube_watch;
mod repo;
mod reports;
mod strictness;
mod support;
mod watch;
