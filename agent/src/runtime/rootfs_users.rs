//! Reads a container's `/etc/passwd` and `/etc/group` from its own prepared root filesystem
//! (never the host's), as containerd's `WithUser` does: the snapshot's mounts, made read-only,
//! mounted on a private temporary directory, the two files read with every path lookup kept
//! inside that root (`openat2` with `RESOLVE_IN_ROOT`, so an image's symlink cannot point the
//! agent at the host's files), then unmounted.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use containerd_client::types::Mount;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag};
use nix::mount::{MntFlags, MsFlags};

use super::RuntimeError;
use super::identity::UserDb;

/// The largest user file read (a real one is a few KiB); more is refused, not buffered.
const MAX_FILE: u64 = 4 << 20;

/// The mounts as containerd's `readonlyMounts` makes them: an overlay's upper directory
/// becomes its top lower one (no upper/work directory, so nothing is written), binds get `ro`.
pub fn read_only(mounts: &[Mount]) -> Vec<Mount> {
    mounts
        .iter()
        .map(|m| {
            let mut m = m.clone();
            if m.r#type == "overlay" {
                let upper = m
                    .options
                    .iter()
                    .find_map(|o| o.strip_prefix("upperdir="))
                    .map(String::from);
                m.options.retain(|o| {
                    !o.starts_with("upperdir=") && !o.starts_with("workdir=") && o != "rw"
                });
                if let Some(upper) = upper {
                    for o in &mut m.options {
                        if let Some(lower) = o.strip_prefix("lowerdir=") {
                            *o = format!("lowerdir={upper}:{lower}");
                        }
                    }
                    if !m.options.iter().any(|o| o.starts_with("lowerdir=")) {
                        m.options.push(format!("lowerdir={upper}"));
                    }
                }
            } else {
                m.options.retain(|o| o != "rw");
            }
            if !m.options.iter().any(|o| o == "ro") {
                m.options.push("ro".to_string());
            }
            m
        })
        .collect()
}

/// `mount(8)`-style options split into flags and the filesystem's data string.
fn flags_and_data(options: &[String]) -> (MsFlags, String) {
    let mut flags = MsFlags::empty();
    let mut data = Vec::new();
    for o in options {
        match o.as_str() {
            "ro" => flags |= MsFlags::MS_RDONLY,
            "bind" => flags |= MsFlags::MS_BIND,
            "rbind" => flags |= MsFlags::MS_BIND | MsFlags::MS_REC,
            "nosuid" => flags |= MsFlags::MS_NOSUID,
            "nodev" => flags |= MsFlags::MS_NODEV,
            "noexec" => flags |= MsFlags::MS_NOEXEC,
            "rw" | "defaults" => {}
            other => data.push(other),
        }
    }
    (flags, data.join(","))
}

fn io(op: String) -> impl FnOnce(std::io::Error) -> RuntimeError {
    move |e| RuntimeError::io(op, e)
}

fn nix_io(op: String) -> impl FnOnce(nix::Error) -> RuntimeError {
    move |e| RuntimeError::io(op, std::io::Error::from(e))
}

/// Reads `path` (absolute inside the root) resolved within `root`; `None` when it is missing.
fn read_in_root(root: &OwnedFd, path: &str) -> Result<Option<String>, RuntimeError> {
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let fd = match nix::fcntl::openat2(root, path, how) {
        Ok(fd) => fd,
        Err(nix::Error::ENOENT | nix::Error::ENOTDIR) => return Ok(None),
        Err(e) => return Err(nix_io(format!("opening {path} in the image"))(e)),
    };
    let mut text = String::new();
    std::fs::File::from(fd)
        .take(MAX_FILE)
        .read_to_string(&mut text)
        .map_err(io(format!("reading {path} in the image")))?;
    Ok(Some(text))
}

