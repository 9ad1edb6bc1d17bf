//! `weir-bench e2e`: whole processes over a page-cached capture, as a user runs them:
//! `weir filter -r F --count EXPR` against `tcpdump -r F --count EXPR` and the floor
//! reader (`weir-bench-floor`, [`crate::floor`]: read(2) in 1 MiB chunks and a filter
//! written by hand), then `-w OUT` for `tcp or udp` the same way. Wall time per run (spawn
//! to reaped), CPU time and maximum resident set size (wait4's rusage), medians over
//! rounds in which the programs take turns going first.
//!
//! Before anything is timed every program runs once per filter and the counts must agree
//! (for `-w`, the output files must hold the same number of packets and be byte-identical
//! to tcpdump's); a disagreement is printed and nothing is timed. The capture is generated
//! (bench/src/traffic.rs, the fixed seed) into the temporary directory once and reused
//! while its size is right; it is read once before the first run so that every program
//! finds it in the page cache.

use crate::record::say;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use weir_testkit::{write_pcap_stream, Packet};

use crate::floor;
use crate::record::{self, Log};
use crate::timing::Samples;
use crate::traffic;

/// Packets in the default capture, and in `--quick` mode.
pub const PACKETS: usize = 1_000_000;
pub const QUICK_PACKETS: usize = 20_000;

/// `weir-bench e2e` options.
#[derive(Debug, clap::Args)]
pub struct E2eArgs {
    /// Packets in the generated capture (default 1,000,000, about 400 MB; 20,000 with
    /// --quick).
    #[arg(long, value_name = "N")]
    pub packets: Option<usize>,
    /// Instead, a capture of at least this many GiB (for maximum RSS on big files).
    #[arg(long, value_name = "GIB", conflicts_with = "packets")]
    pub big: Option<f64>,
    /// Timed rounds (default 10; 2 with --quick).
    #[arg(long, value_name = "N")]
    pub rounds: Option<usize>,
    /// Smoke mode: 20,000 packets, 2 rounds.
    #[arg(long)]
    pub quick: bool,
    /// The weir binary (default: target/release/weir of this workspace, built first when
    /// the benchmark runs under cargo).
    #[arg(long, value_name = "PATH")]
    pub weir: Option<PathBuf>,
    /// A line to keep in the record's header (what was measured, the machine's state).
    #[arg(long, value_name = "TEXT")]
    pub note: Vec<String>,
    /// Write bench/records/<date>-e2e.txt.
    #[arg(long)]
    pub record: bool,
}

/// A program under test.
struct Program {
    name: &'static str,
    path: PathBuf,
}

impl Program {
    /// The command for one run: `--count EXPR`, or `-w OUT EXPR`.
    fn command(&self, capture: &Path, expr: &str, out: Option<&Path>) -> Command {
        let mut cmd = Command::new(&self.path);
        if self.name == "weir" {
            cmd.arg("filter");
        }
        cmd.arg("-r").arg(capture);
        match out {
            Some(out) => cmd.arg("-w").arg(out),
            None => cmd.arg("--count"),
        };
        cmd.arg(expr).stdin(Stdio::null());
        cmd
    }
}

/// One row of the table: a program on a filter, in one mode.
struct Row {
    filter: usize,
    program: usize,
    wall_ms: Samples,
    cpu_ms: Samples,
    max_rss_kib: i64,
}

/// What one filter is measured with.
struct Case {
    label: String,
    expr: &'static str,
    write: bool,
    /// Packets kept (agreed by every program).
    expected: u64,
    /// For `-w`: the size of the output every program wrote.
    out_size: u64,
}

