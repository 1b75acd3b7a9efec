//! Rotated container logs, kept in bounds every 10 s (the kubelet's log monitor period): for
//! every live log under the log directory, older rotated files are gzipped and the oldest
//! deleted so that at most `--container-log-max-files` remain (see [`super::plan::logs`]).
//! The live file itself is rotated by its writer (`runtime::logs`) the moment it passes
//! `--container-log-max-size`, so a fast writer cannot overshoot it by 10 s of output.

use crate::dir_listing::subdirectories;
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use flate2::Compression;
use flate2::write::GzEncoder;
use tokio_util::sync::CancellationToken;

use super::plan::logs::{LogAction, live_logs, plan_log_files, rotated_files};

/// How often rotated logs are compressed and pruned.
pub const CHECK_PERIOD: Duration = Duration::from_secs(10);

/// Runs the passes until `shutdown`.
pub async fn run(log_dir: PathBuf, max_files: usize, shutdown: CancellationToken) {
    let mut tick = super::period(CHECK_PERIOD);
    loop {
        tokio::select! { _ = tick.tick() => {}, _ = shutdown.cancelled() => return }
        let dir = log_dir.clone();
        match tokio::task::spawn_blocking(move || pass(&dir, max_files)).await {
            Ok(n) if n > 0 => tracing::debug!(files = n, "rotated container logs handled"),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "the log rotation pass failed"),
        }
    }
}

fn names(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// One pass over `<log_dir>/<pod>/<container>/`; returns how many files it changed. Errors
/// are logged per file: one unreadable file never stops the others.
pub fn pass(log_dir: &Path, max_files: usize) -> usize {
    let mut changed = 0;
    for pod in subdirectories(log_dir) {
        for container in subdirectories(&pod) {
            let entries = names(&container);
            for log in live_logs(entries.iter().map(String::as_str)) {
                let rotated = rotated_files(&log, entries.iter().map(String::as_str));
                for action in plan_log_files(&rotated, max_files) {
                    if let Err(e) = apply(&container, &action) {
                        tracing::warn!(dir = %container.display(), ?action, error = %e, "handling a rotated log failed");
                    } else {
                        changed += 1;
                    }
                }
            }
        }
    }
    changed
}

fn apply(dir: &Path, action: &LogAction) -> std::io::Result<()> {
    match action {
        LogAction::Delete { file_name } => match std::fs::remove_file(dir.join(file_name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
        LogAction::Compress { file_name } => compress(&dir.join(file_name)),
    }
}

/// gzips `path` into `<path>.gz` through `<path>.gz.tmp` (renamed when complete, so a reader
/// never sees half a file), then removes `path`.
pub fn compress(path: &Path) -> std::io::Result<()> {
    let mut gz = path.as_os_str().to_os_string();
    gz.push(".gz");
    let gz = PathBuf::from(gz);
    let mut tmp = gz.clone().into_os_string();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let result = (|| {
        let mut input = BufReader::new(File::open(path)?);
        let mut out = GzEncoder::new(BufWriter::new(File::create(&tmp)?), Compression::default());
        std::io::copy(&mut input, &mut out)?;
        out.finish()?.flush()?;
        std::fs::rename(&tmp, &gz)?;
        std::fs::remove_file(path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn a_pass_compresses_older_rotated_files_and_keeps_max_files() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("ns_pod_uid").join("app");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("0.log"), "live\n").unwrap();
        for (i, text) in ["one\n", "two\n", "three\n", "four\n"].iter().enumerate() {
            std::fs::write(dir.join(format!("0.log.20260101-00000{i}")), text).unwrap();
        }
        pass(root.path(), 3);
        let mut left = names(&dir);
        left.sort();
        assert_eq!(
            left,
            vec!["0.log", "0.log.20260101-000002.gz", "0.log.20260101-000003"]
        );
        let mut text = String::new();
        flate2::read::GzDecoder::new(File::open(dir.join("0.log.20260101-000002.gz")).unwrap())
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "three\n");
        assert_eq!(pass(root.path(), 3), 0, "a second pass has nothing to do");
    }
}
