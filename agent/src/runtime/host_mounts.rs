//! Checks, as containerd's CRI does before it creates a container, that the host mount under a
//! propagating volume can propagate: a `Bidirectional` (`rshared`) source must sit on a shared
//! mount, a `HostToContainer` (`rslave`) one on a shared or slave mount, or the container
//! would silently not see (or not share) the mounts it asked for.

use std::path::{Path, PathBuf};

use super::{ContainerConfig, MountKind, RuntimeError};

/// One line of `/proc/self/mountinfo`: the mount point and its optional fields.
#[derive(Debug, PartialEq, Eq)]
struct MountInfo {
    mount_point: PathBuf,
    shared: bool,
    slave: bool,
}

/// Mount points decode `\040`-style octal escapes (spaces, tabs, newlines, backslashes).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && let Some(v) = std::str::from_utf8(&bytes[i + 1..i + 4])
                .ok()
                .and_then(|o| u8::from_str_radix(o, 8).ok())
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse(mountinfo: &str) -> Vec<MountInfo> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let mount_point = PathBuf::from(unescape(fields.get(4)?));
            let optional = fields.get(6..)?.iter().take_while(|f| **f != "-");
            let (mut shared, mut slave) = (false, false);
            for f in optional {
                shared |= f.starts_with("shared:");
                slave |= f.starts_with("master:");
            }
            Some(MountInfo {
                mount_point,
                shared,
                slave,
            })
        })
        .collect()
}

/// The mount `path` lives on: the last-listed mount whose mount point is its longest prefix.
fn mount_of<'a>(mounts: &'a [MountInfo], path: &Path) -> Option<&'a MountInfo> {
    mounts
        .iter()
        .filter(|m| path.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.components().count())
}

/// Checks one source against `mountinfo` for the propagation option `want`.
fn check(mountinfo: &str, source: &Path, want: &str) -> Result<(), String> {
    let mounts = parse(mountinfo);
    let Some(m) = mount_of(&mounts, source) else {
        return Err(format!("path {source:?} is not under any mount"));
    };
    match want {
        "rshared" if !m.shared => Err(format!(
            "path {:?} is mounted on {:?} but it is not a shared mount",
            source, m.mount_point
        )),
        "rslave" if !m.shared && !m.slave => Err(format!(
            "path {:?} is mounted on {:?} but it is not a shared or slave mount",
            source, m.mount_point
        )),
        _ => Ok(()),
    }
}

/// Checks every propagating bind mount of `config` against this process's mount table.
pub fn verify_propagation(config: &ContainerConfig) -> Result<(), RuntimeError> {
    let wanted: Vec<(&str, &str)> = config
        .mounts
        .iter()
        .filter(|m| m.kind == MountKind::Bind)
        .filter_map(|m| {
            m.options
                .iter()
                .find(|o| *o == "rshared" || *o == "rslave")
                .map(|o| (m.source.as_str(), o.as_str()))
        })
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| RuntimeError::io("reading /proc/self/mountinfo".to_string(), e))?;
    for (source, want) in wanted {
        let real = std::fs::canonicalize(source)
            .map_err(|e| RuntimeError::io(format!("resolving {source}"), e))?;
        check(&mountinfo, &real, want).map_err(RuntimeError::InvalidConfig)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
23 22 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw
40 22 0:40 / /srv/private rw,relatime - tmpfs tmpfs rw
41 22 0:41 / /srv/slave rw,relatime master:7 - tmpfs tmpfs rw
42 22 0:42 / /srv/with\\040space rw shared:9 master:3 - tmpfs tmpfs rw
";

    #[test]
    fn mountinfo_lines_give_points_and_propagation() {
        let m = parse(MOUNTINFO);
        assert_eq!(m.len(), 5);
        assert_eq!(m[4].mount_point, PathBuf::from("/srv/with space"));
        assert!(m[4].shared && m[4].slave);
        assert!(!m[2].shared && !m[2].slave);
    }

    #[test]
    fn sources_are_checked_as_containerd_checks_them() {
        let cases: &[(&str, &str, Result<(), String>)] = &[
            ("/var/lib/x", "rshared", Ok(())),
            ("/var/lib/x", "rslave", Ok(())),
            ("/srv/slave/d", "rslave", Ok(())),
            (
                "/srv/slave/d",
                "rshared",
                Err("path \"/srv/slave/d\" is mounted on \"/srv/slave\" but it is not a shared mount".into()),
            ),
            (
                "/srv/private/d",
                "rslave",
                Err("path \"/srv/private/d\" is mounted on \"/srv/private\" but it is not a shared or slave mount".into()),
            ),
            ("/srv/with space/d", "rshared", Ok(())),
        ];
        for (source, want, expected) in cases {
            assert_eq!(
                &check(MOUNTINFO, Path::new(source), want),
                expected,
                "{source} {want}"
            );
        }
    }
}
