//! Container log files as the kubelet's container log manager lays them out: the live file
//! `<n>.log`, rotated files `<n>.log.<YYYYMMDD-hhmmss>` (UTC), older rotated files gzipped as
//! `<n>.log.<stamp>.gz` (written as `….gz.tmp` first). A pass keeps at most
//! `--container-log-max-files` files per log — the live one, the newest rotated one as is (a
//! follower may still be draining it), the rest compressed — and deletes the oldest beyond that.
//!
//! Worked example, max-files 3: `0.log`, `0.log.20260101-000001`, `0.log.20260101-000002`,
//! `0.log.20260101-000003` → delete `…000001`, compress `…000002`, keep `…000003` as is.
//!
//! Planner: pure, no I/O.

use std::path::{Path, PathBuf};

use jiff::Timestamp;

/// Upstream's rotation stamp (`20060102-150405`).
const STAMP_FORMAT: &str = "%Y%m%d-%H%M%S";
const GZ: &str = ".gz";
const TMP: &str = ".tmp";

/// The name a live log `log` is renamed to when rotated at `now`.
pub fn rotated_path(log: &Path, now: Timestamp) -> PathBuf {
    let stamp = now.to_zoned(jiff::tz::TimeZone::UTC).strftime(STAMP_FORMAT);
    let mut name = log.as_os_str().to_os_string();
    name.push(format!(".{stamp}"));
    PathBuf::from(name)
}

/// One file that belongs to a live log `<n>.log`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RotatedFile {
    /// `YYYYMMDD-hhmmss`: orders the files oldest first.
    pub stamp: String,
    pub compressed: bool,
    /// An unfinished compression (`….gz.tmp`).
    pub partial: bool,
    pub file_name: String,
}

/// The rotated files of `log_name` (e.g. `0.log`) among `names` (one directory's entries).
pub fn rotated_files<'a>(
    log_name: &str,
    names: impl IntoIterator<Item = &'a str>,
) -> Vec<RotatedFile> {
    let prefix = format!("{log_name}.");
    let mut out: Vec<RotatedFile> = names
        .into_iter()
        .filter_map(|n| {
            let rest = n.strip_prefix(&prefix)?;
            let (rest, partial) = match rest.strip_suffix(TMP) {
                Some(r) => (r, true),
                None => (rest, false),
            };
            let (stamp, compressed) = match rest.strip_suffix(GZ) {
                Some(s) => (s, true),
                None => (rest, false),
            };
            if partial && !compressed {
                return None;
            }
            valid_stamp(stamp).then(|| RotatedFile {
                stamp: stamp.to_string(),
                compressed,
                partial,
                file_name: n.to_string(),
            })
        })
        .collect();
    out.sort();
    out
}

fn valid_stamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 15
        && b[8] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 8 || c.is_ascii_digit())
}

/// The live logs (`<n>.log`) among one container directory's entries.
pub fn live_logs<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = names
        .into_iter()
        .filter(|n| {
            n.strip_suffix(".log")
                .is_some_and(|i| !i.is_empty() && i.bytes().all(|c| c.is_ascii_digit()))
        })
        .map(str::to_string)
        .collect();
    out.sort();
    out
}

/// What to do with one rotated file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogAction {
    /// gzip `file_name` into `<file_name>.gz` (via `.gz.tmp`), then remove it.
    Compress {
        file_name: String,
    },
    Delete {
        file_name: String,
    },
}