pub fn run(args: &E2eArgs, command: &str) -> Result<bool, String> {
    let rounds = args.rounds.unwrap_or(if args.quick { 2 } else { 10 });
    if rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    let size = match (args.big, args.packets) {
        (Some(gib), _) if !(gib > 0.0 && gib <= 256.0) => {
            return Err(format!("--big {gib}: a size in GiB, above 0 and at most 256"))
        }
        (Some(gib), _) => Size::Bytes((gib * (1u64 << 30) as f64) as u64),
        (None, Some(0)) => return Err("--packets must be at least 1".into()),
        (None, Some(n)) => Size::Packets(n),
        (None, None) => Size::Packets(if args.quick { QUICK_PACKETS } else { PACKETS }),
    };
    let mut log = Log::default();
    let mut notes = args.note.clone();
    if record::profile() == "debug" {
        notes.push("WARNING: debug build; use --release for figures that mean anything".into());
    }
    let programs = programs(args, &mut notes)?;
    let capture = prepare(&size, &mut notes)?;
    notes.push(format!("load average before the runs: {}", load_average()));
    for note in &notes {
        say!("# {note}");
    }

    // The counts must agree before anything is timed.
    let scratch = std::env::temp_dir();
    let out_path = |p: &Program| scratch.join(format!("weir-bench-e2e-out-{}.pcap", p.name));
    let mut cases: Vec<Case> = floor::COUNT_EXPRESSIONS
        .iter()
        .enumerate()
        .map(|(i, &expr)| Case {
            label: format!("[{}] {expr}", i + 1),
            expr,
            write: false,
            expected: 0,
            out_size: 0,
        })
        .collect();
    cases.push(Case {
        label: format!("[{}] -w: {}", cases.len() + 1, floor::WRITE_EXPRESSION),
        expr: floor::WRITE_EXPRESSION,
        write: true,
        expected: 0,
        out_size: 0,
    });
    let mut agreed = true;
    for case in &mut cases {
        match check(case, &programs, &capture.path, &out_path) {
            Ok(line) => log.line(line),
            Err(e) => {
                log.line(format!("DISAGREEMENT {}: {e}", case.label));
                agreed = false;
            }
        }
    }
    if !agreed {
        remove_outputs(&programs, &out_path);
        return Ok(false);
    }

    // Timed rounds: every case, every program, the programs' order turning each round.
    let mut rows: Vec<Row> = Vec::new();
    for filter in 0..cases.len() {
        for program in 0..programs.len() {
            rows.push(Row {
                filter,
                program,
                wall_ms: Samples::default(),
                cpu_ms: Samples::default(),
                max_rss_kib: 0,
            });
        }
    }
    let started = Instant::now();
    for round in 0..rounds {
        for (c, case) in cases.iter().enumerate() {
            for turn in 0..programs.len() {
                let p = (turn + round) % programs.len();
                let program = &programs[p];
                let out = case.write.then(|| out_path(program));
                if let Some(out) = &out {
                    let _ = std::fs::remove_file(out);
                }
                let mut cmd = program.command(&capture.path, case.expr, out.as_deref());
                let run =
                    timed(&mut cmd).map_err(|e| format!("{} {}: {e}", program.name, case.label))?;
                let consistent = match &out {
                    None => parse_count(&run.stdout) == Some(case.expected),
                    Some(out) => {
                        std::fs::metadata(out).map(|m| m.len()).ok() == Some(case.out_size)
                    }
                };
                if !consistent {
                    return Err(format!(
                        "{} {}: a timed run's result differs from the checked one (stdout {:?})",
                        program.name,
                        case.label,
                        run.stdout.trim()
                    ));
                }
                let row = &mut rows[c * programs.len() + p];
                row.wall_ms.0.push(run.wall.as_secs_f64() * 1e3);
                row.cpu_ms.0.push(run.cpu.as_secs_f64() * 1e3);
                row.max_rss_kib = row.max_rss_kib.max(run.max_rss_kib);
            }
        }
    }
    remove_outputs(&programs, &out_path);
    let elapsed = started.elapsed();

    report(&mut log, &cases, &programs, &rows, rounds, elapsed);
    if args.record {
        notes.push(format!("load average after the runs: {}", load_average()));
        let path = record::write("e2e", command, &notes, &log.lines)?;
        say!("record: {}", path.display());
    }
    Ok(true)
}

fn remove_outputs(programs: &[Program], out_path: &dyn Fn(&Program) -> PathBuf) {
    for p in programs {
        let _ = std::fs::remove_file(out_path(p));
    }
}

