//! Planner: pure, no I/O.
//!
//! How a `hostPath` volume's path is made ready, from its `type` and what is at the path now.
//! Two rules, applied in the order the kubelet and containerd apply them:
//!
//! * [`plan_set_up`]: the kubelet's volume set-up (v1.31 `hostPathMounter.SetUp`, before the
//!   pod's sandbox exists). An unset type is not checked. `DirectoryOrCreate` and
//!   `FileOrCreate` make a missing path (a directory 0755 with its parents, as `MkdirAll`; an
//!   empty 0644 file whose parent must already exist, as `open(O_CREAT)`), owned by the agent
//!   as upstream's are by the kubelet; every other typed path must exist and be of its type,
//!   else upstream's `hostPath type check failed: <path> is not a <type>`. A failure keeps the
//!   pod from starting, reported as the kubelet's `FailedMount` event ([`failed_mount_message`]).
//! * [`plan_bind_source`]: containerd's CRI, creating each container's bind mounts: a source
//!   that does not exist is made a directory (0755), as Docker did. This is what lets an untyped
//!   hostPath of a directory the host lacks (`/var/lib/docker/containers` on a host without
//!   Docker) start.

/// A hostPath volume's `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathType {
    /// `""` or absent: no check (backwards compatibility).
    Unset,
    DirectoryOrCreate,
    Directory,
    FileOrCreate,
    File,
    Socket,
    CharDevice,
    BlockDevice,
}

impl PathType {
    /// Parses the API's spelling; an unknown type is upstream's `<type> is an invalid volume
    /// type` (API validation refuses it first, so only a stored object from elsewhere has one).
    pub fn parse(s: &str) -> Result<PathType, String> {
        Ok(match s {
            "" => PathType::Unset,
            "DirectoryOrCreate" => PathType::DirectoryOrCreate,
            "Directory" => PathType::Directory,
            "FileOrCreate" => PathType::FileOrCreate,
            "File" => PathType::File,
            "Socket" => PathType::Socket,
            "CharDevice" => PathType::CharDevice,
            "BlockDevice" => PathType::BlockDevice,
            other => return Err(format!("{other} is an invalid volume type")),
        })
    }
}

/// What is at a path, following symlinks (as `stat(2)`, which upstream's checks use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// Nothing, or it cannot be looked at (upstream's `PathExists` is false for both).
    Missing,
    Directory,
    File,
    Socket,
    CharDevice,
    BlockDevice,
    /// Something else (a FIFO): it exists, and upstream's `File` check accepts it (a "file" is
    /// anything that is not a directory).
    Other,
}

/// What to do to the path before it is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Use it as it is.
    Use,
    /// Make it a directory, with its missing parents.
    MakeDirectory,
    /// Make it an empty file (its parent must exist).
    MakeFile,
}

/// The kubelet's set-up of a hostPath volume of type `t` at `path` where `found` is: the step,
/// or the check's error.
pub fn plan_set_up(path: &str, t: PathType, found: Found) -> Result<Step, String> {
    let not_a = |what: &str| {
        Err(format!(
            "hostPath type check failed: {path} is not a {what}"
        ))
    };
    match (t, found) {
        (PathType::Unset, _) => Ok(Step::Use),
        (PathType::DirectoryOrCreate, Found::Missing) => Ok(Step::MakeDirectory),
        (PathType::FileOrCreate, Found::Missing) => Ok(Step::MakeFile),
        (PathType::Directory | PathType::DirectoryOrCreate, Found::Directory) => Ok(Step::Use),
        (PathType::Directory | PathType::DirectoryOrCreate, _) => not_a("directory"),
        (PathType::File | PathType::FileOrCreate, Found::Missing | Found::Directory) => {
            not_a("file")
        }
        (PathType::File | PathType::FileOrCreate, _) => Ok(Step::Use),
        (PathType::Socket, Found::Socket) => Ok(Step::Use),
        (PathType::Socket, _) => not_a("socket file"),
        (PathType::CharDevice, Found::CharDevice) => Ok(Step::Use),
        (PathType::CharDevice, _) => not_a("character device"),
        (PathType::BlockDevice, Found::BlockDevice) => Ok(Step::Use),
        (PathType::BlockDevice, _) => not_a("block device"),
    }
}

/// containerd's rule for a bind mount's source when it creates the container: a missing one is
/// made a directory.
pub fn plan_bind_source(found: Found) -> Step {
    match found {
        Found::Missing => Step::MakeDirectory,
        _ => Step::Use,
    }
}

