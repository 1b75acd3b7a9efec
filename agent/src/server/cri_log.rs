//! The CRI container log format (`<RFC3339Nano> <stdout|stderr> <P|F> <text>`): parsing lines
//! and rendering them the way `kubectl logs` expects (with or without timestamps, joining
//! partial lines, honouring `sinceSeconds`, `sinceTime` and `tailLines`). Pure.

/// One parsed log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine<'a> {
    pub timestamp: &'a str,
    pub stream: &'a str,
    /// `false` for a partial line (`P`): the text continues in the next entry.
    pub full: bool,
    pub text: &'a str,
}

pub fn parse(line: &str) -> Option<LogLine<'_>> {
    let mut parts = line.splitn(4, ' ');
    let timestamp = parts.next()?;
    let stream = parts.next()?;
    let tag = parts.next()?;
    let text = parts.next().unwrap_or_default();
    if !matches!(stream, "stdout" | "stderr") {
        return None;
    }
    Some(LogLine {
        timestamp,
        stream,
        full: !tag.starts_with('P'),
        text,
    })
}

/// Formats one entry for a `kubectl logs` reader into `out` (no allocation per line): a
/// partial entry is emitted without its newline.
pub fn render_into(line: &LogLine<'_>, timestamps: bool, out: &mut String) {
    if timestamps {
        out.push_str(line.timestamp);
        out.push(' ');
    }
    out.push_str(line.text);
    if line.full {
        out.push('\n');
    }
}

/// Whether the entry is at or after `since` (RFC3339 timestamps compare by value).
pub fn at_or_after(line: &LogLine<'_>, since: Option<jiff::Timestamp>) -> bool {
    match since {
        None => true,
        Some(s) => line
            .timestamp
            .parse::<jiff::Timestamp>()
            .is_ok_and(|t| t >= s),
    }
}

/// The entries of `content` to show, after `since` and the last `tail` lines.
pub fn select(
    content: &str,
    since: Option<jiff::Timestamp>,
    tail: Option<usize>,
    timestamps: bool,
) -> String {
    let lines: Vec<LogLine<'_>> = content
        .lines()
        .filter_map(parse)
        .filter(|l| at_or_after(l, since))
        .collect();
    let start = tail.map_or(0, |t| lines.len().saturating_sub(t));
    let mut out = String::with_capacity(if start == 0 { content.len() } else { 0 });
    for l in &lines[start..] {
        render_into(l, timestamps, &mut out);
    }
    out
}

/// Formats a line for writing into the log file.
pub fn format(ts: jiff::Timestamp, stream: &str, full: bool, text: &str) -> String {
    format!(
        "{} {stream} {} {text}\n",
        ts.strftime("%Y-%m-%dT%H:%M:%S.%9fZ"),
        if full { "F" } else { "P" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "2026-11-22T09:00:00.000000001Z stdout F one\n2026-11-22T09:00:01.000000000Z stderr F two\n2026-11-22T09:00:02.000000000Z stdout P par\n2026-11-22T09:00:02.100000000Z stdout F tial\n";

    #[test]
    fn lines_render_without_timestamps_by_default_and_partials_join() {
        assert_eq!(select(LOG, None, None, false), "one\ntwo\npartial\n");
    }

    #[test]
    fn tail_keeps_the_last_entries() {
        assert_eq!(select(LOG, None, Some(1), false), "tial\n");
    }

    #[test]
    fn timestamps_prefix_each_entry() {
        assert!(
            select(LOG, None, Some(1), true).starts_with("2026-11-22T09:00:02.100000000Z tial")
        );
    }

    #[test]
    fn since_drops_older_entries() {
        let since: jiff::Timestamp = "2026-11-22T09:00:01Z".parse().unwrap();
        assert_eq!(select(LOG, Some(since), None, false), "two\npartial\n");
    }

    #[test]
    fn written_lines_parse_back() {
        let ts: jiff::Timestamp = "2026-11-22T09:00:00Z".parse().unwrap();
        let line = format(ts, "stdout", true, "hello");
        assert_eq!(line, "2026-11-22T09:00:00.000000000Z stdout F hello\n");
        let parsed = parse(line.trim_end()).unwrap();
        assert_eq!(
            (parsed.stream, parsed.text, parsed.full),
            ("stdout", "hello", true)
        );
    }
}