/// Runs every program once on `case` and compares. Returns the line saying what agreed.
fn check(
    case: &mut Case,
    programs: &[Program],
    capture: &Path,
    out_path: &dyn Fn(&Program) -> PathBuf,
) -> Result<String, String> {
    let floor = programs.iter().find(|p| p.name == "floor").ok_or("no floor program")?;
    let tcpdump = programs.iter().find(|p| p.name == "tcpdump");
    // What a program printed for --count, or what its -w output holds, counted by tcpdump
    // when it is here, else by the floor.
    let count_file = |file: &Path, expr: &str| -> Result<u64, String> {
        let counter = tcpdump.unwrap_or(floor);
        let out = once(&mut counter.command(file, expr, None))?;
        parse_count(&out)
            .ok_or_else(|| format!("{} printed {:?}, not a count", counter.name, out.trim()))
    };
    let mut counts = Vec::new();
    for p in programs {
        let n = if case.write {
            let out = out_path(p);
            let _ = std::fs::remove_file(&out);
            once(&mut p.command(capture, case.expr, Some(&out)))
                .map_err(|e| format!("{}: {e}", p.name))?;
            count_file(&out, "").map_err(|e| format!("{} output: {e}", p.name))?
        } else {
            let out = once(&mut p.command(capture, case.expr, None))
                .map_err(|e| format!("{}: {e}", p.name))?;
            parse_count(&out)
                .ok_or_else(|| format!("{} printed {:?}, not a count", p.name, out.trim()))?
        };
        counts.push(n);
    }
    let listed = programs
        .iter()
        .zip(&counts)
        .map(|(p, n)| format!("{} {n}", p.name))
        .collect::<Vec<_>>()
        .join(", ");
    if counts.windows(2).any(|w| w[0] != w[1]) {
        return Err(format!("counts differ: {listed}"));
    }
    case.expected = counts.first().copied().unwrap_or(0);
    let total = count_file(capture, "")?;
    let mut line = format!(
        "agree {}: {} of {total} packets ({:.1}%)",
        case.label,
        case.expected,
        case.expected as f64 * 100.0 / total.max(1) as f64
    );
    if case.write {
        // Byte for byte against the reference output (tcpdump's, else the floor's).
        let reference = tcpdump.unwrap_or(floor);
        let reference_out = out_path(reference);
        for p in programs.iter().filter(|p| p.name != reference.name) {
            if let Some(at) = first_difference(&reference_out, &out_path(p))? {
                return Err(format!(
                    "{}'s output differs from {}'s at byte {at} (both hold {} packets)",
                    p.name, reference.name, case.expected
                ));
            }
        }
        case.out_size = std::fs::metadata(&reference_out)
            .map_err(|e| format!("{}: {e}", reference_out.display()))?
            .len();
        line.push_str(&format!(
            "; the outputs ({:.1} MiB) are byte-identical to {}'s",
            case.out_size as f64 / (1 << 20) as f64,
            reference.name
        ));
    }
    Ok(line)
}

/// A count at the start of a program's output: weir and the floor print the number,
/// tcpdump "N packets".
fn parse_count(out: &str) -> Option<u64> {
    out.split_whitespace().next()?.parse().ok()
}

/// The first byte offset where two files differ (or where the shorter one ends).
fn first_difference(a: &Path, b: &Path) -> Result<Option<u64>, String> {
    let open = |p: &Path| File::open(p).map_err(|e| format!("{}: {e}", p.display()));
    let (mut fa, mut fb) = (open(a)?, open(b)?);
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    let mut offset = 0u64;
    loop {
        let na = read_full(&mut fa, &mut ba).map_err(|e| format!("{}: {e}", a.display()))?;
        let nb = read_full(&mut fb, &mut bb).map_err(|e| format!("{}: {e}", b.display()))?;
        if let Some(i) = ba[..na.min(nb)].iter().zip(&bb[..na.min(nb)]).position(|(x, y)| x != y) {
            return Ok(Some(offset + i as u64));
        }
        if na != nb {
            return Ok(Some(offset + na.min(nb) as u64));
        }
        if na == 0 {
            return Ok(None);
        }
        offset += na as u64;
    }
}

