//! Dated records (`--record`): `bench/records/<date>-<suite>.txt`, a header naming the date,
//! the machine and the command, then every line the run printed. Records are for people
//! comparing releases; nothing reads them back.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Today's date (UTC) as YYYY-MM-DD.
pub fn today() -> String {
    date_of(SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()))
}

/// The date (UTC, YYYY-MM-DD) of a time in seconds since the Unix epoch.
pub fn date_of(secs: u64) -> String {
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Days since 1970-01-01 -> (year, month, day) in the proleptic Gregorian calendar
/// (the era-based method: 400-year eras of 146,097 days, years starting in March).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// One line describing the machine: CPU, cores, kernel, the kernel's BPF JIT setting,
/// libpcap, and how this binary was built.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown".into(), |s| s.trim().to_string());
    let jit = match weir_sys::kernel::jit_setting() {
        Some(0) => "off".to_string(),
        Some(n) => format!("on ({n})"),
        None => "unknown".into(),
    };
    let pcap = weir_sys::libpcap::load().map(|pcap| pcap.version()).unwrap_or_else(|e| e);
    format!(
        "{cpu}, {cores} logical CPUs; Linux {kernel}, bpf_jit_enable {jit}; {pcap}; weir-bench \
         {} build",
        profile()
    )
}

/// "release" or "debug": figures from a debug build say little.
pub fn profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

/// Writes `bench/records/<date>-<suite>.txt` (or `-2`, `-3` ... when that exists already)
/// and returns its path.
pub fn write(
    suite: &str,
    command: &str,
    notes: &[String],
    lines: &[String],
) -> Result<PathBuf, String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("records");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let date = today();
    let mut path = dir.join(format!("{date}-{suite}.txt"));
    let mut n = 2;
    while path.exists() {
        path = dir.join(format!("{date}-{suite}-{n}.txt"));
        n += 1;
    }
    let mut text =
        format!("# weir-bench {suite}, {date}\n# machine: {}\n# command: {command}\n", machine());
    for note in notes {
        text.push_str(&format!("# {note}\n"));
    }
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// Prints a line and keeps it for the record.
#[derive(Default)]
pub struct Log {
    pub lines: Vec<String>,
}

impl Log {
    /// A reader that went away (`weir-bench ... | head -1`) ends the run quietly with the
    /// shell's SIGPIPE status, 141, and no record, as tcpdump ends; `println!` panicked.
    pub fn line(&mut self, line: impl Into<String>) {
        let line = line.into();
        print_line(&line);
        self.lines.push(line);
    }
}

/// Prints a line to standard output; a reader that went away ends the run quietly with
/// status 141 (`Log::line` and `say!`, every part's plain output, print through it).
pub fn print_line(line: &str) {
    use std::io::Write;
    if let Err(e) = writeln!(std::io::stdout().lock(), "{line}") {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        eprintln!("weir-bench: standard output: {e}");
        std::process::exit(1);
    }
}

/// `println!` that ends quietly on a closed pipe (`weir-bench flow | head`), see `print_line`.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::record::print_line(&format!($($arg)*))
    };
}
pub(crate) use say;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(59), (1970, 3, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(20_780), (2026, 11, 23));
        assert_eq!(today().len(), 10);
    }
}
