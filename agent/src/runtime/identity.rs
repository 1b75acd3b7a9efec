//! Who a container's first process runs as: the security context and the image's `USER`,
//! resolved against the image's own `/etc/passwd` and `/etc/group`, as the kubelet and
//! containerd's CRI plugin do between them.
//!
//! Planner: pure, no I/O.
//!
//! The pipeline, step by step:
//! 1. The kubelet takes `runAsUser` (container over pod); without it, the image's `USER` with
//!    any `:group` cut off: a number is a uid, anything else a user name, nothing is uid 0
//!    ([`effective_user`]).
//! 2. CRI joins it with `runAsGroup` into `user[:group]` ([`user_string`]), so an image's own
//!    group is dropped as upstream drops it; the primary group then comes from the image's
//!    passwd entry of that user (0 when the image has none).
//! 3. The names in it are looked up in the image's files; a name that is missing is an error
//!    (a number needs no entry).
//! 4. Supplementary groups: the primary group first, then (unless `supplementalGroupsPolicy`
//!    is `Strict`) the groups of the image's `/etc/group` that list the user as a member
//!    (but not one named as the user: that is its own group, as containerd skips it), then the pod's `supplementalGroups` and `fsGroup`.
//!
//! Worked example: `USER appuser`, passwd `appuser:x:1234:2345:…`, group `extra:x:3456:appuser`,
//! pod `supplementalGroups: [4000]` → uid 1234, gid 2345, groups 2345, 3456, 4000.

/// One line of `/etc/passwd`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PasswdEntry {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// One line of `/etc/group`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupEntry {
    pub name: String,
    pub gid: u32,
    pub members: Vec<String>,
}

/// The image's user database (empty when the image has no such files).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserDb {
    pub passwd: Vec<PasswdEntry>,
    pub groups: Vec<GroupEntry>,
}

impl UserDb {
    /// Parses the two files' text; malformed lines are skipped, as libc and runc skip them.
    pub fn parse(passwd: &str, group: &str) -> UserDb {
        UserDb {
            passwd: passwd.lines().filter_map(passwd_line).collect(),
            groups: group.lines().filter_map(group_line).collect(),
        }
    }
}

/// The fields of a non-comment line after its name and password: `(name, rest)`.
fn entry(line: &str) -> Option<(String, std::str::Split<'_, char>)> {
    let line = line.trim_end();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let mut parts = line.split(':');
    let name = parts.next()?.to_string();
    let _password = parts.next()?;
    Some((name, parts))
}

fn passwd_line(line: &str) -> Option<PasswdEntry> {
    let (name, mut parts) = entry(line)?;
    let uid = parts.next()?.parse().ok()?;
    let gid = parts.next()?.parse().ok()?;
    Some(PasswdEntry { name, uid, gid })
}

fn group_line(line: &str) -> Option<GroupEntry> {
    let (name, mut parts) = entry(line)?;
    let gid = parts.next()?.parse().ok()?;
    let members = parts
        .next()
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(String::from)
        .collect();
    Some(GroupEntry { name, gid, members })
}

/// What the kubelet passes to the runtime as the user: a uid or a user name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EffectiveUser {
    Uid(u32),
    Name(String),
}

/// Step 1: `runAsUser`, else the image's `USER` without its group; root when neither says.
/// A number too large for a uid is kept as a name, so it fails the lookup with its spelling.
pub fn effective_user(run_as_user: Option<u32>, image_user: &str) -> EffectiveUser {
    if let Some(uid) = run_as_user {
        return EffectiveUser::Uid(uid);
    }
    let user = image_user.trim().split(':').next().unwrap_or("");
    if user.is_empty() {
        return EffectiveUser::Uid(0);
    }
    match user.parse() {
        Ok(uid) => EffectiveUser::Uid(uid),
        Err(_) => EffectiveUser::Name(user.to_string()),
    }
}

