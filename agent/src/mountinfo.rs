//! The host's mount table as `/proc/self/mountinfo` gives it: each mount's point (octal
//! escapes decoded) and whether it propagates (`shared:N`) or receives (`master:N`) mounts.
//! Read by the pod volumes' tmpfs handling and the runtime's propagation check; [`parse`] is
//! pure, [`read`] the one read of the table.

use std::path::PathBuf;

/// One line of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub point: PathBuf,
    pub shared: bool,
    pub slave: bool,
}

/// Decodes the octal escapes of a mountinfo field (`\040` is a space).
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push(d.iter().fold(0u8, |n, c| n.wrapping_mul(8) + (c - b'0')));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mounts of `mountinfo` text, in its order; malformed lines are skipped.
pub fn parse(mountinfo: &str) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let point = PathBuf::from(unescape(fields.get(4)?));
            let optional = fields.get(6..)?.iter().take_while(|f| **f != "-");
            let (mut shared, mut slave) = (false, false);
            for f in optional {
                shared |= f.starts_with("shared:");
                slave |= f.starts_with("master:");
            }
            Some(Mount {
                point,
                shared,
                slave,
            })
        })
        .collect()
}

/// This process's mount table text (empty if unreadable).
pub fn read() -> String {
    std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_give_points_with_escapes_decoded_and_propagation() {
        let m = parse(
            "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
             40 22 0:40 / /srv/private rw - tmpfs tmpfs rw\n\
             41 22 0:41 / /srv/slave rw master:7 - tmpfs tmpfs rw\n\
             42 22 0:42 / /srv/with\\040space rw shared:9 master:3 - tmpfs tmpfs rw\n\
             short line\n",
        );
        assert_eq!(m.len(), 4);
        assert!(m[0].shared && !m[0].slave);
        assert!(!m[1].shared && !m[1].slave);
        assert!(!m[2].shared && m[2].slave);
        assert_eq!(m[3].point, PathBuf::from("/srv/with space"));
        assert!(m[3].shared && m[3].slave);
    }
}
