//! Drift of the addresses gate 1 reads: the API VIP the control planes' Talos patches declare
//! (`machine.network.interfaces[].vip.ip`) against the address the environment's API endpoint
//! stands for, and the talosconfig endpoints Terraform declares
//! (`talos_client_configuration`) against those the talosconfig context in use lists. A
//! disagreement fails naming both sides; a side not collected is an error, one not declared
//! (or not configured for the run) a skip.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use crate::verdict::Finding;

use super::{RepoContext, at, both, nodes_and_patches};

/// The host of an endpoint as talosconfigs and Terraform write it: `10.0.60.11`,
/// `10.0.60.11:50000`, `https://cp.example:6443`, `[fd00::1]:50000`.
pub fn endpoint_host(text: &str) -> &str {
    let rest = text.trim();
    let rest = rest.split_once("://").map_or(rest, |(_, r)| r);
    let rest = rest.split('/').next().unwrap_or(rest);
    if let Some(v6) = rest.strip_prefix('[') {
        return v6.split(']').next().unwrap_or(v6);
    }
    match rest.rsplit_once(':') {
        // One colon: a port. More: a bare IPv6 address.
        Some((host, _)) if !host.contains(':') => host,
        _ => rest,
    }
}

fn list<T: std::fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    let items: Vec<String> = items.into_iter().map(|i| i.to_string()).collect();
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}

/// The live API VIP is the declared one.
pub fn vip(ctx: &RepoContext<'_>) -> Finding {
    let (nodes, patches) = match nodes_and_patches(ctx.env, || {
        format!(
            "the repository has no Talos patches for {}, so no VIP is declared",
            ctx.env.name
        )
    }) {
        Ok(found) => found,
        Err(finding) => return finding,
    };
    // Declared: every VIP a control plane's patches configure, with the lines that set it.
    let mut declared: BTreeMap<IpAddr, Vec<String>> = BTreeMap::new();
    for node in nodes.iter().filter(|n| n.control_plane == Some(true)) {
        for v in patches.vips(node.name(), true) {
            let Some(ip) = v.as_str().and_then(|s| s.trim().parse::<IpAddr>().ok()) else {
                return Finding::error(format!(
                    "{}: vip.ip: {} is not an IP address",
                    v.site,
                    v.show()
                ));
            };
            declared.entry(ip).or_default().push(format!(
                "{} (on {})",
                at(&v.site, "vip.ip", v.show()),
                node.name()
            ));
        }
    }
    if declared.is_empty() {
        return Finding::skip(format!(
            "no control plane of {} has a VIP in its Talos patches (the repository trial says so)",
            ctx.env.name
        ));
    }
    let api = match ctx.live.api.get("the API endpoint") {
        Ok(api) => api,
        Err(finding) => return finding,
    };
    let Some(endpoint) = &api.vip_endpoint else {
        return Finding::skip(
            "the environment names no API endpoint (api.endpoint), so the live VIP is not known",
        );
    };
    if api.vip_addresses.is_empty() {
        return Finding::error(format!(
            "the API endpoint {endpoint} stands for no address (it did not resolve); fix the name or api.endpoint"
        ));
    }
    let live: BTreeSet<IpAddr> = api.vip_addresses.iter().copied().collect();
    let wanted: BTreeSet<IpAddr> = declared.keys().copied().collect();
    let mut evidence = both(
        format!("API endpoint {endpoint}: {}", list(&live)),
        list(declared.values().flatten()),
    );
    evidence.extend(holders(ctx, &wanted));
    if live == wanted {
        Finding::pass(format!(
            "the API VIP {}: live and declared agree",
            list(&live)
        ))
        .with_evidence(evidence)
    } else {
        Finding::fail(format!(
            "the API endpoint stands for {}, the repository declares the VIP {}",
            list(&live),
            list(&wanted)
        ))
        .with_evidence(evidence)
    }
}

/// Which node holds each declared VIP, as Talos reports the nodes' addresses (evidence only:
/// that one node holds it is the live VIP trial's question).
fn holders(ctx: &RepoContext<'_>, vips: &BTreeSet<IpAddr>) -> Vec<String> {
    let Some(talos) = ctx.live.talos.present() else {
        return Vec::new();
    };
    let unread = talos
        .endpoints
        .iter()
        .filter(|e| e.addresses.is_err())
        .count();
    vips.iter()
        .map(|ip| {
            let on: Vec<String> = talos
                .endpoints
                .iter()
                .filter(|e| e.addresses.as_ref().is_ok_and(|a| a.contains(ip)))
                .map(|e| talos.node_of(e).unwrap_or_else(|| e.endpoint.clone()))
                .collect();
            let mut line = format!("live: {ip} is held by {} (Talos node addresses)", list(&on));
            if unread > 0 {
                line.push_str(&format!(
                    "; the addresses of {unread} of {} endpoints could not be read",
                    talos.endpoints.len()
                ));
            }
            line
        })
        .collect()
}

/// The talosconfig context in use lists the endpoints Terraform declares.
pub fn talos_endpoints(ctx: &RepoContext<'_>) -> Finding {
    let tf = match &ctx.env.terraform {
        Some(Ok(tf)) => tf,
        Some(Err(err)) => return super::unreadable("the Terraform cannot be read", err),
        None => {
            return Finding::skip(
                "the repository has no Terraform, so no talosconfig endpoints are declared",
            );
        }
    };
    let endpoints = match &tf.talos_endpoints {
        None => {
            return Finding::skip(
                "no talos_client_configuration endpoints are declared in the Terraform",
            );
        }
        Some(Err(err)) => {
            return super::unreadable("the talosconfig endpoints cannot be read", err);
        }
        Some(Ok(endpoints)) => endpoints,
    };
    let Some(items) = endpoints.as_seq() else {
        return Finding::error(format!(
            "{}: talos_client_configuration.endpoints: {} is not a list",
            endpoints.site,
            endpoints.show()
        ));
    };
    let mut declared = BTreeSet::new();
    for item in items {
        let Some(text) = item.as_str() else {
            return Finding::error(format!(
                "{}: talos_client_configuration.endpoints[]: {} is not an address",
                item.site,
                item.show()
            ));
        };
        declared.insert(endpoint_host(text).to_string());
    }
    let talos = match ctx.live.talos.get("Talos") {
        Ok(t) => t,
        Err(finding) => return finding,
    };
    let live: BTreeSet<String> = talos
        .context_endpoints
        .iter()
        .map(|e| endpoint_host(e).to_string())
        .collect();
    let evidence = both(
        format!(
            "talosconfig {} context {}: {}",
            talos.talosconfig,
            talos.context,
            list(&live)
        ),
        at(
            &endpoints.site,
            "talos_client_configuration.endpoints",
            endpoints.show(),
        ),
    );
    if live == declared {
        Finding::pass("the talosconfig endpoints: live and declared agree").with_evidence(evidence)
    } else {
        let missing: Vec<&String> = declared.difference(&live).collect();
        let extra: Vec<&String> = live.difference(&declared).collect();
        Finding::fail(format!(
            "the talosconfig context lists {} the repository does not declare and lacks {} it does",
            list(extra),
            list(missing)
        ))
        .with_evidence(evidence)
    }
}