/// Step 2: CRI's `user[:group]` string.
pub fn user_string(user: &EffectiveUser, run_as_group: Option<u32>) -> String {
    let user = match user {
        EffectiveUser::Uid(uid) => uid.to_string(),
        EffectiveUser::Name(name) => name.clone(),
    };
    match run_as_group {
        Some(gid) => format!("{user}:{gid}"),
        None => user,
    }
}

/// The process's ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups, the primary group first, each once.
    pub additional_gids: Vec<u32>,
}

/// What the resolution needs besides the image's files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserRequest {
    pub image_user: String,
    pub run_as_user: Option<u32>,
    pub run_as_group: Option<u32>,
    /// The pod's `supplementalGroups`, then its `fsGroup`.
    pub supplemental_groups: Vec<u32>,
    /// `supplementalGroupsPolicy: Strict`: no groups from the image's `/etc/group`.
    pub strict_groups: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error("unable to find user {0}: no matching entries in passwd file")]
    UnknownUser(String),
    #[error("unable to find group {0}: no matching entries in group file")]
    UnknownGroup(String),
}

/// Steps 2–4: the process's uid, gid and supplementary groups.
pub fn resolve(request: &UserRequest, db: &UserDb) -> Result<Identity, IdentityError> {
    let user = effective_user(request.run_as_user, &request.image_user);
    let spec = user_string(&user, request.run_as_group);
    let (user_part, group_part) = match spec.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (spec.as_str(), None),
    };
    let by_uid = |uid: u32| db.passwd.iter().find(|p| p.uid == uid);
    let (uid, entry) = match user_part.parse::<u32>() {
        Ok(uid) => (uid, by_uid(uid)),
        Err(_) => {
            let entry = db
                .passwd
                .iter()
                .find(|p| p.name == user_part)
                .ok_or_else(|| IdentityError::UnknownUser(user_part.to_string()))?;
            (entry.uid, Some(entry))
        }
    };
    let gid = match group_part {
        None => entry.map_or(0, |e| e.gid),
        Some(g) => match g.parse::<u32>() {
            Ok(gid) => gid,
            Err(_) => {
                db.groups
                    .iter()
                    .find(|e| e.name == g)
                    .ok_or_else(|| IdentityError::UnknownGroup(g.to_string()))?
                    .gid
            }
        },
    };
    let mut groups = vec![gid];
    if !request.strict_groups
        && let Some(name) = entry.map(|e| e.name.as_str())
    {
        groups.extend(
            db.groups
                .iter()
                .filter(|g| g.name != name && g.members.iter().any(|m| m == name))
                .map(|g| g.gid),
        );
    }
    groups.extend(request.supplemental_groups.iter().copied());
    let mut seen = std::collections::HashSet::new();
    groups.retain(|g| seen.insert(*g));
    Ok(Identity {
        uid,
        gid,
        additional_gids: groups,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
        nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\
        # a comment\n\
        broken line\n\
        appuser:x:1234:2345:app:/home/app:/bin/sh\n\
        redis:x:100:101::/var/lib/redis:/usr/sbin/nologin\n";
    const GROUP: &str = "root:x:0:\nnogroup:x:65534:\napp:x:2345:\n\
        extra:x:3456:appuser,redis\nredis:x:101:\nother:x:7000:someone\n";

    fn db() -> UserDb {
        UserDb::parse(PASSWD, GROUP)
    }

    fn request(image_user: &str) -> UserRequest {
        UserRequest {
            image_user: image_user.to_string(),
            ..UserRequest::default()
        }
    }

    fn ids(uid: u32, gid: u32, groups: &[u32]) -> Identity {
        Identity {
            uid,
            gid,
            additional_gids: groups.to_vec(),
        }
    }

    #[test]
    fn files_parse_skipping_comments_and_malformed_lines() {
        let db = db();
        assert_eq!(db.passwd.len(), 4);
        assert_eq!(db.groups.len(), 6);
        assert_eq!(db.groups[3].members, vec!["appuser", "redis"]);
    }

    #[test]
    fn the_kubelet_passes_runasuser_then_the_image_user_without_its_group() {
        assert_eq!(effective_user(Some(7), "appuser"), EffectiveUser::Uid(7));
        assert_eq!(effective_user(None, ""), EffectiveUser::Uid(0));
        assert_eq!(effective_user(None, "1234:2345"), EffectiveUser::Uid(1234));
        assert_eq!(
            effective_user(None, "nobody:nogroup"),
            EffectiveUser::Name("nobody".into())
        );
        assert_eq!(
            effective_user(None, "99999999999"),
            EffectiveUser::Name("99999999999".into())
        );
    }

    #[test]
    fn image_users_resolve_as_containerd_resolves_them() {
        let cases: &[(&str, Result<Identity, IdentityError>)] = &[
            ("", Ok(ids(0, 0, &[0]))),
            ("root", Ok(ids(0, 0, &[0]))),
            ("appuser", Ok(ids(1234, 2345, &[2345, 3456]))),
            // The image's group is dropped by the kubelet; passwd gives the primary group.
            ("appuser:root", Ok(ids(1234, 2345, &[2345, 3456]))),
            ("1234:2345", Ok(ids(1234, 2345, &[2345, 3456]))),
            ("1234", Ok(ids(1234, 2345, &[2345, 3456]))),
            ("nobody:nogroup", Ok(ids(65534, 65534, &[65534]))),
            ("redis", Ok(ids(100, 101, &[101, 3456]))),
            // A uid without an entry runs with gid 0 and no names to find groups by.
            ("4242", Ok(ids(4242, 0, &[0]))),
            (
                "ghost",
                Err(IdentityError::UnknownUser("ghost".to_string())),
            ),
        ];
        for (user, want) in cases {
            assert_eq!(&resolve(&request(user), &db()), want, "USER {user:?}");
        }
    }

    #[test]
    fn run_as_user_and_group_override_the_image() {
        let r = UserRequest {
            run_as_user: Some(1000),
            run_as_group: Some(3000),
            ..request("appuser")
        };
        assert_eq!(resolve(&r, &db()), Ok(ids(1000, 3000, &[3000])));
        let r = UserRequest {
            run_as_group: Some(3000),
            ..request("appuser")
        };
        assert_eq!(resolve(&r, &db()), Ok(ids(1234, 3000, &[3000, 3456])));
        let r = UserRequest {
            run_as_user: Some(1234),
            ..request("")
        };
        assert_eq!(resolve(&r, &db()), Ok(ids(1234, 2345, &[2345, 3456])));
    }

    #[test]
    fn pod_groups_follow_the_images_and_strict_leaves_the_images_out() {
        let r = UserRequest {
            supplemental_groups: vec![4000, 3456, 2000],
            ..request("appuser")
        };
        assert_eq!(
            resolve(&r, &db()),
            Ok(ids(1234, 2345, &[2345, 3456, 4000, 2000]))
        );
        let r = UserRequest {
            strict_groups: true,
            supplemental_groups: vec![4000],
            ..request("appuser")
        };
        assert_eq!(resolve(&r, &db()), Ok(ids(1234, 2345, &[2345, 4000])));
    }

    #[test]
    fn an_image_without_user_files_resolves_numbers_only() {
        let empty = UserDb::default();
        assert_eq!(resolve(&request("1234"), &empty), Ok(ids(1234, 0, &[0])));
        assert_eq!(
            resolve(&request("app"), &empty),
            Err(IdentityError::UnknownUser("app".to_string()))
        );
        assert_eq!(
            resolve(
                &UserRequest {
                    run_as_group: Some(5),
                    ..request("7")
                },
                &empty
            ),
            Ok(ids(7, 5, &[5]))
        );
    }
}
