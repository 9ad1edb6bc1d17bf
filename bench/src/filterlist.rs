//! The list of filters the benchmarks measure: `bench/filters.txt`, built in, or the
//! expressions given on the command line.

use crate::traffic;

/// The committed list, compiled in so that the binary runs from anywhere.
const BUILTIN: &str = include_str!("../filters.txt");

/// Largest host set `--quick` builds: libpcap's compile time grows with the cube of the
/// set's size (500 hosts take seconds), which a smoke run cannot afford.
pub const QUICK_MAX_HOSTS: usize = 50;

/// One filter to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchFilter {
    /// What the report prints (the expression, or a summary of a generated one).
    pub label: String,
    /// The tcpdump expression.
    pub expr: String,
}

impl BenchFilter {
    pub fn plain(expr: &str) -> BenchFilter {
        BenchFilter { label: expr.to_string(), expr: expr.to_string() }
    }

    /// `host a or host b or ...` with `count` hosts.
    pub fn host_set(count: usize) -> BenchFilter {
        BenchFilter {
            label: format!("host set: {count} hosts (host 10.1.0.1 or host 10.1.0.4 or ...)"),
            expr: traffic::host_set_expr(count),
        }
    }
}

impl BenchFilter {
    /// Issue 13's firewall-style list: `not (not (host A1 and port P1) and not (host A2 and
    /// port P2) and ...)` with `pairs` distinct hosts (10.0.0.1 on) and ports (1 on).
    pub fn firewall(pairs: usize) -> BenchFilter {
        let parts: Vec<String> = (0..pairs)
            .map(|i| {
                let [_, x, y, z] = (i as u32 + 1).to_be_bytes();
                format!("not (host 10.{x}.{y}.{z} and port {})", 1 + i % 65_000)
            })
            .collect();
        BenchFilter {
            label: format!("firewall list: {pairs} pairs"),
            expr: format!("not ({})", parts.join(" and ")),
        }
    }
}

/// The filters: those given, or the built-in list.
pub fn filters(given: &[String], quick: bool) -> Result<Vec<BenchFilter>, String> {
    if given.is_empty() {
        parse(BUILTIN, quick)
    } else {
        given.iter().map(|g| parse_line(g, quick, 0)).collect()
    }
}

/// Reads the list format: one expression per line, `#` comments, `@hosts N`.
pub fn parse(text: &str, quick: bool) -> Result<Vec<BenchFilter>, String> {
    text.lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
        .map(|(n, line)| parse_line(line, quick, n))
        .collect()
}

fn parse_line(line: &str, quick: bool, line_no: usize) -> Result<BenchFilter, String> {
    let Some(rest) = line.strip_prefix("@hosts") else {
        return Ok(BenchFilter::plain(line));
    };
    let place = if line_no > 0 { format!("filters.txt:{line_no}: ") } else { String::new() };
    let count: usize = rest
        .trim()
        .parse()
        .map_err(|_| format!("{place}`@hosts N` needs a count, not `{}`", rest.trim()))?;
    if count == 0 {
        return Err(format!("{place}`@hosts 0` is an empty filter"));
    }
    Ok(BenchFilter::host_set(if quick { count.min(QUICK_MAX_HOSTS) } else { count }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_list_parses_and_names_the_issue_filters() {
        let list = parse(BUILTIN, false).unwrap();
        assert!(list.len() >= 22, "{} filters", list.len());
        assert_eq!(list[0].expr, "port 22");
        assert!(list[1].expr.starts_with("tcp port 22 and"));
        let set = list.iter().find(|f| f.label.starts_with("host set")).unwrap();
        assert_eq!(set.expr.matches(" or ").count(), 499);
        let quick = parse(BUILTIN, true).unwrap();
        let set = quick.iter().find(|f| f.label.starts_with("host set")).unwrap();
        assert_eq!(set.expr.matches(" or ").count(), QUICK_MAX_HOSTS - 1);
    }

    #[test]
    fn directives_are_checked() {
        assert!(parse("@hosts x", false).unwrap_err().contains("filters.txt:1"));
        assert!(parse("\n@hosts 0", false).unwrap_err().contains("filters.txt:2"));
        assert_eq!(filters(&["ip".into()], false).unwrap(), vec![BenchFilter::plain("ip")]);
    }
}
