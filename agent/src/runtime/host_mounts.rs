//! Checks, as containerd's CRI does before it creates a container, that the host mount under a
//! propagating volume can propagate: a `Bidirectional` (`rshared`) source must sit on a shared
//! mount, a `HostToContainer` (`rslave`) one on a shared or slave mount, or the container
//! would silently not see (or not share) the mounts it asked for.

use std::path::Path;

use crate::mountinfo::Mount;

use super::{ContainerConfig, MountKind, RuntimeError};

/// The mount `path` lives on: the last-listed mount whose mount point is its longest prefix.
fn mount_of<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    mounts
        .iter()
        .filter(|m| path.starts_with(&m.point))
        .max_by_key(|m| m.point.components().count())
}

/// Checks one source against `mountinfo` for the propagation option `want`.
fn check(mountinfo: &str, source: &Path, want: &str) -> Result<(), String> {
    let mounts = crate::mountinfo::parse(mountinfo);
    let Some(m) = mount_of(&mounts, source) else {
        return Err(format!("path {source:?} is not under any mount"));
    };
    match want {
        "rshared" if !m.shared => Err(format!(
            "path {:?} is mounted on {:?} but it is not a shared mount",
            source, m.point
        )),
        "rslave" if !m.shared && !m.slave => Err(format!(
            "path {:?} is mounted on {:?} but it is not a shared or slave mount",
            source, m.point
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
    let mountinfo = crate::mountinfo::read();
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
