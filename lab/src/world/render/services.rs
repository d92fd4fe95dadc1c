//! Services as the API serves them: the API server's own `kubernetes` Service, the
//! scenario's ClusterIP Services and the ingress LoadBalancer, their EndpointSlices, and the
//! Cilium objects that announce the LoadBalancer's address (L2 policies, the IP pool).

use super::super::*;
use super::common::{pod_ip, to_value};
use crate::ids;
use crate::resources::Res;
use crate::scenario::{IngressSpec, ServiceSpec};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as disc;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference};
use serde_json::json;

/// Namespace, name, selector and ports (name, port, protocol) of a Service.
type SvcEndpoints = (
    String,
    String,
    BTreeMap<String, String>,
    Vec<(String, i32, String)>,
);

impl World {
    /// Services in the order the API lists them by creation: the API's own, the
    /// scenario's, and the ingress LoadBalancer.
    pub(super) fn render_services(&self, env: usize, puts: &mut Vec<(Res, Value)>) {
        let e = &self.envs[env];
        puts.push((Res::Services, to_value(&self.api_service(env))));
        for (i, s) in e.spec.services.iter().enumerate() {
            puts.push((Res::Services, to_value(&self.scenario_service(env, i, s))));
        }
        if let Some(ing) = &e.spec.ingress {
            puts.push((Res::Services, to_value(&self.ingress_service(env, ing))));
        }
    }

    /// `default/kubernetes`, the API server's ClusterIP Service on 10.96.0.1.
    fn api_service(&self, env: usize) -> core::Service {
        core::Service {
            metadata: self.meta(
                env,
                "service",
                Some("default"),
                "kubernetes",
                BTreeMap::from([
                    ("component".into(), "apiserver".into()),
                    ("provider".into(), "kubernetes".into()),
                ]),
                Duration::ZERO,
            ),
            spec: Some(core::ServiceSpec {
                type_: Some("ClusterIP".into()),
                cluster_ip: Some("10.96.0.1".into()),
                cluster_ips: Some(vec!["10.96.0.1".into()]),
                ports: Some(vec![core::ServicePort {
                    name: Some("https".into()),
                    port: 443,
                    protocol: Some("TCP".into()),
                    target_port: Some(IntOrString::Int(6443)),
                    ..Default::default()
                }]),
                session_affinity: Some("None".into()),
                ..Default::default()
            }),
            status: Some(core::ServiceStatus::default()),
        }
    }

    /// A Service of the scenario: ClusterIP (its address fixed by its position), ports
    /// written `port/PROTOCOL`.
    fn scenario_service(&self, env: usize, i: usize, s: &ServiceSpec) -> core::Service {
        let ports = s
            .ports
            .iter()
            .map(|p| {
                let (num, proto) = p.split_once('/').unwrap_or((p.as_str(), "TCP"));
                let port: i32 = num.parse().unwrap_or(80);
                core::ServicePort {
                    name: Some(format!("{}-{}", proto.to_lowercase(), port)),
                    port,
                    protocol: Some(proto.to_string()),
                    target_port: Some(IntOrString::Int(port)),
                    ..Default::default()
                }
            })
            .collect();
        let ip = format!("10.96.{}.{}", 1 + i / 250, 10 + i % 250);
        core::Service {
            metadata: self.meta(
                env,
                "service",
                Some(&s.namespace),
                &s.name,
                s.labels.clone(),
                Duration::ZERO,
            ),
            spec: Some(core::ServiceSpec {
                type_: Some("ClusterIP".into()),
                cluster_ip: Some(ip.clone()),
                cluster_ips: Some(vec![ip]),
                selector: Some(s.selector.clone()),
                ports: Some(ports),
                session_affinity: Some("None".into()),
                ..Default::default()
            }),
            status: Some(core::ServiceStatus::default()),
        }
    }