/// The actions that leave at most `max_files` files for the live log whose rotated files are
/// `rotated` (oldest first): leftovers of interrupted compressions go, the oldest beyond the
/// limit go, every kept rotated file but the newest is compressed. `max_files` below 2 is
/// treated as 2 (upstream's minimum: the live file and the newest rotated one).
pub fn plan_log_files(rotated: &[RotatedFile], max_files: usize) -> Vec<LogAction> {
    let mut actions = Vec::new();
    let complete: Vec<&RotatedFile> = rotated.iter().filter(|f| !f.partial).collect();
    for f in rotated.iter().filter(|f| f.partial) {
        actions.push(LogAction::Delete {
            file_name: f.file_name.clone(),
        });
    }
    // A stamp compressed and also left uncompressed (a pass stopped after writing the .gz):
    // the uncompressed copy goes.
    let mut kept: Vec<&RotatedFile> = Vec::new();
    for f in complete {
        let twin = rotated
            .iter()
            .any(|o| o.stamp == f.stamp && o.compressed && !o.partial);
        if !f.compressed && twin {
            actions.push(LogAction::Delete {
                file_name: f.file_name.clone(),
            });
        } else {
            kept.push(f);
        }
    }
    let keep = max_files.max(2) - 1;
    let excess = kept.len().saturating_sub(keep);
    for f in &kept[..excess] {
        actions.push(LogAction::Delete {
            file_name: f.file_name.clone(),
        });
    }
    let kept = &kept[excess..];
    if let Some((_, older)) = kept.split_last() {
        for f in older.iter().filter(|f| !f.compressed) {
            actions.push(LogAction::Compress {
                file_name: f.file_name.clone(),
            });
        }
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(names: &[&str]) -> Vec<RotatedFile> {
        rotated_files("0.log", names.iter().copied())
    }

    fn del(n: &str) -> LogAction {
        LogAction::Delete {
            file_name: n.into(),
        }
    }

    fn gz(n: &str) -> LogAction {
        LogAction::Compress {
            file_name: n.into(),
        }
    }

    #[test]
    fn rotated_names_carry_a_utc_stamp() {
        let now: Timestamp = "2026-11-22T09:08:07.5+01:00".parse().unwrap();
        assert_eq!(
            rotated_path(Path::new("/var/log/pods/p/c/0.log"), now),
            PathBuf::from("/var/log/pods/p/c/0.log.20261122-080807")
        );
    }

    #[test]
    fn only_this_logs_rotated_files_are_recognised() {
        let got = files(&[
            "0.log",
            "0.log.20260101-000002.gz",
            "0.log.20260101-000001",
            "0.log.20260101-000003.gz.tmp",
            "0.log.1",
            "10.log.20260101-000001",
            "0.log.20260101-00000x",
            "0.log.20260101-000004.tmp",
        ]);
        let names: Vec<&str> = got.iter().map(|f| f.file_name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "0.log.20260101-000001",
                "0.log.20260101-000002.gz",
                "0.log.20260101-000003.gz.tmp"
            ]
        );
        assert_eq!(
            live_logs(["0.log", "12.log", "x.log", ".log", "0.log.1"]),
            vec!["0.log", "12.log"]
        );
    }

    #[test]
    fn a_pass_keeps_max_files_with_only_the_newest_rotated_file_uncompressed() {
        let cases: Vec<(&[&str], usize, Vec<LogAction>)> = vec![
            (&[], 5, vec![]),
            (&["0.log.20260101-000001"], 5, vec![]),
            (
                &["0.log.20260101-000001", "0.log.20260101-000002"],
                5,
                vec![gz("0.log.20260101-000001")],
            ),
            (
                &[
                    "0.log.20260101-000001",
                    "0.log.20260101-000002",
                    "0.log.20260101-000003",
                ],
                3,
                vec![del("0.log.20260101-000001"), gz("0.log.20260101-000002")],
            ),
            (
                &[
                    "0.log.20260101-000001.gz",
                    "0.log.20260101-000002.gz",
                    "0.log.20260101-000003.gz",
                    "0.log.20260101-000004",
                ],
                3,
                vec![
                    del("0.log.20260101-000001.gz"),
                    del("0.log.20260101-000002.gz"),
                ],
            ),
            (
                &["0.log.20260101-000001", "0.log.20260101-000002"],
                1,
                vec![del("0.log.20260101-000001")],
            ),
        ];
        for (names, max, want) in cases {
            assert_eq!(
                plan_log_files(&files(names), max),
                want,
                "{names:?} max {max}"
            );
        }
    }

    #[test]
    fn leftovers_of_an_interrupted_compression_are_cleaned_up() {
        let got = plan_log_files(
            &files(&[
                "0.log.20260101-000001",
                "0.log.20260101-000001.gz",
                "0.log.20260101-000002",
                "0.log.20260101-000002.gz.tmp",
                "0.log.20260101-000003",
            ]),
            5,
        );
        assert_eq!(
            got,
            vec![
                del("0.log.20260101-000002.gz.tmp"),
                del("0.log.20260101-000001"),
                gz("0.log.20260101-000002"),
            ]
        );
    }
}