/// Mounts `mounts` on `dir`, runs `read`, and unmounts whatever happened.
fn with_mounted<T>(
    mounts: &[Mount],
    dir: &Path,
    read: impl FnOnce(&Path) -> Result<T, RuntimeError>,
) -> Result<T, RuntimeError> {
    std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    let mut mounted = 0;
    let result = (|| {
        for m in mounts {
            let (flags, data) = flags_and_data(&m.options);
            let target = dir.join(m.target.trim_start_matches('/'));
            nix::mount::mount(
                Some(m.source.as_str()),
                &target,
                Some(m.r#type.as_str()),
                flags,
                Some(data.as_str()),
            )
            .map_err(nix_io(format!(
                "mounting the image's {} root at {}",
                m.r#type,
                target.display()
            )))?;
            mounted += 1;
        }
        read(dir)
    })();
    for _ in 0..mounted {
        if let Err(e) = nix::mount::umount2(dir, MntFlags::MNT_DETACH) {
            tracing::warn!(dir = %dir.display(), error = %e, "unmounting a rootfs view failed");
        }
    }
    let _ = std::fs::remove_dir(dir);
    result
}

/// The user database of the root filesystem the snapshot mounts make, read through a
/// read-only mount on `dir` (a fresh path under the agent's state directory).
pub fn read_user_db(mounts: &[Mount], dir: PathBuf) -> Result<UserDb, RuntimeError> {
    let mounts = read_only(mounts);
    with_mounted(&mounts, &dir, |root| {
        let root: OwnedFd = std::fs::File::open(root)
            .map_err(io(format!("opening {}", root.display())))?
            .into();
        let passwd = read_in_root(&root, "/etc/passwd")?.unwrap_or_default();
        let group = read_in_root(&root, "/etc/group")?.unwrap_or_default();
        Ok(UserDb::parse(&passwd, &group))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(kind: &str, options: &[&str]) -> Mount {
        Mount {
            r#type: kind.to_string(),
            source: kind.to_string(),
            target: String::new(),
            options: options.iter().map(|o| o.to_string()).collect(),
        }
    }

    #[test]
    fn an_overlays_upper_directory_becomes_its_top_lower_one() {
        let rw = mount(
            "overlay",
            &[
                "index=off",
                "workdir=/s/2/work",
                "upperdir=/s/2/fs",
                "lowerdir=/s/1/fs",
            ],
        );
        assert_eq!(
            read_only(&[rw])[0].options,
            vec!["index=off", "lowerdir=/s/2/fs:/s/1/fs", "ro"]
        );
        let single = mount("overlay", &["workdir=/s/2/work", "upperdir=/s/2/fs"]);
        assert_eq!(
            read_only(&[single])[0].options,
            vec!["lowerdir=/s/2/fs", "ro"]
        );
    }

    #[test]
    fn a_bind_root_is_made_read_only() {
        let bind = mount("bind", &["rbind", "rw"]);
        assert_eq!(read_only(&[bind])[0].options, vec!["rbind", "ro"]);
    }

    #[test]
    fn options_split_into_flags_and_data() {
        let (flags, data) =
            flags_and_data(&["ro".into(), "lowerdir=/a:/b".into(), "index=off".into()]);
        assert_eq!(flags, MsFlags::MS_RDONLY);
        assert_eq!(data, "lowerdir=/a:/b,index=off");
    }

    #[test]
    fn files_are_read_inside_the_root_even_through_absolute_symlinks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        std::fs::create_dir_all(root.join("etc")).expect("etc");
        std::fs::write(root.join("etc/real-passwd"), "app:x:5:6::/:/bin/sh\n").expect("write");
        // An absolute link is resolved against the image root, not the host's /etc.
        std::os::unix::fs::symlink("/etc/real-passwd", root.join("etc/passwd")).expect("link");
        std::os::unix::fs::symlink("/../../../../etc/shadow", root.join("etc/group"))
            .expect("link");
        let fd: OwnedFd = std::fs::File::open(root).expect("open").into();
        assert_eq!(
            read_in_root(&fd, "/etc/passwd").expect("read").as_deref(),
            Some("app:x:5:6::/:/bin/sh\n")
        );
        assert_eq!(read_in_root(&fd, "/etc/group").expect("read"), None);
        assert_eq!(read_in_root(&fd, "/etc/nothing").expect("read"), None);
    }
}
