//! The runtime against a real containerd 1.6 + runc: exit codes and CRI logs, exec, attach,
//! signals, cleanup, the memory limit (OOM kill), and adoption by a fresh Runtime.
//! Needs root, containerd, runc and busybox-static; each test runs its own containerd.

mod runtime_support;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use berth_agent::image::PulledImage;
use berth_agent::runtime::{
    AttachIo, ContainerConfig, ContainerId, ExecHandle, ExecIo, Runtime, RuntimeError,
    RuntimeEvent, TaskState,
};
use futures::StreamExt;
use runtime_support::{Containerd, Layout, container, cri_lines, images, local_busybox};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One busybox layout per test binary.
fn layout() -> &'static Layout {
    static LAYOUT: OnceLock<(tempfile::TempDir, Layout)> = OnceLock::new();
    &LAYOUT
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("tempdir");
            let layout = local_busybox(&dir.path().join("busybox"), false);
            (dir, layout)
        })
        .1
}

async fn setup() -> (Containerd, Runtime, PulledImage) {
    let ctd = Containerd::start();
    let rt = ctd.runtime().await;
    let imported = images(&rt)
        .import(&layout().dir)
        .await
        .expect("import the busybox layout");
    assert_eq!(imported.len(), 1);
    (ctd, rt, imported.into_iter().next().expect("one image"))
}

/// A container running `script` with `sh -c` in `image`, logging to `log`.
fn shell(id: &str, image: &PulledImage, script: &str, log: PathBuf) -> ContainerConfig {
    container(id, image.container_image(), &["sh", "-c", script], log)
}

/// After a test: no containers, no container snapshots, no FIFO directories.
async fn assert_clean(rt: &Runtime, ctd: &Containerd, image: &PulledImage) {
    assert!(rt.list().await.expect("list").is_empty(), "containers left");
    let keys = rt.snapshot_keys().await.expect("snapshots");
    assert!(
        keys.iter().all(|k| k.starts_with("sha256:")),
        "container snapshots left: {keys:?} (image chain {})",
        image.chain_id
    );
    let fifo_dir = ctd.dir.path().join("fifo");
    let left: Vec<_> = std::fs::read_dir(&fifo_dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "stdio directories left: {left:?}");
}

/// The end of a test: removes container `id`, then nothing may be left ([`assert_clean`]).
async fn remove_and_assert_clean(
    rt: &Runtime,
    ctd: &Containerd,
    image: &PulledImage,
    id: &ContainerId,
) {
    rt.remove(id).await.expect("remove");
    assert_clean(rt, ctd, image).await;
}

/// The runtime's event stream once it is live: its subscription to containerd is made in a
/// task of its own, and only what happens after its first `Resync` is reported, so a test that
/// waits for an event of a container it starts waits for that first.
async fn live_events(rt: &Runtime) -> impl futures::Stream<Item = RuntimeEvent> + Unpin {
    let mut events = Box::pin(rt.events());
    next_event(&mut events, |e| matches!(e, RuntimeEvent::Resync)).await;
    events
}

