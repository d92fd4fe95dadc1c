//! Rendering the world into Kubernetes objects (k8s-openapi types for built-in kinds, JSON
//! for the Cilium, Longhorn and metrics shapes) and writing what changed into the store.
//! One file per concern: nodes, pods, workloads (with their PodDisruptionBudgets), services
//! (with their EndpointSlices and Cilium's L2 announcement), Longhorn; `common` holds what
//! they all use.

mod common;
mod longhorn;
mod nodes;
mod pods;
mod services;
mod workloads;

use super::*;
use crate::ids;
use crate::resources::Res;
use common::to_value;
use k8s_openapi::api::coordination::v1 as coord;
use k8s_openapi::api::core::v1 as core;
use serde_json::json;

impl World {
    /// Write everything the dirty flags name into the environment's store.
    pub(crate) fn flush(&mut self, env: usize) {
        let dirty = std::mem::take(&mut self.envs[env].dirty);
        let mut puts: Vec<(Res, Value)> = Vec::new();
        let mut deletes: Vec<(Res, Key)> = Vec::new();
        if dirty.all {
            self.render_static(env, &mut puts);
        }
        let pods_changed = dirty.all || dirty.any_pods();
        if dirty.all {
            for p in self.envs[env].pods.values() {
                puts.push((Res::Pods, self.render_pod(env, p)));
            }
        } else {
            for k in &dirty.pods {
                if let Some(p) = self.envs[env].pods.get(k) {
                    puts.push((Res::Pods, self.render_pod(env, p)));
                }
            }
        }
        for k in &dirty.removed_pods {
            deletes.push((Res::Pods, k.clone()));
        }
        if dirty.all || dirty.nodes || pods_changed {
            self.render_nodes(env, &mut puts, &mut deletes);
        }
        if pods_changed || dirty.nodes || dirty.longhorn {
            self.render_pdbs(env, &mut puts, &mut deletes);
        }
        if pods_changed || dirty.nodes {
            self.render_workloads(env, &mut puts);
            self.render_endpoints(env, &mut puts);
            if dirty.all {
                self.render_pod_metrics(env, &mut puts, &mut deletes, None);
            } else {
                let keys: BTreeSet<Key> = dirty.pods.union(&dirty.removed_pods).cloned().collect();
                self.render_pod_metrics(env, &mut puts, &mut deletes, Some(&keys));
            }
        }
        if dirty.all || dirty.leases {
            self.render_lease(env, &mut puts);
        }
        if dirty.all {
            for &n in &self.envs[env].nodes {
                puts.push((Res::Leases, self.render_node_lease(env, n)));
            }
        } else {
            for &n in &dirty.node_leases {
                puts.push((Res::Leases, self.render_node_lease(env, n)));
            }
        }
        if dirty.all || dirty.longhorn || dirty.nodes {
            self.render_longhorn(env, &mut puts);
        }
        for ev in &dirty.events {
            puts.push((Res::Events, self.render_event(env, ev)));
        }
        let store = &mut self.envs[env].store;
        for (res, v) in puts {
            store.put(res, v);
        }
        for (res, (ns, name)) in deletes {
            store.delete(res, &ns, &name);
        }
    }