    /// The ingress controller's LoadBalancer Service, its address assigned by Cilium's LB IPAM.
    fn ingress_service(&self, env: usize, ing: &IngressSpec) -> core::Service {
        core::Service {
            metadata: self.meta(
                env,
                "service",
                Some(&ing.namespace),
                &ing.service,
                ing.labels.clone(),
                Duration::ZERO,
            ),
            spec: Some(core::ServiceSpec {
                type_: Some("LoadBalancer".into()),
                cluster_ip: Some("10.96.200.10".into()),
                cluster_ips: Some(vec!["10.96.200.10".into()]),
                selector: Some(ing.selector.clone()),
                external_traffic_policy: Some(ing.external_traffic_policy.clone()),
                allocate_load_balancer_node_ports: Some(true),
                ports: Some(vec![
                    core::ServicePort {
                        name: Some("web".into()),
                        port: 80,
                        protocol: Some("TCP".into()),
                        target_port: Some(IntOrString::String("web".into())),
                        node_port: Some(30080),
                        ..Default::default()
                    },
                    core::ServicePort {
                        name: Some("websecure".into()),
                        port: 443,
                        protocol: Some("TCP".into()),
                        target_port: Some(IntOrString::String("websecure".into())),
                        node_port: Some(30443),
                        ..Default::default()
                    },
                ]),
                session_affinity: Some("None".into()),
                ..Default::default()
            }),
            status: Some(core::ServiceStatus {
                load_balancer: Some(core::LoadBalancerStatus {
                    ingress: Some(vec![core::LoadBalancerIngress {
                        ip: Some(self.plan.ingress_ip(env).to_string()),
                        ip_mode: Some("VIP".into()),
                        ..Default::default()
                    }]),
                }),
                conditions: Some(vec![Condition {
                    type_: "io.cilium/lb-ipam-request-satisfied".into(),
                    status: "True".into(),
                    reason: "satisfied".into(),
                    message: String::new(),
                    last_transition_time: self.time(Duration::ZERO),
                    observed_generation: Some(1),
                }]),
            }),
        }
    }

    /// Cilium's L2 announcement policies and, with an ingress, the LoadBalancer IP pool that
    /// holds its address.
    pub(super) fn render_cilium(&self, env: usize, puts: &mut Vec<(Res, Value)>) {
        let e = &self.envs[env];
        for p in &e.policies {
            let mut spec = serde_json::Map::new();
            if let Some(ns) = &p.node_selector_json {
                spec.insert("nodeSelector".into(), ns.clone());
            }
            if let Some(ss) = &p.service_selector_json {
                spec.insert("serviceSelector".into(), ss.clone());
            }
            spec.insert("loadBalancerIPs".into(), json!(p.load_balancer_ips));
            spec.insert("externalIPs".into(), json!(false));
            puts.push((
                Res::CiliumL2Policies,
                json!({
                    "apiVersion": "cilium.io/v2alpha1",
                    "kind": "CiliumL2AnnouncementPolicy",
                    "metadata": {"name": p.name, "uid": p.uid, "generation": 1, "creationTimestamp": self.rfc3339(Duration::ZERO)},
                    "spec": spec,
                    "status": {"conditions": []},
                }),
            ));
        }
        if let Some(ing) = &e.spec.ingress {
            let ip = self.plan.ingress_ip(env).to_string();
            puts.push((
                Res::CiliumLbIpPools,
                json!({
                    "apiVersion": "cilium.io/v2",
                    "kind": "CiliumLoadBalancerIPPool",
                    "metadata": {"name": "ingress", "uid": ids::uuid(&[&e.spec.name, "ippool"]), "generation": 1, "creationTimestamp": self.rfc3339(Duration::ZERO)},
                    "spec": {"blocks": [{"start": ip, "stop": ip}], "serviceSelector": {"matchLabels": {"io.kubernetes.service.name": ing.service}}, "disabled": false},
                    "status": {"conditions": [
                        {"type": "cilium.io/IPsTotal", "status": "Unknown", "reason": "noreason", "message": "1", "lastTransitionTime": self.rfc3339(Duration::ZERO)},
                        {"type": "cilium.io/IPsAvailable", "status": "Unknown", "reason": "noreason", "message": "0", "lastTransitionTime": self.rfc3339(Duration::ZERO)},
                        {"type": "cilium.io/IPsUsed", "status": "Unknown", "reason": "noreason", "message": "1", "lastTransitionTime": self.rfc3339(Duration::ZERO)}
                    ]},
                }),
            ));
        }
    }

