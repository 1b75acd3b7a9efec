//! Issue 31, acceptance 3: container garbage collection and log rotation. A crash-looping pod
//! keeps exactly one dead container (the kubelet's `maxPerPodContainer`), `kubectl logs
//! --previous` reads it, and its log directory goes once the pod is deleted; a container
//! writing 50 MiB of logs under `--container-log-max-size 1Mi --container-log-max-files 3`
//! leaves at most 3 files (the older ones gzipped), `kubectl logs -f` started before the
//! output sees every line across the rotations, and `--tail=5` shows the newest lines.
//!
//! Both are quick: the crash loop runs under `--max-container-restart-period 1s` (ten crashes
//! in seconds) and the 50 MiB are 13 000 lines of 4 KiB.

use std::path::{Path, PathBuf};

use berth_tests::cluster::{AgentOptions, ClusterConfig};
use berth_tests::pod_reading::{container_status, restart_count};
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

/// Dead containers of pod `name` on agent 0: its containers without a running task.
fn dead_containers(c: &Cluster, name: &str) -> usize {
    let running = c.running_tasks(0);
    c.pod_container_ids(0, "default", name)
        .iter()
        .filter(|id| !running.contains_key(id.as_str()))
        .count()
}

#[test]
fn a_crash_looping_pod_keeps_one_dead_container_and_its_previous_logs() {
    // A 1 s cap on the crash-loop back-off (the kubelet's maxContainerRestartPeriod): ten
    // crashes take seconds, not the 10-20-40-80-160 s of the default curve.
    let c = Cluster::start_with(ClusterConfig {
        agents: vec![AgentOptions {
            extra_args: ["--max-container-restart-period", "1s"]
                .map(String::from)
                .to_vec(),
            ..AgentOptions::default()
        }],
        ..ClusterConfig::agents(1)
    });
    let node = c.node_name(0).to_string();
    let mut pod = sh_pod("crashy", &node, "echo \"attempt $(date +%s%N)\"; exit 1");
    pod["spec"]["restartPolicy"] = "Always".into();
    c.apply(&pod);
    let started = std::time::Instant::now();
    let p = c.wait_pod("default", "crashy", secs(60), "10 restarts", |p| {
        let cs = container_status(p, "main").ok_or("no status")?;
        if restart_count(cs) >= 10 {
            Ok(p.clone())
        } else {
            Err(format!("restarts {}", restart_count(cs)))
        }
    });
    eprintln!("10 restarts after {:?}", started.elapsed());
    // Ten crashes, and of them one dead container is kept: none piles up. (Between an exit
    // and the pass that removes the attempt before it there are two for a moment; at rest,
    // in back-off or with the next attempt running, exactly one.)
    c.wait_for(
        secs(10),
        "exactly one dead container of the pod",
        || match dead_containers(&c, "crashy") {
            1 => Ok(()),
            n => Err(n),
        },
    );
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
    // The count stays bounded as the pod goes on crashing, about once a second.
    c.ensure_for(
        secs(5),
        "never more than one dead container at rest",
        || match c.pod_containers(0, "default", "crashy") {
            n if n <= 2 => Ok(()),
            n => Err(n),
        },
    );
    let at_ten = container_status(&p, "main").map_or(0, restart_count);
    let crashes = c
        .pod("default", "crashy")
        .and_then(|p| container_status(&p, "main").map(restart_count))
        .unwrap_or(0);
    assert!(
        crashes >= at_ten + 2,
        "still crash-looping: {at_ten} then {crashes} restarts"
    );

    c.kubectl().ok(&["delete", "pod", "crashy", "--wait=true"]);
    assert_eq!(c.containers(0).len(), 0, "{:?}", c.containers(0));
    // With its last container the pod's log directory goes (the minute's sweep is the net).
    c.wait_for(secs(10), "the deleted pod's log directory removed", || {
        if dir.exists() {
            Err(file_names(&dir))
        } else {
            Ok(())
        }
    });
}

/// 13 000 lines of 4 KiB: 53 MB of output (50.8 MiB), 53.5 MB in the CRI format. Long lines
/// keep the per-line costs (the test reading each line, the log pipeline's per-line work) out
/// of the way of what is tested: bytes through rotation.
const LINES: usize = 13_000;
/// The output comes in four bursts a second apart: the log is rotated at most once a second
/// (its stamp has seconds), and a writer this fast would otherwise finish before a second
/// rotation, leaving no older rotated file to compress.
const BURST: usize = LINES / 4;
/// Zeros padding each line to 4096 bytes with its `line N ` prefix (at most 12 bytes) and
/// newline.
const PAD: usize = 4080;

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
    let script = format!(
        "echo ready; until [ -e /tmp/go ]; do sleep 0.1; done; \
         awk 'BEGIN {{ s = sprintf(\"%0{PAD}d\", 0); for (i = 1; i <= {LINES}; i++) {{ print \"line \" i \" \" s; if (i % {BURST} == 0) system(\"sleep 1\") }} }}'; \
         echo done; {SLEEP_FOREVER}"
    );
    c.apply(&sh_pod("chatty", &node, &script));
    let p = c.wait_for_pod_ready("default", "chatty", secs(90));
    let mut follow = c.kubectl().spawn(&["logs", "-f", "chatty"]);
    follow.expect_line(secs(30), "ready", |l| l == "ready");
    c.exec_ok("default", "chatty", None, &["touch", "/tmp/go"]);
    let started = std::time::Instant::now();
    let mut next = 1usize;
    let deadline = std::time::Instant::now() + secs(120);
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
    eprintln!("followed {LINES} lines in {:?}", started.elapsed());
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
        .map(|i| format!("line {i} {:0PAD$}", 0))
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