    /// An Event object as the core/v1 API shows it; its name is the object's name and a
    /// hex suffix, as client-go's recorder makes it.
    fn render_event(&self, env: usize, ev: &KubeEvent) -> Value {
        let e = &self.envs[env];
        let suffix = ids::suffix(
            &[
                &e.spec.name,
                &ev.name,
                ev.reason,
                &ev.at.as_nanos().to_string(),
            ],
            16,
        );
        let name = format!("{}.{suffix}", ev.name);
        let uid = match ev.kind {
            "Pod" => e
                .pods
                .get(&(ev.namespace.clone(), ev.name.clone()))
                .map(|p| p.uid.clone())
                .unwrap_or_default(),
            _ => ids::uuid(&[&e.spec.name, "node", "", &ev.name]),
        };
        let at = self.rfc3339(ev.at);
        json!({
            "metadata": {
                "name": name,
                "namespace": ev.namespace,
                "uid": ids::uuid(&[&e.spec.name, "event", &name]),
                "creationTimestamp": at,
            },
            "involvedObject": {
                "kind": ev.kind,
                "namespace": if ev.kind == "Pod" { ev.namespace.as_str() } else { "" },
                "name": ev.name,
                "uid": uid,
                "apiVersion": "v1",
            },
            "reason": ev.reason,
            "message": ev.message,
            "source": {"component": ev.component},
            "firstTimestamp": at,
            "lastTimestamp": at,
            "count": 1,
            "type": if ev.warning { "Warning" } else { "Normal" },
            "eventTime": null,
            "reportingComponent": ev.component,
            "reportingInstance": "",
        })
    }

    /// The objects that exist from the start and change only with the scenario: namespaces,
    /// Services and Cilium's announcement objects, Longhorn's settings.
    fn render_static(&self, env: usize, puts: &mut Vec<(Res, Value)>) {
        self.render_namespaces(env, puts);
        self.render_services(env, puts);
        self.render_cilium(env, puts);
        self.render_longhorn_settings(env, puts);
    }

    /// The cluster's own namespaces and every one the scenario's workloads, Services,
    /// ingress and Longhorn live in.
    fn render_namespaces(&self, env: usize, puts: &mut Vec<(Res, Value)>) {
        let e = &self.envs[env];
        let mut namespaces: BTreeSet<String> =
            ["default", "kube-system", "kube-public", "kube-node-lease"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        namespaces.extend(e.workloads.iter().map(|w| w.spec.namespace.clone()));
        namespaces.extend(e.spec.services.iter().map(|s| s.namespace.clone()));
        if let Some(i) = &e.spec.ingress {
            namespaces.insert(i.namespace.clone());
        }
        if e.spec.longhorn.is_some() {
            namespaces.insert("longhorn-system".into());
        }
        for ns in namespaces {
            let labels = BTreeMap::from([("kubernetes.io/metadata.name".to_string(), ns.clone())]);
            let obj = core::Namespace {
                metadata: self.meta(env, "namespace", None, &ns, labels, Duration::ZERO),
                spec: Some(core::NamespaceSpec {
                    finalizers: Some(vec!["kubernetes".into()]),
                }),
                status: Some(core::NamespaceStatus {
                    phase: Some("Active".into()),
                    conditions: None,
                }),
            };
            puts.push((Res::Namespaces, to_value(&obj)));
        }
    }

    /// Cilium's L2 announcement Lease for the ingress Service, once an agent has campaigned.
    fn render_lease(&self, env: usize, puts: &mut Vec<(Res, Value)>) {
        let e = &self.envs[env];
        let (Some(ing), Some(l)) = (&e.spec.ingress, &e.lease) else {
            return;
        };
        if !l.ever_held {
            // No agent has campaigned: Cilium has not created the Lease.
            return;
        }
        let name = format!("cilium-l2announce-{}-{}", ing.namespace, ing.service);
        let lease = coord::Lease {
            metadata: self.meta(
                env,
                "lease",
                Some("kube-system"),
                &name,
                BTreeMap::new(),
                Duration::ZERO,
            ),
            spec: Some(coord::LeaseSpec {
                holder_identity: Some(
                    l.holder
                        .map(|h| self.nodes[h].name.clone())
                        .unwrap_or_default(),
                ),
                lease_duration_seconds: Some(if l.holder.is_some() {
                    self.timings.lease_duration.as_secs() as i32
                } else {
                    1
                }),
                acquire_time: Some(self.micro(l.acquired)),
                renew_time: Some(self.micro(l.renewed)),
                lease_transitions: Some(l.transitions),
                ..Default::default()
            }),
        };
        puts.push((Res::Leases, to_value(&lease)));
    }
}