async fn next_event(
    events: &mut (impl futures::Stream<Item = RuntimeEvent> + Unpin),
    want: impl Fn(&RuntimeEvent) -> bool,
) -> RuntimeEvent {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(deadline, events.next()).await {
            Ok(Some(ev)) if want(&ev) => return ev,
            Ok(Some(_)) => continue,
            Ok(None) => panic!("event stream ended"),
            Err(_) => panic!("no matching event within 10 s"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_exits_with_its_code_and_logs_both_streams() {
    let (ctd, rt, image) = setup().await;
    assert!(rt.version().await.expect("version").starts_with("1."));
    let logs = ctd.dir.path().join("logs");
    let log = logs.join("c1/0.log");
    let mut events = live_events(&rt).await;
    let cfg = shell(
        "c1",
        &image,
        "echo $(GREETING); echo err >&2; exit 3",
        log.clone(),
    );
    let t0 = Instant::now();
    let id = rt.create(&cfg).await.expect("create");
    assert_eq!(rt.status(&id).await.expect("status"), TaskState::Created);
    let pid = rt.start(&id).await.expect("start");
    let create_to_running = t0.elapsed();
    assert!(pid > 0);
    eprintln!("create→running: {create_to_running:?}");

    let exit = rt.wait_exit(&id).await.expect("wait");
    assert_eq!(exit.code, 3);
    assert!(!exit.oom_killed);
    assert!(exit.finished_at >= exit.started_at);
    let ev = next_event(&mut events, |e| matches!(e, RuntimeEvent::TaskExit { .. })).await;
    assert!(matches!(ev, RuntimeEvent::TaskExit { ref id, code: 3, .. } if id.as_str() == "c1"));
    match rt.status(&id).await.expect("status") {
        TaskState::Exited(info) => assert_eq!(info.code, 3),
        other => panic!("expected Exited, got {other:?}"),
    }

    let text = std::fs::read_to_string(&log).expect("log file");
    let lines = cri_lines(&text);
    assert!(
        lines.contains(&("stdout".into(), "F".into(), "hello".into())),
        "stdout line missing (and $(GREETING) expanded) in {text:?}"
    );
    assert!(
        lines.contains(&("stderr".into(), "F".into(), "err".into())),
        "stderr line missing in {text:?}"
    );

    let infos = rt.list().await.expect("list");
    assert_eq!(infos.len(), 1);
    assert_eq!(infos[0].log_path.as_deref(), Some(log.as_path()));
    assert_eq!(infos[0].labels["io.berth.container.name"], "c1");

    rt.remove(&id).await.expect("remove");
    rt.remove(&id).await.expect("remove is idempotent");
    assert_eq!(rt.status(&id).await.expect("status"), TaskState::NotFound);
    assert_clean(&rt, &ctd, &image).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_signals_and_remove_clean_everything() {
    let (ctd, rt, image) = setup().await;
    let logs = ctd.dir.path().join("logs");
    // Handles SIGTERM itself.
    let graceful = shell(
        "graceful",
        &image,
        "trap 'echo bye; exit 42' TERM; while true; do sleep 0.1; done",
        logs.join("graceful.log"),
    );
    // PID 1 without a handler ignores SIGTERM.
    let stubborn = container(
        "stubborn",
        image.container_image(),
        &["sleep", "3600"],
        logs.join("stubborn.log"),
    );
    for cfg in [&graceful, &stubborn] {
        rt.create(cfg).await.expect("create");
        rt.start(&cfg.id).await.expect("start");
    }
    let id = stubborn.id.clone();
    assert!(matches!(
        rt.status(&id).await.expect("status"),
        TaskState::Running { .. }
    ));
    // Starting twice fails and leaves the running task (and its FIFOs) alone.
    let twice = rt.start(&id).await;
    assert!(
        matches!(twice, Err(RuntimeError::AlreadyExists { .. })),
        "{twice:?}"
    );

    let t = Instant::now();
    let (code, out) = rt
        .exec_output(
            &id,
            &[
                "sh".into(),
                "-c".into(),
                "echo out; echo err >&2; exit 5".into(),
            ],
            Duration::from_secs(10),
        )
        .await
        .expect("exec");
    eprintln!("exec_output: {:?}", t.elapsed());
    assert_eq!(code, 5);
    assert_eq!(String::from_utf8_lossy(&out), "out\nerr\n");
    let (code, out) = rt
        .exec_output(
            &id,
            &["cat".into(), "/www/index.html".into()],
            Duration::from_secs(10),
        )
        .await
        .expect("exec");
    assert_eq!((code, out.as_slice()), (0, b"hello from pod\n".as_slice()));
    let timed_out = rt
        .exec_output(
            &id,
            &["sleep".into(), "10".into()],
            Duration::from_millis(300),
        )
        .await;
    assert!(
        matches!(timed_out, Err(RuntimeError::ExecTimeout(_))),
        "{timed_out:?}"
    );
    let missing = rt
        .exec_output(&id, &["/no/such/binary".into()], Duration::from_secs(10))
        .await;
    assert!(missing.is_err() || missing.as_ref().is_ok_and(|(c, _)| *c != 0));

    // Streaming exec with stdin.
    let mut h = exec(&rt, &id, "cat", true, false).await;
    let mut stdin = h.stdin.take().expect("stdin");
    stdin.write_all(b"ping\n").await.expect("write stdin");
    drop(stdin);
    h.control.close_stdin().await.expect("close stdin");
    assert_eq!(stdout_to_end(&mut h).await, "ping\n");
    assert_eq!(h.wait().await.expect("exit"), 0);

    // A terminal.
    let mut h = exec(&rt, &id, "tty", false, true).await;
    assert!(h.stderr.is_none());
    let out = stdout_to_end(&mut h).await;
    assert!(out.starts_with("/dev/pts/"), "tty printed {out:?}");
    assert_eq!(h.wait().await.expect("exit"), 0);

    // SIGTERM: the handler runs; the stubborn one needs SIGKILL.
    rt.kill(&graceful.id, 15).await.expect("SIGTERM");
    let exit = rt.wait_exit(&graceful.id).await.expect("wait");
    assert_eq!(exit.code, 42);
    let text = std::fs::read_to_string(logs.join("graceful.log")).expect("log");
    assert!(text.contains("stdout F bye"), "{text:?}");

    rt.kill(&id, 15).await.expect("SIGTERM");
    let still = tokio::time::timeout(Duration::from_millis(500), rt.wait_exit(&id)).await;
    assert!(
        still.is_err(),
        "PID 1 without a handler must ignore SIGTERM"
    );
    rt.kill(&id, 9).await.expect("SIGKILL");
    assert_eq!(rt.wait_exit(&id).await.expect("wait").code, 137);
    rt.kill(&id, 9)
        .await
        .expect("killing an exited task is fine");

    for cfg in [&graceful, &stubborn] {
        rt.remove(&cfg.id).await.expect("remove");
    }
    assert_clean(&rt, &ctd, &image).await;
}

/// Starts `cmd` (no arguments) in container `id`, with stdin and a terminal as asked.
async fn exec(rt: &Runtime, id: &ContainerId, cmd: &str, stdin: bool, tty: bool) -> ExecHandle {
    rt.exec(id, &[cmd.into()], ExecIo { stdin, tty })
        .await
        .unwrap_or_else(|e| panic!("exec {cmd}: {e}"))
}

/// What an exec printed on stdout (with a terminal: on the terminal), to the end.
async fn stdout_to_end(h: &mut ExecHandle) -> String {
    let mut out = String::new();
    h.stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .await
        .expect("read stdout");
    out
}

/// Reads `stream` until `want` appeared; panics with what it read after 20 s.
async fn read_until(stream: &mut (impl tokio::io::AsyncRead + Unpin), want: &str) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    let read = async {
        while !String::from_utf8_lossy(&seen).contains(want) {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(20), read).await;
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(text.contains(want), "waiting for {want:?}, read {text:?}");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_sees_output_feeds_stdin_and_stdin_once_closes_it_at_the_first_end() {
    let (ctd, rt, image) = setup().await;
    let log = ctd.dir.path().join("echo.log");
    let mut cfg = shell(
        "echo",
        &image,
        "echo ready >&2; while read l; do echo got-$l; done; echo closed; exit 4",
        log.clone(),
    );
    cfg.stdin = true;
    cfg.stdin_once = true;
    rt.create(&cfg).await.expect("create");
    // Only a running container can be attached to.
    let io = AttachIo {
        stdin: false,
        stdout: true,
        stderr: true,
    };
    let refused = rt.attach(&cfg.id, io).await;
    assert!(refused.is_err(), "not running yet: {refused:?}");
    rt.start(&cfg.id).await.expect("start");
    // A watcher (output only) and a writer (stdin only) attach side by side.
    let mut watcher = rt.attach(&cfg.id, io).await.expect("attach");
    let mut writer = rt
        .attach(
            &cfg.id,
            AttachIo {
                stdin: true,
                ..AttachIo::default()
            },
        )
        .await
        .expect("attach with stdin");
    let mut stdin = writer.stdin.take().expect("stdin");
    stdin.write_all(b"one\ntwo\n").await.expect("write");
    let mut out = watcher.stdout.take().expect("stdout");
    read_until(&mut out, "got-two").await;
    // The writer's input ends: with stdinOnce the container's stdin closes.
    stdin.shutdown().await.expect("shutdown");
    drop(stdin);
    let rest = read_until(&mut out, "closed").await;
    assert!(!rest.contains("ready"), "stderr stays on stderr: {rest:?}");
    let exit = rt.wait_exit(&cfg.id).await.expect("wait");
    assert_eq!(exit.code, 4);
    // The attachment ends with the container's output.
    tokio::time::timeout(Duration::from_secs(10), watcher.control.ended())
        .await
        .expect("the attachment ends");
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(
        text.contains("got-one") && text.contains("closed"),
        "{text}"
    );
    remove_and_assert_clean(&rt, &ctd, &image, &cfg.id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_to_a_terminal_resizes_it() {
    let (ctd, rt, image) = setup().await;
    let mut cfg = shell(
        "tty",
        &image,
        "while read l; do stty size; done",
        ctd.dir.path().join("tty.log"),
    );
    cfg.stdin = true;
    cfg.tty = true;
    rt.create(&cfg).await.expect("create");
    rt.start(&cfg.id).await.expect("start");
    let mut a = rt
        .attach(
            &cfg.id,
            AttachIo {
                stdin: true,
                stdout: true,
                stderr: true,
            },
        )
        .await
        .expect("attach");
    assert!(a.tty);
    assert!(a.stderr.is_none(), "a terminal has one output stream");
    a.control.resize(91, 17).await.expect("resize");
    let mut stdin = a.stdin.take().expect("stdin");
    stdin.write_all(b"\n").await.expect("write");
    let mut out = a.stdout.take().expect("stdout");
    read_until(&mut out, "17 91").await;
    remove_and_assert_clean(&rt, &ctd, &image, &cfg.id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_running_container_kills_it_first() {
    let (ctd, rt, image) = setup().await;
    let cfg = container(
        "running",
        image.container_image(),
        &["sleep", "3600"],
        ctd.dir.path().join("running.log"),
    );
    rt.create(&cfg).await.expect("create");
    rt.start(&cfg.id).await.expect("start");
    let t = Instant::now();
    rt.remove(&cfg.id).await.expect("remove");
    eprintln!("remove of a running container: {:?}", t.elapsed());
    // A created-but-never-started container goes too.
    let cfg2 = container(
        "never",
        image.container_image(),
        &["true"],
        ctd.dir.path().join("n.log"),
    );
    rt.create(&cfg2).await.expect("create");
    let again = rt.create(&cfg2).await;
    assert!(
        matches!(again, Err(RuntimeError::AlreadyExists { .. })),
        "{again:?}"
    );
    remove_and_assert_clean(&rt, &ctd, &image, &cfg2.id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_over_its_memory_limit_is_oom_killed() {
    let (ctd, rt, image) = setup().await;
    let mut events = live_events(&rt).await;
    let mut cfg = shell(
        "hog",
        &image,
        // The shell keeps the whole command substitution in memory.
        "x=$(head -c 64000000 /dev/zero | tr '\\0' a); echo ${#x}",
        ctd.dir.path().join("hog.log"),
    );
    cfg.resources.memory_limit_bytes = Some(16 * 1024 * 1024);
    rt.create(&cfg).await.expect("create");
    rt.start(&cfg.id).await.expect("start");
    let exit = rt.wait_exit(&cfg.id).await.expect("wait");
    assert_eq!(exit.code, 137, "exit {exit:?}");
    assert!(
        exit.oom_killed,
        "the memory cgroup must report the OOM kill"
    );
    next_event(
        &mut events,
        |e| matches!(e, RuntimeEvent::TaskOom { id } if id.as_str() == "hog"),
    )
    .await;
    match rt.status(&cfg.id).await.expect("status") {
        TaskState::Exited(info) => assert!(info.oom_killed && info.code == 137),
        other => panic!("expected Exited, got {other:?}"),
    }
    let limit = std::fs::read_to_string(format!(
        "/sys/fs/cgroup/memory/{}/hog/memory.limit_in_bytes",
        rt.namespace()
    ))
    .expect("memory cgroup of the container");
    assert_eq!(limit.trim(), (16 * 1024 * 1024).to_string());
    remove_and_assert_clean(&rt, &ctd, &image, &cfg.id).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_runtime_adopts_a_running_container_and_its_log() {
    let (ctd, rt, image) = setup().await;
    let log: PathBuf = ctd.dir.path().join("logs/ticker/0.log");
    let mut cfg = shell(
        "ticker",
        &image,
        "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.1; done",
        log.clone(),
    );
    for (k, v) in [
        ("io.berth.pod.uid", "6b8e1c0a-0000-4000-8000-000000000001"),
        ("io.berth.pod.name", "web-0"),
        ("io.berth.pod.namespace", "default"),
        ("io.berth.container.restart", "2"),
        ("io.berth.container.hash", "abc123"),
    ] {
        cfg.labels.insert(k.to_string(), v.to_string());
    }
    rt.create(&cfg).await.expect("create");
    let pid = rt.start(&cfg.id).await.expect("start");
    let count = || {
        std::fs::read_to_string(&log)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    assert!(runtime_support::wait_until(
        Duration::from_secs(5),
        || count() >= 3
    ));
    // The "agent" goes away: its copier stops with it.
    drop(rt);

    let fresh = ctd.runtime().await;
    let infos = fresh.list().await.expect("list");
    assert_eq!(infos.len(), 1);
    let info = &infos[0];
    assert_eq!(info.id, ContainerId::new("ticker").expect("id"));
    assert_eq!(info.image, "docker.io/library/busybox:local");
    assert_eq!(info.log_path.as_deref(), Some(log.as_path()));
    for (k, v) in &cfg.labels {
        assert_eq!(info.labels.get(k), Some(v), "label {k}");
    }
    match &info.state {
        TaskState::Running { pid: p, .. } => assert_eq!(*p, pid, "the same process, not restarted"),
        other => panic!("expected Running, got {other:?}"),
    }
    // Output keeps flowing into the log through the adopted FIFOs.
    let before = count();
    assert!(
        runtime_support::wait_until(Duration::from_secs(5), || count() >= before + 5),
        "the log stopped growing after adoption ({before} lines)"
    );
    let (code, _) = fresh
        .exec_output(&cfg.id, &["true".into()], Duration::from_secs(10))
        .await
        .expect("exec after adoption");
    assert_eq!(code, 0);
    // Read before the container goes: removing it removes its log, as CRI's RemoveContainer.
    let text = std::fs::read_to_string(&log).expect("log");
    fresh.remove(&cfg.id).await.expect("remove");
    let ticks: Vec<u32> = cri_lines(&text)
        .iter()
        .filter_map(|(_, _, text)| text.strip_prefix("tick ")?.parse().ok())
        .collect();
    // Nothing was lost across the switch of readers: the ticks are consecutive.
    assert!(
        ticks.windows(2).all(|w| w[1] == w[0] + 1),
        "gap in the ticks: {ticks:?}"
    );
    assert_clean(&fresh, &ctd, &image).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_containerd_restart_is_survived() {
    let (mut ctd, rt, image) = setup().await;
    let log = ctd.dir.path().join("logs/survivor.log");
    let cfg = shell(
        "survivor",
        &image,
        "trap 'echo term; exit 7' TERM; echo up; while true; do sleep 0.1; done",
        log.clone(),
    );
    rt.create(&cfg).await.expect("create");
    let pid = rt.start(&cfg.id).await.expect("start");
    let mut events = live_events(&rt).await;

    ctd.restart();

    // The same Runtime reconnects: the task is still there, unchanged.
    let deadline = Instant::now() + Duration::from_secs(10);
    let state = loop {
        match rt.status(&cfg.id).await {
            Ok(state) => break state,
            Err(e) if e.is_transient() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await; // not ordering: retries the status call until its deadline
            }
            Err(e) => panic!("status after the restart: {e}"),
        }
    };
    assert!(
        matches!(state, TaskState::Running { pid: p, .. } if p == pid),
        "{state:?}"
    );
    // The event stream says it re-subscribed (so a consumer relists), then reports the exit.
    next_event(&mut events, |e| matches!(e, RuntimeEvent::Resync)).await;
    rt.kill(&cfg.id, 15).await.expect("SIGTERM");
    let ev = next_event(&mut events, |e| matches!(e, RuntimeEvent::TaskExit { .. })).await;
    assert!(
        matches!(ev, RuntimeEvent::TaskExit { code: 7, .. }),
        "{ev:?}"
    );
    assert_eq!(rt.wait_exit(&cfg.id).await.expect("wait").code, 7);
    // The log copier kept going across the restart.
    let text = std::fs::read_to_string(&log).expect("log");
    let lines: Vec<String> = cri_lines(&text).into_iter().map(|(_, _, t)| t).collect();
    assert_eq!(lines, vec!["up", "term"]);
    remove_and_assert_clean(&rt, &ctd, &image, &cfg.id).await;
}