    /// One EndpointSlice per Service (the ingress one included), listing the scheduled pods
    /// its selector matches.
    pub(super) fn render_endpoints(&self, env: usize, puts: &mut Vec<(Res, Value)>) {
        for (ns, name, sel, ports) in self.endpoint_services(env) {
            let slice = self.endpoint_slice(env, &ns, &name, &sel, ports);
            puts.push((Res::EndpointSlices, to_value(&slice)));
        }
    }

    /// What the EndpointSlice controller reads of each Service: the scenario's, then the
    /// ingress one (its pods listen on 8000 and 8443).
    fn endpoint_services(&self, env: usize) -> Vec<SvcEndpoints> {
        let e = &self.envs[env];
        let mut services: Vec<SvcEndpoints> = e
            .spec
            .services
            .iter()
            .map(|s| {
                let ports = s
                    .ports
                    .iter()
                    .map(|p| {
                        let (num, proto) = p.split_once('/').unwrap_or((p.as_str(), "TCP"));
                        let port: i32 = num.parse().unwrap_or(80);
                        (
                            format!("{}-{}", proto.to_lowercase(), port),
                            port,
                            proto.to_string(),
                        )
                    })
                    .collect();
                (
                    s.namespace.clone(),
                    s.name.clone(),
                    s.selector.clone(),
                    ports,
                )
            })
            .collect();
        if let Some(ing) = &e.spec.ingress {
            services.push((
                ing.namespace.clone(),
                ing.service.clone(),
                ing.selector.clone(),
                vec![
                    ("web".into(), 8000, "TCP".into()),
                    ("websecure".into(), 8443, "TCP".into()),
                ],
            ));
        }
        services
    }

    /// The EndpointSlice of one Service, owned by it, named with a stable suffix.
    fn endpoint_slice(
        &self,
        env: usize,
        ns: &str,
        name: &str,
        sel: &BTreeMap<String, String>,
        ports: Vec<(String, i32, String)>,
    ) -> disc::EndpointSlice {
        let e = &self.envs[env];
        let s = Selector::from_map(sel);
        let endpoints: Vec<disc::Endpoint> = e
            .pods
            .values()
            .filter(|p| {
                p.namespace == ns
                    && p.node.is_some()
                    && s.matches(&self.pod_labels(&e.workloads[p.workload]))
            })
            .map(|p| self.pod_endpoint(p))
            .collect();
        let slice_name = format!(
            "{name}-{}",
            ids::suffix(&[&e.spec.name, ns, name, "slice"], 5)
        );
        let labels = BTreeMap::from([
            ("kubernetes.io/service-name".to_string(), name.to_string()),
            (
                "endpointslice.kubernetes.io/managed-by".to_string(),
                "endpointslice-controller.k8s.io".to_string(),
            ),
        ]);
        let mut meta = self.meta(
            env,
            "endpointslice",
            Some(ns),
            &slice_name,
            labels,
            Duration::ZERO,
        );
        meta.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Service".into(),
            name: name.to_string(),
            uid: ids::uuid(&[&e.spec.name, "service", ns, name]),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        meta.generate_name = Some(format!("{name}-"));
        disc::EndpointSlice {
            metadata: meta,
            address_type: "IPv4".into(),
            endpoints,
            ports: Some(
                ports
                    .into_iter()
                    .map(|(n, p, proto)| disc::EndpointPort {
                        name: Some(n),
                        port: Some(p),
                        protocol: Some(proto),
                        app_protocol: None,
                    })
                    .collect(),
            ),
        }
    }

    /// A scheduled pod as an endpoint: its address, readiness, node and zone (its host).
    fn pod_endpoint(&self, p: &Pod) -> disc::Endpoint {
        let node = p.node.map(|n| &self.nodes[n]);
        disc::Endpoint {
            addresses: pod_ip(p).into_iter().collect(),
            conditions: Some(disc::EndpointConditions {
                ready: Some(p.api_ready && p.deleting.is_none()),
                serving: Some(p.api_ready),
                terminating: Some(p.deleting.is_some()),
            }),
            node_name: node.map(|n| n.name.clone()),
            zone: node.and_then(|n| n.labels.get(super::super::node_facts::HOST_LABEL).cloned()),
            target_ref: Some(core::ObjectReference {
                kind: Some("Pod".into()),
                name: Some(p.name.clone()),
                namespace: Some(p.namespace.clone()),
                uid: Some(p.uid.clone()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}
