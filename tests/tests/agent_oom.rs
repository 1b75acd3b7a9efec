//! Agent acceptance 5: memory limits. A container that allocates past its 16Mi limit is killed
//! by the kernel and reported as `OOMKilled` with exit code 137; a container under its limit
//! with the same program's smaller allocation is not.

use berth_tests::pod_reading::{container_status, terminated};
use berth_tests::pod_specs::{bound_pod, sh_container};
use berth_tests::{Cluster, Table, secs};
use serde_json::{Value, json};

fn limited(name: &str, node: &str, megabytes: u32) -> Value {
    let mut main = sh_container(
        "main",
        &format!("x=$(head -c {megabytes}m /dev/zero | tr '\\0' a); echo allocated ${{#x}}"),
    );
    main["resources"] = json!({"limits": {"memory": "16Mi"}, "requests": {"memory": "16Mi"}});
    bound_pod(
        name,
        node,
        json!({"restartPolicy": "Never", "containers": [main]}),
    )
}

#[test]
fn a_container_over_its_memory_limit_is_oom_killed() {
    let (c, node) = Cluster::start_one();
    c.apply(&limited("hog", &node, 100));
    c.apply(&limited("modest", &node, 1));

    let hog = c.wait_for_pod_phase("default", "hog", "Failed", secs(90));
    let cs = container_status(&hog, "main").unwrap();
    let term = terminated(cs).unwrap_or_else(|| panic!("not terminated: {cs:#}"));
    assert_eq!(term["reason"], "OOMKilled", "{term:#}");
    assert_eq!(term["exitCode"], 137, "{term:#}");
    let table = Table::parse(&c.kubectl().ok(&["get", "pod", "hog"])).unwrap();
    assert_eq!(table.cell("hog", "STATUS"), Some("OOMKilled"));

    let modest = c.wait_for_pod_phase("default", "modest", "Succeeded", secs(90));
    let cs = container_status(&modest, "main").unwrap();
    assert_eq!(terminated(cs).unwrap()["exitCode"], 0, "{cs:#}");
    let logs = c.logs_of("default", "modest", None, &[]);
    assert_eq!(
        logs.stdout.trim(),
        "allocated 1048576",
        "{}",
        logs.describe()
    );
}
