//! The image service against a real containerd 1.6 and Docker's registry: pulls through a
//! `docker.io` mirror (plain manifests and image indexes), idempotent re-pulls, a missing tag,
//! a two-layer image with a whiteout, GC safety, and imports of OCI layouts and `docker save`
//! tarballs. Needs root, containerd, runc, docker-registry, skopeo and busybox-static.

mod runtime_support;

use std::time::{Duration, Instant};

use berth_agent::image::{ImageService, PullError, PullPolicy, PulledImage};
use berth_agent::runtime::{Runtime, TaskState};
use runtime_support::{
    Containerd, Entry, Registry, busybox_entries, container, cri_lines, docker_save_tar, images,
    local_busybox, tar_dir,
};

/// Runs `ls /www` in `image` and returns the names it printed.
async fn ls_www(rt: &Runtime, ctd: &Containerd, image: &PulledImage) -> Vec<String> {
    let log = ctd
        .dir
        .path()
        .join(format!("ls-{}.log", image.chain_id.len()));
    let _ = std::fs::remove_file(&log);
    let cfg = container("ls", image.container_image(), &["ls", "/www"], log.clone());
    rt.create(&cfg).await.expect("create");
    rt.start(&cfg.id).await.expect("start");
    let exit = rt.wait_exit(&cfg.id).await.expect("wait");
    assert_eq!(exit.code, 0);
    // Read before the container goes: removing it removes its log, as CRI's RemoveContainer.
    let text = std::fs::read_to_string(&log).expect("log");
    rt.remove(&cfg.id).await.expect("remove");
    assert_eq!(
        rt.status(&cfg.id).await.expect("status"),
        TaskState::NotFound
    );
    cri_lines(&text).into_iter().map(|(_, _, t)| t).collect()
}

