//! Reads kubectl's column output (`get`, `api-resources`) back into headers and cells. kubectl
//! aligns columns with a tab writer (at least 3 spaces between columns), so a header may hold one
//! space ("NODE SELECTOR") and a cell may be empty (SHORTNAMES): cells are cut at the header's
//! column starts.

/// A parsed table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// Parses kubectl output whose first non-empty line is the header.
    pub fn parse(text: &str) -> Result<Table, String> {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let header = lines
            .next()
            .ok_or_else(|| format!("no header line in {text:?}"))?;
        let starts = column_starts(header);
        let headers = cut(header, &starts);
        let rows = lines.map(|l| cut(l, &starts)).collect();
        Ok(Table { headers, rows })
    }

    /// Index of the column named `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.headers.iter().position(|h| h == name)
    }

    /// The first row whose `column` cell equals `value`.
    pub fn row_where(&self, column: &str, value: &str) -> Option<&[String]> {
        let i = self.column(column)?;
        self.rows
            .iter()
            .find(|r| r.get(i).is_some_and(|c| c == value))
            .map(Vec::as_slice)
    }

    /// The `column` cell of the row whose NAME is `name`.
    pub fn cell(&self, name: &str, column: &str) -> Option<&str> {
        let i = self.column(column)?;
        self.row_where("NAME", name)?.get(i).map(String::as_str)
    }

    /// The values of one column, top to bottom.
    pub fn values(&self, column: &str) -> Vec<&str> {
        match self.column(column) {
            Some(i) => self
                .rows
                .iter()
                .filter_map(|r| r.get(i))
                .map(String::as_str)
                .collect(),
            None => Vec::new(),
        }
    }
}

/// Byte offsets where header columns start: position 0 and every word that follows two or more
/// spaces.
fn column_starts(header: &str) -> Vec<usize> {
    let bytes = header.as_bytes();
    let mut starts = Vec::new();
    let mut spaces = usize::MAX; // the line start counts as a column boundary
    for (i, &b) in bytes.iter().enumerate() {
        if b == b' ' {
            spaces = spaces.saturating_add(1);
        } else {
            if spaces >= 2 {
                starts.push(i);
            }
            spaces = 0;
        }
    }
    starts
}

/// Cuts `line` at `starts`; the last column runs to the end of the line.
fn cut(line: &str, starts: &[usize]) -> Vec<String> {
    starts
        .iter()
        .enumerate()
        .map(|(n, &from)| {
            let to = starts.get(n + 1).copied().unwrap_or(usize::MAX);
            let from = floor_char_boundary(line, from);
            let to = floor_char_boundary(line, to);
            line.get(from..to).unwrap_or("").trim().to_string()
        })
        .collect()
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Splits one line on runs of whitespace (for `get -w` lines, which are not aligned with the
/// header).
pub fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// Asserts that `kubectl describe` output contains each of `wants`.
#[track_caller]
pub fn assert_describes(describe: &str, wants: &[&str]) {
    for want in wants {
        assert!(
            describe.contains(want),
            "describe lacks {want:?}\n{describe}"
        );
    }
}

/// Whether `kubectl describe` output lists a `Normal` event with `reason` from component `from`
/// whose message contains `message`.
pub fn has_normal_event(describe: &str, reason: &str, from: &str, message: &str) -> bool {
    describe.lines().any(|l| {
        let w = words(l);
        w.starts_with(&["Normal", reason]) && w.contains(&from) && l.contains(message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_cells_and_headers_with_spaces_keep_their_columns() {
        let text = "\
NAME                     SHORTNAMES   APIVERSION   NAMESPACED   KIND
configmaps               cm           v1           true         ConfigMap
secrets                               v1           true         Secret
";
        let t = Table::parse(text).unwrap();
        assert_eq!(
            t.headers,
            ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
        );
        assert_eq!(t.rows[1], ["secrets", "", "v1", "true", "Secret"]);
        assert_eq!(t.cell("configmaps", "SHORTNAMES"), Some("cm"));
    }

    #[test]
    fn a_header_with_one_space_is_one_column() {
        let text = "\
NAME      DESIRED   CURRENT   READY   UP-TO-DATE   AVAILABLE   NODE SELECTOR   AGE
fluentd   0         0         0       0            0           <none>          3s
";
        let t = Table::parse(text).unwrap();
        assert_eq!(t.column("NODE SELECTOR"), Some(6));
        assert_eq!(t.cell("fluentd", "NODE SELECTOR"), Some("<none>"));
        assert_eq!(t.cell("fluentd", "AGE"), Some("3s"));
    }

    #[test]
    fn values_lists_a_column_top_to_bottom() {
        let t =
            Table::parse("NAME   STATUS   AGE\na      Active   1s\nb      Active   2s\n").unwrap();
        assert_eq!(t.values("NAME"), ["a", "b"]);
        assert_eq!(t.values("MISSING"), Vec::<&str>::new());
        assert_eq!(t.row_where("NAME", "c"), None);
    }

    #[test]
    fn output_without_a_header_is_an_error() {
        assert!(Table::parse("\n  \n").is_err());
    }

    #[test]
    fn words_splits_watch_lines_on_whitespace() {
        assert_eq!(
            words("ADDED   p1   0/1   Pending   0   0s"),
            ["ADDED", "p1", "0/1", "Pending", "0", "0s"]
        );
    }

    #[test]
    fn a_normal_event_is_found_by_reason_component_and_message() {
        // Two lines of the Events section (Type, Reason, Age, From, Message).
        let describe = "  Normal   SuccessfulCreate  5s   job-controller  Created pod: pi-x7k2p\n  \
                        Warning  BackoffLimit      1s   job-controller  Job has reached the \
                        specified backoff limit\n";
        assert!(has_normal_event(
            describe,
            "SuccessfulCreate",
            "job-controller",
            "Created pod: pi-"
        ));
        assert!(!has_normal_event(
            describe,
            "SuccessfulCreate",
            "daemonset-controller",
            "Created pod: pi-"
        ));
        assert!(!has_normal_event(
            describe,
            "BackoffLimit",
            "job-controller",
            "backoff limit"
        ));
        assert_describes(describe, &["Created pod: pi-", "BackoffLimit"]);
    }
}
