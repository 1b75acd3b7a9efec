//! A container log's rotated files (`<log>.<stamp>`, older ones `….gz`), read back oldest
//! first so `kubectl logs` sees everything the node keeps, not only the live file. With
//! `tailLines` or `sinceTime`, files are read newest first and reading stops at the first one
//! that holds enough lines or starts before the time asked for.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::gc::plan::logs::rotated_files;

/// The rotated files of `log`, oldest first (unfinished compressions left out).
fn rotated(log: &Path) -> Vec<(PathBuf, bool)> {
    let (Some(dir), Some(name)) = (log.parent(), log.file_name().and_then(|n| n.to_str())) else {
        return Vec::new();
    };
    let names: Vec<String> = std::fs::read_dir(dir)
        .map(|e| {
            e.flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    rotated_files(name, names.iter().map(String::as_str))
        .into_iter()
        .filter(|f| !f.partial)
        .map(|f| (dir.join(&f.file_name), f.compressed))
        .collect()
}

/// One rotated file's text; a file compressed or deleted meanwhile is looked for as `.gz`,
/// then given up (empty).
fn read(path: &Path, compressed: bool, skip_inode: Option<u64>) -> String {
    let open = |p: &Path, gz: bool| -> std::io::Result<String> {
        let f = File::open(p)?;
        if !gz && skip_inode.is_some() && f.metadata()?.ino() == skip_inode.unwrap_or_default() {
            return Ok(String::new());
        }
        let mut bytes = Vec::new();
        if gz {
            flate2::read::MultiGzDecoder::new(f).read_to_end(&mut bytes)?;
        } else {
            let mut f = f;
            f.read_to_end(&mut bytes)?;
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    match open(path, compressed) {
        Ok(s) => s,
        Err(_) if !compressed => {
            let mut gz = path.as_os_str().to_os_string();
            gz.push(".gz");
            open(Path::new(&gz), true).unwrap_or_default()
        }
        Err(_) => String::new(),
    }
}

/// The rotated history of `log` to put before the live file's text (`live_lines` lines).
/// `skip_inode`: the live file's inode when it was opened (after a rotation in between, the
/// renamed file is the live text already). Blocking: call from a blocking task.
pub fn read_history(
    log: &Path,
    skip_inode: Option<u64>,
    tail: Option<usize>,
    since: Option<jiff::Timestamp>,
    live_lines: usize,
) -> String {
    let mut chunks: Vec<String> = Vec::new();
    let mut lines = live_lines;
    for (path, compressed) in rotated(log).into_iter().rev() {
        if tail.is_some_and(|t| lines >= t) {
            break;
        }
        let text = read(&path, compressed, skip_inode);
        lines += text.lines().count();
        let starts_before_since = since.is_some_and(|s| {
            text.lines()
                .next()
                .and_then(|l| l.split(' ').next())
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .is_some_and(|t| t < s)
        });
        chunks.push(text);
        if starts_before_since {
            break;
        }
    }
    chunks.reverse();
    chunks.concat()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(path: &Path, text: &str) {
        let mut e = flate2::write::GzEncoder::new(
            File::create(path).unwrap(),
            flate2::Compression::default(),
        );
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap();
    }

    #[test]
    fn history_reads_compressed_and_plain_rotated_files_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        std::fs::write(&log, "live\n").unwrap();
        gz(&dir.path().join("0.log.20260101-000001.gz"), "one\n");
        gz(&dir.path().join("0.log.20260101-000002.gz"), "two\nthree\n");
        std::fs::write(dir.path().join("0.log.20260101-000003"), "four\n").unwrap();
        std::fs::write(dir.path().join("1.log.20260101-000003"), "other\n").unwrap();
        assert_eq!(
            read_history(&log, None, None, None, 1),
            "one\ntwo\nthree\nfour\n"
        );
        // Enough lines for a tail of 4 once `two three` are read: `one` is not.
        assert_eq!(
            read_history(&log, None, Some(4), None, 1),
            "two\nthree\nfour\n"
        );
        assert_eq!(read_history(&log, None, Some(1), None, 1), "");
    }

    #[test]
    fn the_file_being_followed_is_not_read_twice() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        let rotated = dir.path().join("0.log.20260101-000001");
        std::fs::write(&rotated, "live, renamed\n").unwrap();
        let ino = std::fs::metadata(&rotated).unwrap().ino();
        assert_eq!(read_history(&log, Some(ino), None, None, 1), "");
    }

    #[test]
    fn since_stops_at_the_first_file_that_starts_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        let line = |s: &str, t: &str| format!("2026-01-01T00:00:0{s}.000000000Z stdout F {t}\n");
        std::fs::write(dir.path().join("0.log.20260101-000001"), line("1", "a")).unwrap();
        std::fs::write(dir.path().join("0.log.20260101-000002"), line("3", "b")).unwrap();
        std::fs::write(dir.path().join("0.log.20260101-000003"), line("5", "c")).unwrap();
        let since: jiff::Timestamp = "2026-01-01T00:00:04Z".parse().unwrap();
        let got = read_history(&log, None, None, Some(since), 0);
        assert_eq!(got, format!("{}{}", line("3", "b"), line("5", "c")));
    }
}
