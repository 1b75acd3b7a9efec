//! Issue 31, acceptance 3: container garbage collection and log rotation. A crash-looping pod
//! keeps exactly one dead container (the kubelet's `maxPerPodContainer`), `kubectl logs
//! --previous` reads it, and its log directory goes once the pod is deleted; a container
//! writing 50 MiB of logs under `--container-log-max-size 1Mi --container-log-max-files 3`
//! leaves at most 3 files (the older ones gzipped), `kubectl logs -f` started before the
//! output sees every line across the rotations, and `--tail=5` shows the newest lines.

use std::path::{Path, PathBuf};

use berth_tests::cluster::{AgentOptions, ClusterConfig};
use berth_tests::pod_reading::{container_status, restart_count, waiting_reason};
use berth_tests::pod_specs::{SLEEP_FOREVER, sh_pod};
use berth_tests::{Cluster, secs};
use serde_json::Value;

/// The directories of pod `uid`'s logs under the agent's log dir.
fn pod_log_dir(c: &Cluster, pod: &Value) -> Option<PathBuf> {
    let uid = pod["metadata"]["uid"].as_str()?;
    std::fs::read_dir(c.agent(0).log_dir())
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(&format!("_{uid}")))
        })
}

fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|e| {
            e.flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn a_crash_looping_pod_keeps_one_dead_container_and_its_previous_logs() {
    let c = Cluster::start(1);
    let node = c.node_name(0).to_string();
    let mut pod = sh_pod("crashy", &node, "echo \"attempt $(date +%s%N)\"; exit 1");
    pod["spec"]["restartPolicy"] = "Always".into();
    c.apply(&pod);
    // Upstream's back-off (10 s doubling): the fourth restart comes about 70 s in.
    let p = c.wait_pod(
        "default",
        "crashy",
        secs(180),
        "4 restarts, in back-off",
        |p| {
            let cs = container_status(p, "main").ok_or("no status")?;
            if restart_count(cs) >= 4 && waiting_reason(cs) == Some("CrashLoopBackOff") {
                Ok(p.clone())
            } else {
                Err(format!("restarts {}", restart_count(cs)))
            }
        },
    );
    // In back-off the only container is the one that exited last: older ones were removed.
    c.wait_for(secs(10), "one dead container of the pod", || {
        match c.pod_containers(0, "default", "crashy") {
            1 => Ok(()),
            n => Err(n),
        }
    });
    let dir = pod_log_dir(&c, &p).expect("the pod's log directory");
    let logs = file_names(&dir.join("main"));
    assert!(
        logs.len() <= 2,
        "the logs of removed attempts go with them: {logs:?}"
    );
    let previous = c.logs_of("default", "crashy", None, &["--previous"]);
    assert!(previous.success(), "{}", previous.describe());
    assert!(
        previous.stdout.starts_with("attempt "),
        "{}",
        previous.describe()
    );
    // The count stays bounded as the pod goes on crashing.
    c.ensure_for(secs(15), "never more than one dead container", || {
        match c.pod_containers(0, "default", "crashy") {
            n if n <= 2 => Ok(()),
            n => Err(n),
        }
    });

    c.kubectl().ok(&["delete", "pod", "crashy", "--wait=true"]);
    assert_eq!(c.containers(0).len(), 0, "{:?}", c.containers(0));
    c.wait_for(secs(90), "the deleted pod's log directory swept", || {
        if dir.exists() {
            Err(file_names(&dir))
        } else {
            Ok(())
        }
    });
}

const LINES: usize = 500_000;

#[test]
fn fifty_mebibytes_of_logs_leave_three_files_and_every_line_is_followed() {
    let c = Cluster::start_with(ClusterConfig {
        agents: vec![AgentOptions {
            extra_args: [
                "--container-log-max-size",
                "1Mi",
                "--container-log-max-files",
                "3",
            ]
            .map(String::from)
            .to_vec(),
            ..AgentOptions::default()
        }],
        ..ClusterConfig::agents(1)
    });
    let node = c.node_name(0).to_string();
    // ~113 bytes a line: 500 000 lines are 54 MB of output (76 MB in CRI format).
    let script = format!(
        "echo ready; until [ -e /tmp/go ]; do sleep 0.1; done; \
         awk 'BEGIN {{ s = sprintf(\"%0100d\", 0); for (i = 1; i <= {LINES}; i++) print \"line \" i \" \" s }}'; \
         echo done; {SLEEP_FOREVER}"
    );
    c.apply(&sh_pod("chatty", &node, &script));
    let p = c.wait_for_pod_ready("default", "chatty", secs(90));
    let mut follow = c.kubectl().spawn(&["logs", "-f", "chatty"]);
    follow.expect_line(secs(30), "ready", |l| l == "ready");
    c.exec_ok("default", "chatty", None, &["touch", "/tmp/go"]);
    let mut next = 1usize;
    let deadline = std::time::Instant::now() + secs(240);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let Some(l) = follow.next_line(left) else {
            panic!("no `done` after line {next}\n{}", follow.describe());
        };
        if l == "done" {
            break;
        }
        let n: usize = l
            .split(' ')
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("not a line of the output: {l:.40}"));
        assert_eq!(n, next, "a gap (or repeat) in the followed log");
        next += 1;
    }
    assert_eq!(next, LINES + 1, "lines followed");
    drop(follow);

    let dir = pod_log_dir(&c, &p)
        .expect("the pod's log directory")
        .join("main");
    c.wait_for(
        secs(60),
        "at most 3 files, older rotated ones gzipped",
        || {
            let names = file_names(&dir);
            let rotated: Vec<&String> = names.iter().filter(|n| *n != "0.log").collect();
            let compressed = rotated.iter().filter(|n| n.ends_with(".gz")).count();
            if names.len() <= 3
                && names.contains(&"0.log".to_string())
                && compressed >= 1
                && compressed + 1 >= rotated.len()
                && rotated.iter().all(|n| n.starts_with("0.log.2"))
            {
                Ok(())
            } else {
                Err(names)
            }
        },
    );
    let tail = c.logs_of("default", "chatty", None, &["--tail=5"]);
    assert!(tail.success(), "{}", tail.describe());
    let want: Vec<String> = (LINES - 3..=LINES)
        .map(|i| format!("line {i} {:0100}", 0))
        .chain(["done".to_string()])
        .collect();
    assert_eq!(tail.stdout.lines().collect::<Vec<_>>(), want);
    // --since reads across the files as well: everything of the last hour is what is kept.
    let since = c.logs_of("default", "chatty", None, &["--since=1h"]);
    assert!(since.success(), "{}", since.describe());
    assert!(
        since.stdout.lines().count() > 5,
        "{} lines",
        since.stdout.lines().count()
    );
}
