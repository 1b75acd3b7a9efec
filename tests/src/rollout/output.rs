//! Reading kubectl's rollout output back: `rollout history` lines, `describe`'s scaling
//! events, and the shape of a pod-template-hash. Pure.

/// `kubectl rollout history` output: `(revision, change cause)` per line. The first line
/// must name `kind_name` (`deployment.apps/nginx-deployment`), the second be the header.
pub fn history(out: &str, kind_name: &str) -> Result<Vec<(u64, String)>, String> {
    let mut lines = out.lines().filter(|l| !l.trim().is_empty());
    if lines.next().map(str::trim) != Some(kind_name) {
        return Err(format!("first line is not {kind_name:?}: {out:?}"));
    }
    let header: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    if header != ["REVISION", "CHANGE-CAUSE"] {
        return Err(format!("header {header:?}: {out:?}"));
    }
    lines
        .map(|l| {
            let l = l.trim();
            let (rev, cause) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
            let rev = rev
                .parse()
                .map_err(|e| format!("revision {rev:?}: {e}: {out:?}"))?;
            Ok((rev, cause.trim().to_string()))
        })
        .collect()
}

/// Whether `kubectl describe` output lists a `Normal ScalingReplicaSet` event from the
/// deployment-controller with message `msg`; a resize message may go on with ` from N`
/// (`Scaled down replica set web-abc to 2 from 3`).
pub fn scaling_event(describe: &str, msg: &str) -> bool {
    describe.lines().any(|l| {
        let words: Vec<&str> = l.split_whitespace().collect();
        words.starts_with(&["Normal", "ScalingReplicaSet"])
            && words.contains(&"deployment-controller")
            && (l.trim_end().ends_with(msg) || l.contains(&format!("{msg} from ")))
    })
}

/// Whether `s` looks like a pod-template-hash: upstream's safe encoding of a 32-bit FNV hash,
/// at most 10 characters from an alphabet without vowels, `0`, `1` and `3` (so it never spells
/// words).
pub fn is_template_hash(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 10
        && s.chars()
            .all(|ch| "bcdfghjklmnpqrstvwxz2456789".contains(ch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_reads_revisions_and_change_causes() {
        let out = "deployment.apps/nginx-deployment \nREVISION  CHANGE-CAUSE\n1         <none>\n\
                   2         kubectl set image x=y\n\n";
        let h = history(out, "deployment.apps/nginx-deployment").unwrap();
        assert_eq!(
            h,
            [
                (1, "<none>".to_string()),
                (2, "kubectl set image x=y".to_string())
            ]
        );
    }

    #[test]
    fn history_of_another_object_or_without_header_is_an_error() {
        let out = "deployment.apps/web\nREVISION  CHANGE-CAUSE\n1  <none>\n";
        assert!(history(out, "deployment.apps/nginx-deployment").is_err());
        assert!(history("deployment.apps/web\n1  <none>\n", "deployment.apps/web").is_err());
        assert!(
            history(
                "deployment.apps/web\nREVISION  CHANGE-CAUSE\nx  y\n",
                "deployment.apps/web"
            )
            .is_err()
        );
    }

    #[test]
    fn scaling_events_match_whole_sizes_with_or_without_from() {
        let describe = "\
Events:
  Type    Reason             Age   From                   Message
  ----    ------             ----  ----                   -------
  Normal  ScalingReplicaSet  33s   deployment-controller  Scaled up replica set web-abc to 3
  Normal  ScalingReplicaSet  31s   deployment-controller  Scaled down replica set web-abc to 1 from 2
";
        assert!(scaling_event(
            describe,
            "Scaled up replica set web-abc to 3"
        ));
        assert!(scaling_event(
            describe,
            "Scaled down replica set web-abc to 1"
        ));
        assert!(!scaling_event(
            describe,
            "Scaled down replica set web-abc to 2"
        ));
        assert!(!scaling_event(
            describe,
            "Scaled up replica set web-abc to 1"
        ));
        assert!(!scaling_event(describe, "Scaled up replica set web-ab"));
    }

    #[test]
    fn template_hashes_use_the_safe_alphabet() {
        assert!(is_template_hash("75675f5897"));
        assert!(is_template_hash("cf4cd4db7"));
        for bad in ["", "abc", "75675f58970", "7567-5897", "1234"] {
            assert!(!is_template_hash(bad), "{bad}");
        }
    }
}