/// Reads until `buf` is full or the file ends.
fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Runs a command to the end; its standard output, or an error with its standard error.
fn once(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if !out.status.success() {
        return Err(format!("{} ({})", String::from_utf8_lossy(&out.stderr).trim(), out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One timed run.
pub(crate) struct Run {
    pub(crate) wall: Duration,
    pub(crate) cpu: Duration,
    pub(crate) max_rss_kib: i64,
    pub(crate) stdout: String,
}

/// Spawns the command (standard error silenced), reads its standard output, and reaps it
/// with wait4(2): the wall time from before the spawn to after the reaping, the child's
/// user + system time and its maximum resident set size.
pub(crate) fn timed(cmd: &mut Command) -> Result<Run, String> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::null());
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    let mut stdout = String::new();
    if let Some(mut pipe) = child.stdout.take() {
        pipe.read_to_string(&mut stdout).map_err(|e| format!("reading its output: {e}"))?;
    }
    let pid = libc::pid_t::try_from(child.id()).map_err(|_| "process id out of range")?;
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is a plain C struct of integers, for which all zeroes is a value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our child, not yet reaped (std's Child was never waited on);
        // `status` and `usage` are live locals of the types wait4 writes.
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if reaped == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("wait4: {e}"));
        }
    }
    let wall = start.elapsed();
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        return Err(format!("exited with wait status {status:#x}"));
    }
    let tv = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    // c_long: i64 here, i32 on 32-bit targets.
    #[allow(clippy::useless_conversion)]
    let max_rss_kib = i64::from(usage.ru_maxrss);
    Ok(Run {
        wall,
        cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
        // Linux gives ru_maxrss in KiB.
        max_rss_kib,
        stdout,
    })
}

/// weir, tcpdump (when installed) and the floor, in that order.
fn programs(args: &E2eArgs, notes: &mut Vec<String>) -> Result<Vec<Program>, String> {
    let exe = std::env::current_exe().map_err(|e| format!("where is weir-bench? {e}"))?;
    let dir = exe.parent().ok_or("weir-bench has no directory")?.to_path_buf();
    let built = build_with_cargo(args.weir.is_none())?;
    let weir = match &args.weir {
        Some(path) => path.clone(),
        // target/<profile>/weir-bench -> target/release/weir
        None => dir.parent().map_or_else(|| dir.join("weir"), |t| t.join("release").join("weir")),
    };
    let floor = dir.join("weir-bench-floor");
    for (path, how) in [
        (&weir, "build it with `cargo build --release -p weir-cli` or name one with --weir"),
        (&floor, "build it with `cargo build --release -p weir-bench`"),
    ] {
        if !path.is_file() {
            return Err(format!("{}: not found; {how}", path.display()));
        }
    }
    let version = once(Command::new(&weir).arg("--version"))
        .map_or_else(|e| format!("? ({e})"), |v| v.trim().to_string());
    notes.push(format!(
        "weir: {} ({version}, modified {}){built}",
        weir.display(),
        modified(&weir)
    ));
    let mut programs = vec![Program { name: "weir", path: weir }];
    match find_in_path("tcpdump") {
        Some(path) => {
            let version = Command::new(&path)
                .arg("--version")
                .output()
                .ok()
                .and_then(|o| String::from_utf8_lossy(&o.stdout).lines().next().map(str::to_string))
                .unwrap_or_else(|| "version unknown".into());
            notes.push(format!("tcpdump: {} ({version}; standard error silenced)", path.display()));
            programs.push(Program { name: "tcpdump", path });
        }
        None => {
            let line = "SKIPPED tcpdump: not found in PATH (no tcpdump rows or ratios)".to_string();
            notes.push(line);
        }
    }
    notes.push(format!(
        "floor: {} (read(2) in 1 MiB chunks, a hand-written filter per expression; -w \
         writes without fsync, as tcpdump does; weir -w writes a temporary file and renames \
         it into place, with an fsync only when it replaces an existing file)",
        floor.display()
    ));
    programs.push(Program { name: "floor", path: floor });
    Ok(programs)
}

