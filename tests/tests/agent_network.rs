//! Agent acceptance 10: two agents on one host. Each node gets its own /24 of the cluster CIDR
//! and its own bridge; pods on both run side by side with addresses from their node's range; the
//! host reaches both; and a pod on node-a reaches a pod on node-b by IP, and back.

use berth_tests::fixtures::nginx_marker;
use berth_tests::pod_reading::{ipv4_in_cidr, pod_ip};
use berth_tests::pod_specs::nginx_pod;
use berth_tests::sweep::link_exists;
use berth_tests::{Cluster, http_get, secs};

#[test]
fn pods_on_two_nodes_reach_each_other_by_ip() {
    let c = Cluster::start(2);
    let (node_a, node_b) = (c.node_name(0).to_string(), c.node_name(1).to_string());
    c.apply(&nginx_pod("web-a", &node_a, "nginx:1.14.2"));
    c.apply(&nginx_pod("web-b", &node_b, "nginx:1.16.1"));
    let a = c.wait_for_pod_ready("default", "web-a", secs(90));
    let b = c.wait_for_pod_ready("default", "web-b", secs(90));
    let ip_a = pod_ip(&a).unwrap().to_string();
    let ip_b = pod_ip(&b).unwrap().to_string();

    let cidr = |node: &str| {
        c.get(&format!("/api/v1/nodes/{node}")).unwrap()["spec"]["podCIDR"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (cidr_a, cidr_b) = (cidr(&node_a), cidr(&node_b));
    assert_ne!(cidr_a, cidr_b);
    assert!(ipv4_in_cidr(&ip_a, &cidr_a), "{ip_a} not in {cidr_a}");
    assert!(ipv4_in_cidr(&ip_b, &cidr_b), "{ip_b} not in {cidr_b}");
    for i in 0..2 {
        assert!(
            link_exists(c.agent(i).bridge()),
            "bridge {}",
            c.agent(i).bridge()
        );
    }

    for (ip, version) in [(&ip_a, "1.14.2"), (&ip_b, "1.16.1")] {
        let page = c.wait_for(
            secs(20),
            &format!("http://{ip}:80/ from the host"),
            || match http_get(ip, 80, "/") {
                Ok(r) if r.status == 200 => Ok(r.body),
                other => Err(other),
            },
        );
        assert!(page.contains(&nginx_marker(version)), "{page}");
    }

    for (from, to, version) in [("web-a", &ip_b, "1.16.1"), ("web-b", &ip_a, "1.14.2")] {
        let url = format!("http://{to}:80/");
        let page = c.wait_for(secs(20), &format!("{from} → {url}"), || {
            let r = c.exec("default", from, None, &["wget", "-qO-", &url]);
            if r.success() {
                Ok(r.stdout)
            } else {
                Err(r.describe())
            }
        });
        assert!(page.contains(&nginx_marker(version)), "{from}: {page}");
    }
}
