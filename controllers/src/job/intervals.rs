//! Completion indexes as ordered, disjoint intervals (upstream `orderedIntervals`): how
//! `status.completedIndexes`, `status.failedIndexes` and a success policy's `succeededIndexes`
//! are read and written.
//!
//! Worked example: indexes {0, 1, 2, 3, 5, 7, 8} are the intervals [0,3] [5,5] [7,8] and print
//! as "0-3,5,7,8": an interval of two prints as two numbers, not as a range (upstream's
//! `String`). Parsing drops what lies at or past `completions` and merges touching intervals.
//!
//! Planner: pure, no I/O.

use std::fmt;

/// Indexes as sorted, disjoint, non-touching `(first, last)` intervals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Intervals(Vec<(i32, i32)>);

impl Intervals {
    /// Reads an interval list ("1,3-5"); indexes at or past `completions` are dropped, a
    /// malformed piece is skipped (upstream logs and ignores it).
    pub fn parse(s: &str, completions: i32) -> Intervals {
        let mut out: Vec<(i32, i32)> = Vec::new();
        if s.is_empty() {
            return Intervals(out);
        }
        for piece in s.split(',') {
            let mut limits = piece.splitn(2, '-');
            let Some(Ok(first)) = limits.next().map(str::parse::<i32>) else {
                continue;
            };
            if first >= completions {
                break;
            }
            let last = match limits.next() {
                Some(l) => match l.parse::<i32>() {
                    Ok(l) => l.min(completions - 1),
                    Err(_) => continue,
                },
                None => first,
            };
            match out.last_mut() {
                Some(prev) if prev.1 == first - 1 => prev.1 = last,
                _ => out.push((first, last)),
            }
        }
        Intervals(out)
    }

    /// The intervals of sorted indexes.
    pub fn from_sorted(indexes: impl IntoIterator<Item = i32>) -> Intervals {
        Intervals::default().with_sorted(indexes)
    }

    /// These intervals plus `indexes` (in increasing order).
    pub fn with_sorted(&self, indexes: impl IntoIterator<Item = i32>) -> Intervals {
        let single: Vec<(i32, i32)> = indexes.into_iter().map(|i| (i, i)).collect();
        self.merge(&Intervals(single))
    }

    /// The union of two interval lists.
    pub fn merge(&self, other: &Intervals) -> Intervals {
        let mut all: Vec<(i32, i32)> = self.0.iter().chain(&other.0).copied().collect();
        all.sort_unstable();
        let mut out: Vec<(i32, i32)> = Vec::with_capacity(all.len());
        for (first, last) in all {
            match out.last_mut() {
                Some(prev) if first <= prev.1.saturating_add(1) => prev.1 = prev.1.max(last),
                _ => out.push((first, last)),
            }
        }
        Intervals(out)
    }

    /// How many indexes the intervals hold.
    pub fn total(&self) -> i32 {
        self.0.iter().map(|(f, l)| l - f + 1).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn has(&self, ix: i32) -> bool {
        let at = self.0.partition_point(|(_, last)| *last < ix);
        self.0.get(at).is_some_and(|(first, _)| *first <= ix)
    }

    /// How many indexes the two lists have in common.
    pub fn overlap(&self, other: &Intervals) -> i32 {
        let mut n = 0;
        for (a1, a2) in &self.0 {
            for (b1, b2) in &other.0 {
                n += ((*a2).min(*b2) - (*a1).max(*b1) + 1).max(0);
            }
        }
        n
    }

    /// Every index, in order.
    pub fn indexes(&self) -> impl Iterator<Item = i32> + '_ {
        self.0.iter().flat_map(|(f, l)| *f..=*l)
    }
}

impl fmt::Display for Intervals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (first, last)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{first}")?;
            if last > first {
                let sep = if *last == first + 1 { "," } else { "-" };
                write!(f, "{sep}{last}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_print_as_upstreams_interval_list() {
        let cases: [(&str, &[i32], &str); 6] = [
            ("nothing prints as the empty string", &[], ""),
            ("one index prints alone", &[4], "4"),
            ("a run of four prints as a range", &[0, 1, 2, 3, 5], "0-3,5"),
            ("a run of two prints as two numbers", &[7, 8], "7,8"),
            ("every other index", &[1, 3, 5, 7, 9], "1,3,5,7,9"),
            (
                "runs and singles mixed",
                &[0, 1, 2, 4, 6, 7, 9],
                "0-2,4,6,7,9",
            ),
        ];
        for (name, indexes, want) in cases {
            let got = Intervals::from_sorted(indexes.iter().copied()).to_string();
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn lists_are_read_within_the_completions() {
        let cases = [
            ("a plain list", "0,2-3", 10, "0,2,3", 3),
            ("touching pieces merge", "0-2,3,4-5", 10, "0-5", 6),
            (
                "indexes past completions are dropped",
                "1,3-12,15",
                5,
                "1,3,4",
                3,
            ),
            ("malformed pieces are skipped", "1,x,3-y,5", 10, "1,5", 2),
            ("the empty string is no index", "", 10, "", 0),
        ];
        for (name, s, completions, want, total) in cases {
            let i = Intervals::parse(s, completions);
            assert_eq!(i.to_string(), want, "{name}");
            assert_eq!(i.total(), total, "{name}");
        }
    }

    #[test]
    fn adding_merging_and_membership() {
        let a = Intervals::parse("0-3,7", 10).with_sorted([4, 9]);
        assert_eq!(a.to_string(), "0-4,7,9");
        assert!(a.has(0) && a.has(4) && a.has(9) && !a.has(5) && !a.has(8));
        let b = a.merge(&Intervals::parse("5,8", 10));
        assert_eq!(b.to_string(), "0-5,7-9");
        assert_eq!(b.indexes().collect::<Vec<_>>(), [0, 1, 2, 3, 4, 5, 7, 8, 9]);
        assert_eq!(a.overlap(&Intervals::parse("2-8", 10)), 4);
    }
}