/// Under cargo (`cargo run -p weir-bench -- e2e`), brings the floor (same profile) and, when
/// `weir` is the default one, target/release/weir up to date, so that a stale binary is
/// never measured. Says what it did, for the notes.
fn build_with_cargo(weir_too: bool) -> Result<String, String> {
    let Some(cargo) = std::env::var_os("CARGO") else {
        return Ok(String::new());
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().ok_or("no workspace root")?;
    let mut builds: Vec<Vec<&str>> = Vec::new();
    let mut floor = vec!["build", "--quiet", "-p", "weir-bench", "--bin", "weir-bench-floor"];
    if record::profile() == "release" {
        floor.push("--release");
    }
    builds.push(floor);
    if weir_too {
        builds.push(vec!["build", "--quiet", "--release", "-p", "weir-cli", "--bin", "weir"]);
    }
    for build in builds {
        let status = Command::new(&cargo)
            .args(&build)
            .current_dir(root)
            .status()
            .map_err(|e| format!("cargo {}: {e}", build.join(" ")))?;
        if !status.success() {
            return Err(format!("cargo {} failed ({status})", build.join(" ")));
        }
    }
    Ok(if weir_too { "; built by cargo just before".into() } else { String::new() })
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// A file's modification time, UTC, to the second.
fn modified(path: &Path) -> String {
    let Ok(t) = std::fs::metadata(path).and_then(|m| m.modified()) else {
        return "?".into();
    };
    let secs = t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let s = secs % 86_400;
    format!("{} {:02}:{:02}:{:02} UTC", record::date_of(secs), s / 3600, s / 60 % 60, s % 60)
}

pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "unknown".into(),
        |l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

/// How big the capture is to be.
enum Size {
    Packets(usize),
    /// At least this many bytes (the first packet count whose file reaches it).
    Bytes(u64),
}

struct Prepared {
    path: PathBuf,
}

const FILE_HEADER: u64 = 24;
const RECORD_HEADER: u64 = 16;

/// The generated capture in the temporary directory: reused when its size is the one the
/// generator gives, else written (streamed: memory stays bounded at any size). Then read
/// once, so that the runs find it in the page cache.
fn prepare(size: &Size, notes: &mut Vec<String>) -> Result<Prepared, String> {
    // The packet count and file size: the generator's lengths, summed (no file needed).
    let (count, bytes) = {
        let mut bytes = FILE_HEADER;
        let mut count = 0usize;
        for frame in traffic::stream(traffic::SEED) {
            let done = match *size {
                Size::Packets(n) => count >= n,
                Size::Bytes(b) => bytes >= b,
            };
            if done {
                break;
            }
            bytes += RECORD_HEADER + frame.len() as u64;
            count += 1;
        }
        (count, bytes)
    };
    let name = match *size {
        Size::Packets(n) => format!("weir-bench-e2e-{n}.pcap"),
        Size::Bytes(_) => format!("weir-bench-e2e-{count}.pcap"),
    };
    let path = std::env::temp_dir().join(name);
    let reused = std::fs::metadata(&path).is_ok_and(|m| m.len() == bytes);
    if !reused {
        let start = Instant::now();
        // 27 µs apart from 2026-01-01T00:00:00Z.
        let packets = traffic::stream(traffic::SEED).take(count).enumerate().map(|(i, data)| {
            let us = i as u64 * 27;
            Packet {
                wire_len: data.len() as u32,
                data,
                ts_sec: 1_767_225_600 + (us / 1_000_000) as u32,
                ts_usec: (us % 1_000_000) as u32,
                description: String::new(),
            }
        });
        write_pcap_stream(&path, 1, 262_144, packets)
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        notes.push(format!(
            "generated {} in {:.1} s",
            path.display(),
            start.elapsed().as_secs_f64()
        ));
    }
    // Warm the page cache: one read, timed (a second pass at memory speed says it stuck).
    let warm_pass = || -> Result<Duration, String> {
        let start = Instant::now();
        let mut f = File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut buf = vec![0u8; 1 << 20];
        while read_full(&mut f, &mut buf).map_err(|e| format!("{}: {e}", path.display()))? > 0 {}
        Ok(start.elapsed())
    };
    warm_pass()?;
    let cached = warm_pass()?;
    let mib = bytes as f64 / (1 << 20) as f64;
    notes.push(format!(
        "capture: {} ({}), {count} packets, {mib:.1} MiB, mean {:.0} bytes per record; \
         generated traffic, seed {:#x}; page-cached (a read pass takes {:.0} ms, {:.1} GiB/s)",
        path.display(),
        if reused { "reused" } else { "generated now" },
        (bytes - FILE_HEADER) as f64 / count.max(1) as f64 - RECORD_HEADER as f64,
        traffic::SEED,
        cached.as_secs_f64() * 1e3,
        mib / 1024.0 / cached.as_secs_f64().max(1e-9),
    ));
    Ok(Prepared { path })
}

/// The table and the issue's goals beside the figures.
fn report(
    log: &mut Log,
    cases: &[Case],
    programs: &[Program],
    rows: &[Row],
    rounds: usize,
    elapsed: Duration,
) {
    log.line(format!(
        "# {rounds} rounds in {:.0} s; per run: wall time from spawn to reaped (median, and \
         the interquartile range as % of it), user+system CPU time (median), maximum \
         resident set size (largest of the rounds); x tcpdump and x floor divide the \
         medians (below 1: faster)",
        elapsed.as_secs_f64()
    ));
    log.line(format!(
        "{:>10} {:>7} {:>9} {:>8} {:>9} {:>8}  {:<8} filter",
        "median ms", "spread", "cpu ms", "RSS MiB", "x tcpdump", "x floor", "program"
    ));
    let median = |c: usize, name: &str| {
        rows.iter()
            .find(|r| r.filter == c && programs[r.program].name == name)
            .map(|r| r.wall_ms.median())
    };
    for (c, case) in cases.iter().enumerate() {
        for row in rows.iter().filter(|r| r.filter == c) {
            let name = programs[row.program].name;
            let m = row.wall_ms.median();
            let ratio = |base: Option<f64>| {
                base.filter(|b| *b > 0.0).map_or("-".to_string(), |b| format!("{:.2}", m / b))
            };
            log.line(format!(
                "{m:>10.1} {:>6.0}% {:>9.1} {:>8.1} {:>9} {:>8}  {name:<8} {}",
                row.wall_ms.spread_percent(),
                row.cpu_ms.median(),
                row.max_rss_kib as f64 / 1024.0,
                ratio(median(c, "tcpdump")),
                ratio(median(c, "floor")),
                case.label
            ));
        }
    }
    // The goals of the end-to-end issue, beside the figures; nothing here fails a run.
    log.line(
        "# goals (issue 9): weir >= 3x faster than tcpdump and within 1.3x of the floor \
              for --count; -w >= 2x faster than tcpdump; weir's max RSS <= 64 MiB"
            .to_string(),
    );
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    for (c, case) in cases.iter().enumerate() {
        let Some(weir) = median(c, "weir") else { continue };
        let mut parts = Vec::new();
        if let Some(t) = median(c, "tcpdump") {
            let goal = if case.write { 2.0 } else { 3.0 };
            let speedup = t / weir;
            parts.push(format!(
                "speed-up over tcpdump {speedup:.2}x (goal >= {goal}x: {})",
                verdict(speedup >= goal)
            ));
        }
        if !case.write {
            if let Some(f) = median(c, "floor") {
                let slower = weir / f;
                parts.push(format!(
                    "{slower:.2}x the floor's time (goal <= 1.3x: {})",
                    verdict(slower <= 1.3)
                ));
            }
        }
        log.line(format!("goal {}: weir {}", case.label, parts.join("; ")));
    }
    let rss = rows
        .iter()
        .filter(|r| programs[r.program].name == "weir")
        .map(|r| r.max_rss_kib)
        .max()
        .unwrap_or(0) as f64
        / 1024.0;
    log.line(format!("goal max RSS: weir {rss:.1} MiB (goal <= 64 MiB: {})", verdict(rss <= 64.0)));
}