/// Pulls `reference` under `policy`; the image and how long the pull took.
async fn timed_pull(
    service: &ImageService,
    reference: &str,
    policy: PullPolicy,
) -> (PulledImage, Duration) {
    let t = Instant::now();
    let image = service
        .pull(reference, policy)
        .await
        .unwrap_or_else(|e| panic!("pull {reference}: {e}"));
    (image, t.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulls_through_a_docker_io_mirror() {
    let ctd = Containerd::start();
    let registry = Registry::start();
    let work = tempfile::tempdir().expect("tempdir");
    let plain = registry.push_busybox(
        &work.path().join("plain"),
        &[busybox_entries()],
        "test",
        false,
    );
    let indexed = registry.push_busybox(
        &work.path().join("indexed"),
        &[busybox_entries()],
        "multi",
        true,
    );

    let rt = ctd.runtime().await;
    let service = ImageService::new(rt.clone(), registry.mirror_config());

    let (image, took) = timed_pull(&service, "busybox:test", PullPolicy::IfNotPresent).await;
    eprintln!("cold pull (1 layer, {} bytes): {took:?}", image.size_bytes);
    assert_eq!(image.name, "docker.io/library/busybox:test");
    assert_eq!(image.digest, plain.manifest_digest);
    assert_eq!(image.chain_id, plain.diff_ids[0]);
    assert_eq!(image.config.cmd, vec!["sh"]);
    assert!(!image.already_present);
    assert!(image.size_bytes > 500_000, "size {}", image.size_bytes);
    assert_eq!(
        image.image_id(),
        format!("docker.io/library/busybox@{}", plain.manifest_digest)
    );

    // IfNotPresent finds it; Always goes to the registry again and changes nothing.
    let again = service
        .pull("docker.io/library/busybox:test", PullPolicy::IfNotPresent)
        .await
        .expect("present");
    assert!(again.already_present);
    let (repulled, took) = timed_pull(&service, "busybox:test", PullPolicy::Always).await;
    eprintln!("warm re-pull (Always): {took:?}");
    assert_eq!(repulled.digest, image.digest);
    assert_eq!(repulled.chain_id, image.chain_id);

    // An index resolves to its linux/amd64 manifest; the image keeps the index digest.
    let multi = service
        .pull("busybox:multi", PullPolicy::Always)
        .await
        .expect("pull an index");
    assert_eq!(multi.digest, indexed.top_digest);
    assert_ne!(multi.digest, indexed.manifest_digest);
    assert_eq!(multi.chain_id, indexed.diff_ids[0]);

    // Missing tag.
    let missing = service.pull("busybox:nope", PullPolicy::IfNotPresent).await;
    match &missing {
        Err(e @ PullError::NotFound { .. }) => {
            assert!(!e.is_transient());
            assert!(
                e.to_string().contains(
                    "failed to resolve reference \"docker.io/library/busybox:nope\": docker.io/library/busybox:nope: not found"
                ),
                "{e}"
            );
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
    let never = service.pull("busybox:nope", PullPolicy::Never).await;
    assert!(
        matches!(never, Err(PullError::NeverPull { .. })),
        "{never:?}"
    );
    let present = service.pull("busybox:test", PullPolicy::Never).await;
    assert!(present.is_ok(), "{present:?}");

    // A forced GC keeps everything the image needs (the labels are right).
    let lease = rt
        .lease_create(Duration::from_secs(60))
        .await
        .expect("lease");
    rt.lease_delete(&lease, true).await.expect("GC pass");
    let listed = service.list().await.expect("list");
    let names: Vec<&str> = listed.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "docker.io/library/busybox:multi",
            "docker.io/library/busybox:test"
        ]
    );
    assert!(service.get("busybox:test").await.expect("get").is_some());
    assert_eq!(ls_www(&rt, &ctd, &image).await, vec!["index.html"]);

    // Removing the records lets GC take content and snapshots.
    service.remove("busybox:test").await.expect("remove image");
    service.remove("busybox:multi").await.expect("remove image");
    assert!(service.get("busybox:test").await.expect("get").is_none());
    assert!(rt.snapshot_keys().await.expect("snapshots").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_layer_image_with_a_whiteout_unpacks_correctly() {
    let ctd = Containerd::start();
    let registry = Registry::start();
    let work = tempfile::tempdir().expect("tempdir");
    let layer2 = vec![
        Entry::Dir("www"),
        Entry::File("www/layer2.txt".into(), b"from layer 2\n".to_vec(), 0o644),
        Entry::File("www/.wh.index.html".into(), Vec::new(), 0o644),
    ];
    let two = registry.push_busybox(
        &work.path().join("two"),
        &[busybox_entries(), layer2],
        "2layer",
        false,
    );
    let rt = ctd.runtime().await;
    let service = ImageService::new(rt.clone(), registry.mirror_config());
    let (image, took) = timed_pull(&service, "busybox:2layer", PullPolicy::Always).await;
    eprintln!("cold pull (2 layers): {took:?}");
    assert_ne!(
        image.chain_id, two.diff_ids[1],
        "the chain id of layer 2 is not its diff id"
    );
    let keys = rt.snapshot_keys().await.expect("snapshots");
    assert_eq!(keys.len(), 2, "one committed snapshot per layer: {keys:?}");
    assert_eq!(ls_www(&rt, &ctd, &image).await, vec!["layer2.txt"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imports_oci_layouts_and_docker_save_tarballs() {
    let ctd = Containerd::start();
    let work = tempfile::tempdir().expect("tempdir");
    let layout = local_busybox(&work.path().join("layout"), true);
    let rt = ctd.runtime().await;
    let service = images(&rt);

    let oci_tar = work.path().join("busybox-oci.tar");
    tar_dir(&layout.dir, &oci_tar);
    let from_tar = service.import(&oci_tar).await.expect("import the OCI tar");
    assert_eq!(from_tar.len(), 1);
    assert_eq!(from_tar[0].name, "docker.io/library/busybox:local");
    assert_eq!(from_tar[0].digest, layout.top_digest);

    let save = work.path().join("docker-save.tar");
    docker_save_tar(&layout, "example.com/tools/busybox:saved", &save);
    let saved = service.import(&save).await.expect("import docker save");
    assert_eq!(saved.len(), 1);
    assert_eq!(saved[0].name, "example.com/tools/busybox:saved");
    // Same layer content, so the same chain id and snapshot.
    assert_eq!(saved[0].chain_id, layout.diff_ids[0]);
    assert_eq!(ls_www(&rt, &ctd, &saved[0]).await, vec!["index.html"]);

    // Importing again is harmless.
    service.import(&save).await.expect("re-import");
    let names: Vec<String> = service
        .list()
        .await
        .expect("list")
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(
        names,
        vec![
            "docker.io/library/busybox:local",
            "example.com/tools/busybox:saved"
        ]
    );
    let bad = service.import(work.path()).await;
    assert!(matches!(bad, Err(PullError::Import { .. })), "{bad:?}");
}