/// The kubelet's `FailedMount` event message for a volume whose set-up failed with `error`
/// (`MountVolume.SetUp failed for volume "<name>" : <error>`, the space before the colon
/// included).
pub fn failed_mount_message(volume: &str, error: &str) -> String {
    format!("MountVolume.SetUp failed for volume \"{volume}\" : {error}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_FOUND: [Found; 7] = [
        Found::Missing,
        Found::Directory,
        Found::File,
        Found::Socket,
        Found::CharDevice,
        Found::BlockDevice,
        Found::Other,
    ];

    #[test]
    fn every_api_type_parses_and_an_unknown_one_is_upstreams_error() {
        for (s, t) in [
            ("", PathType::Unset),
            ("DirectoryOrCreate", PathType::DirectoryOrCreate),
            ("Directory", PathType::Directory),
            ("FileOrCreate", PathType::FileOrCreate),
            ("File", PathType::File),
            ("Socket", PathType::Socket),
            ("CharDevice", PathType::CharDevice),
            ("BlockDevice", PathType::BlockDevice),
        ] {
            assert_eq!(PathType::parse(s), Ok(t), "{s:?}");
        }
        assert_eq!(
            PathType::parse("directory"),
            Err("directory is an invalid volume type".to_string())
        );
    }

    #[test]
    fn an_unset_type_is_never_checked_at_set_up() {
        for found in ALL_FOUND {
            assert_eq!(plan_set_up("/p", PathType::Unset, found), Ok(Step::Use));
        }
    }

    #[test]
    fn the_set_up_table_is_the_kubelets_type_check() {
        use Found as F;
        use PathType as T;
        let ok = |s| Ok(s);
        let not_a = |what: &str| Err(format!("hostPath type check failed: /p is not a {what}"));
        let table: Vec<(T, F, Result<Step, String>)> = vec![
            (T::DirectoryOrCreate, F::Missing, ok(Step::MakeDirectory)),
            (T::DirectoryOrCreate, F::Directory, ok(Step::Use)),
            (T::DirectoryOrCreate, F::File, not_a("directory")),
            (T::DirectoryOrCreate, F::Socket, not_a("directory")),
            (T::Directory, F::Directory, ok(Step::Use)),
            (T::Directory, F::Missing, not_a("directory")),
            (T::Directory, F::File, not_a("directory")),
            (T::Directory, F::BlockDevice, not_a("directory")),
            (T::FileOrCreate, F::Missing, ok(Step::MakeFile)),
            (T::FileOrCreate, F::File, ok(Step::Use)),
            (T::FileOrCreate, F::Directory, not_a("file")),
            (T::File, F::File, ok(Step::Use)),
            (T::File, F::Missing, not_a("file")),
            (T::File, F::Directory, not_a("file")),
            // Upstream's "file" is anything that exists and is not a directory.
            (T::File, F::Socket, ok(Step::Use)),
            (T::File, F::CharDevice, ok(Step::Use)),
            (T::File, F::Other, ok(Step::Use)),
            (T::Socket, F::Socket, ok(Step::Use)),
            (T::Socket, F::Missing, not_a("socket file")),
            (T::Socket, F::File, not_a("socket file")),
            (T::CharDevice, F::CharDevice, ok(Step::Use)),
            (T::CharDevice, F::BlockDevice, not_a("character device")),
            (T::CharDevice, F::Missing, not_a("character device")),
            (T::BlockDevice, F::BlockDevice, ok(Step::Use)),
            (T::BlockDevice, F::CharDevice, not_a("block device")),
            (T::BlockDevice, F::Directory, not_a("block device")),
        ];
        for (t, found, want) in table {
            assert_eq!(plan_set_up("/p", t, found), want, "{t:?} on {found:?}");
        }
    }

    #[test]
    fn a_missing_bind_source_becomes_a_directory_and_anything_else_is_used() {
        for found in ALL_FOUND {
            let want = if found == Found::Missing {
                Step::MakeDirectory
            } else {
                Step::Use
            };
            assert_eq!(plan_bind_source(found), want, "{found:?}");
        }
    }

    #[test]
    fn the_failed_mount_message_is_the_kubelets() {
        assert_eq!(
            failed_mount_message(
                "data",
                "hostPath type check failed: /srv is not a directory"
            ),
            "MountVolume.SetUp failed for volume \"data\" : hostPath type check failed: /srv is not a directory"
        );
    }
}
