//! `weir filter` and `weir run` over several captures (several `-r`, a directory,
//! `--jobs`): counts against single-file runs and tcpdump, merged output against tcpdump's
//! selections merged in timestamp order (and mergecap's merge when it is installed).

use std::path::{Path, PathBuf};
use std::process::Command;

use weir_runtime::capture::CaptureReader;
use weir_runtime::source::PacketSource;
use weir_testkit::{corpus, write_pcap, Packet, Scratch};

use crate::common::{have, path, text, weir};

/// A fresh directory for one test (testkit's [`Scratch`]) with an empty `in/` for the inputs.
fn scratch(test: &str) -> Scratch {
    let dir = Scratch::new(&format!("jobs-test-{test}"));
    std::fs::create_dir_all(dir.join("in")).unwrap();
    dir
}

/// Three captures whose timestamps interleave (file `f`'s packet `i` at
/// `i * 3 + f` milliseconds, some equal across files), written to `dir/in/`.
fn captures(dir: &Path) -> Vec<PathBuf> {
    (0..3u32)
        .map(|f| {
            let mut packets: Vec<Packet> = corpus(40 + u64::from(f), 700 + 150 * f as usize);
            for (i, p) in packets.iter_mut().enumerate() {
                // Every tenth packet ties with the same place in the other files.
                let ms = if i % 10 == 0 { i as u32 * 3 } else { i as u32 * 3 + f };
                p.ts_sec = 1_700_000_000 + ms / 1000;
                p.ts_usec = (ms % 1000) * 1000;
            }
            let file = dir.join("in").join(format!("part{f}.pcap"));
            write_pcap(&file, 1, &packets).unwrap();
            file
        })
        .collect()
}

/// (seconds, microseconds, data, wire length) of each record.
type Record = (u64, u32, Vec<u8>, u32);

fn records(file: &Path) -> Vec<Record> {
    let mut capture = CaptureReader::open(file).unwrap();
    let mut out = Vec::new();
    while let Some(r) = capture.next_packet() {
        let r = r.unwrap();
        out.push((r.ts_sec, r.ts_nsec / 1000, r.data.to_vec(), r.wire_len));
    }
    out
}

/// Stable merge by timestamp: the earlier file first on ties, as mergecap does.
fn merged(per_file: Vec<Vec<Record>>) -> Vec<Record> {
    let mut all: Vec<(usize, usize, Record)> = per_file
        .into_iter()
        .enumerate()
        .flat_map(|(f, rs)| rs.into_iter().enumerate().map(move |(i, r)| (f, i, r)))
        .collect();
    all.sort_by_key(|(f, i, r)| (r.0, r.1, *f, *i));
    all.into_iter().map(|(_, _, r)| r).collect()
}

const FILTERS: &[&str] = &["tcp", "udp and not port 53", "ip6 or vlan", "tcp[13] & 2 != 0", ""];

#[test]
fn counts_are_the_sum_of_single_file_runs_and_of_tcpdump() {
    let dir = scratch("counts");
    let files = captures(dir.path());
    let tcpdump = have("tcpdump", "counts_are_the_sum_of_single_file_runs_and_of_tcpdump");
    for expr in FILTERS {
        let mut single = 0u64;
        let mut theirs = 0usize;
        for file in &files {
            let out = weir(&["filter", "--count", "-r", path(file), expr]);
            assert!(out.status.success(), "{}", text(&out.stderr));
            single += text(&out.stdout).trim().parse::<u64>().unwrap();
            if tcpdump {
                let kept = dir.join("tcpdump.pcap");
                let out = Command::new("tcpdump")
                    .args(["-r", path(file), "-w", path(&kept), expr])
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{}", text(&out.stderr));
                theirs += records(&kept).len();
            }
        }
        assert!(single > 0, "{expr}");
        if tcpdump {
            assert_eq!(single as usize, theirs, "{expr}");
        }
        let [a, b, c] = [path(&files[0]), path(&files[1]), path(&files[2])];
        for jobs in ["1", "2", "3"] {
            let out = weir(&["filter", "--count", "--jobs", jobs, "-r", a, "-r", b, "-r", c, expr]);
            assert!(out.status.success(), "{}", text(&out.stderr));
            assert_eq!(text(&out.stdout).trim(), single.to_string(), "{expr} --jobs {jobs}");
        }
        // A directory stands for its files.
        let out = weir(&["filter", "--count", "-r", path(&dir.join("in")), expr]);
        assert_eq!(text(&out.stdout).trim(), single.to_string(), "{expr} (directory)");
    }
}

#[test]
fn written_output_is_tcpdump_selections_merged_in_timestamp_order() {
    let test = "written_output_is_tcpdump_selections_merged_in_timestamp_order";
    if !have("tcpdump", test) {
        return;
    }
    let dir = scratch("merge");
    let files = captures(dir.path());
    let expr = "tcp or (udp and port 53)";
    let out_file = dir.join("out.pcap");
    let out =
        weir(&["filter", "--jobs", "2", "-r", path(&dir.join("in")), "-w", path(&out_file), expr]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut selections = Vec::new();
    let mut kept_files = Vec::new();
    for (f, file) in files.iter().enumerate() {
        let kept = dir.join(&format!("tcpdump{f}.pcap"));
        let out = Command::new("tcpdump")
            .args(["-r", path(file), "-w", path(&kept), expr])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        selections.push(records(&kept));
        kept_files.push(kept);
    }
    let ours = records(&out_file);
    let want = merged(selections);
    assert!(want.len() > 100, "{} packets selected", want.len());
    assert_eq!(ours.len(), want.len());
    assert!(ours == want, "merged output differs from tcpdump's selections merged");
    // Not only sorted: ties keep file order (the generator made equal timestamps).
    assert!(ours.windows(2).any(|w| (w[0].0, w[0].1) == (w[1].0, w[1].1)));

    if have("mergecap", test) {
        let theirs = dir.join("mergecap.pcap");
        let mut args = vec!["-F", "pcap", "-w", path(&theirs)];
        args.extend(kept_files.iter().map(|p| path(p)));
        let out = Command::new("mergecap").args(&args).output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        // mergecap orders packets with equal timestamps by its own queue (4.0 puts a later
        // file's first at times); weir keeps file order. The same packets at each time:
        let (mut theirs, mut sorted) = (records(&theirs), ours.clone());
        let times = |rs: &[Record]| rs.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>();
        assert_eq!(times(&theirs), times(&ours), "timestamp sequence differs from mergecap's");
        theirs.sort();
        sorted.sort();
        assert!(theirs == sorted, "weir's merge holds other packets than mergecap's");
    }

    // Printed lines: the single-file lines, merged in the same order; -c takes the first N.
    let lines = weir(&[
        "filter",
        "-r",
        path(&files[0]),
        "-r",
        path(&files[1]),
        "-r",
        path(&files[2]),
        expr,
    ]);
    assert!(lines.status.success());
    let printed = text(&lines.stdout);
    let mut singles: Vec<(usize, usize, String)> = Vec::new();
    for (f, file) in files.iter().enumerate() {
        let out = weir(&["filter", "-r", path(file), expr]);
        for (i, line) in text(&out.stdout).lines().enumerate() {
            singles.push((f, i, line.to_string()));
        }
    }
    // Lines start with HH:MM:SS.ffffff (one day here): sortable as text.
    singles.sort_by(|a, b| (&a.2[..15], a.0, a.1).cmp(&(&b.2[..15], b.0, b.1)));
    let want: Vec<&str> = singles.iter().map(|s| s.2.as_str()).collect();
    assert_eq!(printed.lines().collect::<Vec<_>>(), want);
    let first = weir(&["filter", "-c", "7", "-r", path(&dir.join("in")), expr]);
    assert_eq!(text(&first.stdout).lines().collect::<Vec<_>>(), want[..7].to_vec());
}

#[test]
fn bad_inputs_are_refused_before_any_output() {
    let dir = scratch("bad");
    let files = captures(dir.path());
    let out_file = dir.join("out.pcap");
    let missing = dir.join("missing.pcap");
    let out = weir(&[
        "filter",
        "-r",
        path(&files[0]),
        "-r",
        path(&missing),
        "-w",
        path(&out_file),
        "tcp",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("missing.pcap"), "{}", text(&out.stderr));
    assert!(!out_file.exists());
    let out = weir(&[
        "filter",
        "-r",
        path(&files[0]),
        "-r",
        path(&files[1]),
        "-w",
        path(&out_file),
        "tcp port",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains('^'), "{}", text(&out.stderr));
    assert!(!out_file.exists());
    let out = weir(&["filter", "-r", "-", "-r", path(&files[0]), "tcp"]);
    assert!(text(&out.stderr).contains("standard input cannot be one of several"));
    let out = weir(&["filter", "--jobs", "0", "-r", path(&files[0]), "-r", path(&files[1]), "tcp"]);
    assert!(text(&out.stderr).contains("--jobs 0"), "{}", text(&out.stderr));
    let out = weir(&[
        "filter",
        "-r",
        path(&files[0]),
        "-r",
        path(&files[1]),
        "-w",
        path(&files[1]),
        "tcp",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(records(&files[1]).len(), 850, "the input was not overwritten");

    // A damaged file: the others are processed, the damage named, exit status 1.
    let damaged = dir.join("in").join("part9.pcap");
    let bytes = std::fs::read(&files[0]).unwrap();
    std::fs::write(&damaged, &bytes[..bytes.len() / 2 + 7]).unwrap();
    let out = weir(&["filter", "--count", "-r", path(&dir.join("in")), "ip"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("part9.pcap: record") && stderr.contains("stopped there"), "{stderr}");
    let whole: u64 = files
        .iter()
        .map(|f| {
            text(&weir(&["filter", "--count", "-r", path(f), "ip"]).stdout)
                .trim()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    let total: u64 = text(&out.stdout).trim().parse().unwrap();
    assert!(total > whole && total < whole + 700, "{total} vs {whole}");
    // No scratch directory left behind beside the output.
    let out = weir(&["filter", "-r", path(&dir.join("in")), "-w", path(&out_file), "ip"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out_file.exists());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".weir-parts"))
        .collect();
    assert!(leftovers.is_empty());
}

fn object(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/bpf")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn run_sums_verdicts_shares_maps_and_merges_passed_packets() {
    let dir = scratch("run");
    let files = captures(dir.path());
    let counter = object("xdp_counter.o");
    let (a, b) = (path(&files[0]), path(&files[1]));
    // The maps after the two files one after the other (the second run starting from the
    // first's maps) are the maps after both at once: the counting map is shared.
    let m1 = dir.join("m1.json");
    let m2 = dir.join("m2.json");
    let both = dir.join("both.json");
    // xdp_counter.o inserts a missing key with `BPF_NOEXIST` and does not retry, so two
    // threads meeting a new protocol at once lose a count, as two of the kernel's CPUs
    // would (seen in CI): every key starts at 0, and only the atomic adds are compared.
    let zeros: Vec<String> = (0..=255u8)
        .map(|k| {
            format!(
                r#"{{"key":["0x{k:02x}","0x00","0x00","0x00"],"value":{}}}"#,
                r#"["0x00","0x00","0x00","0x00","0x00","0x00","0x00","0x00"]"#
            )
        })
        .collect();
    let seed = dir.join("seed.json");
    std::fs::write(&seed, format!(r#"{{"proto_count":[{}]}}"#, zeros.join(","))).unwrap();
    let one = weir(&["run", &counter, "-r", a, "--maps-in", path(&seed), "--maps-out", path(&m1)]);
    assert!(one.status.success(), "{}", text(&one.stderr));
    let two = weir(&["run", &counter, "-r", b, "--maps-in", path(&m1), "--maps-out", path(&m2)]);
    assert!(two.status.success(), "{}", text(&two.stderr));
    let out_file = dir.join("passed.pcap");
    let many = weir(&[
        "run",
        &counter,
        "--jobs",
        "2",
        "-r",
        a,
        "-r",
        b,
        "--maps-in",
        path(&seed),
        "--maps-out",
        path(&both),
        "-w",
        path(&out_file),
    ]);
    assert!(many.status.success(), "{}", text(&many.stderr));
    assert_eq!(text(&many.stdout), format!("XDP_PASS {}\n", 700 + 850));
    assert_eq!(std::fs::read_to_string(&both).unwrap(), std::fs::read_to_string(&m2).unwrap());
    // Passed packets: each file's own -w output, merged in timestamp order.
    let mut singles = Vec::new();
    for (f, file) in [a, b].iter().enumerate() {
        let single = dir.join(&format!("single{f}.pcap"));
        let out = weir(&["run", &counter, "-r", file, "-w", path(&single)]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        singles.push(records(&single));
    }
    assert!(records(&out_file) == merged(singles));
    // What several captures cannot do.
    let out = weir(&["run", &counter, "-r", a, "-r", b, "--verdicts"]);
    assert!(text(&out.stderr).contains("--verdicts"), "{}", text(&out.stderr));
    let out = weir(&["run", &counter, "-r", a, "-r", b, "--cpus", "2"]);
    assert!(text(&out.stderr).contains("--jobs"), "{}", text(&out.stderr));
}

/// The parts directories (`.weir-parts-*`) in `dir`.
fn parts_dirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(".weir-parts-"))
        .collect()
}

#[test]
fn a_signal_removes_the_parts_directory() {
    use std::os::unix::process::ExitStatusExt;
    use std::time::{Duration, Instant};
    let dir = scratch("signal");
    let files = captures(dir.path());
    // The second input is a FIFO that gives a pcap header and then nothing: its worker
    // waits for packets while the first file's part is complete beside the output.
    let fifo = dir.join("in").join("fifo");
    let c_fifo = std::ffi::CString::new(path(&fifo)).unwrap();
    // SAFETY: mkfifo reads a NUL-terminated path; no other memory is involved.
    assert_eq!(unsafe { libc::mkfifo(c_fifo.as_ptr(), 0o600) }, 0);
    let header = std::fs::read(&files[0]).unwrap()[..24].to_vec();
    let counter = object("xdp_counter.o");
    let commands: [Vec<&str>; 2] = [
        vec!["filter", "--jobs", "2", "tcp"],
        vec!["run", counter.as_str(), "--jobs", "2", "--no-verify"],
    ];
    for args in commands {
        let out = dir.join("out.pcap");
        let (release, held) = std::sync::mpsc::channel::<()>();
        let fifo_path = fifo.clone();
        let header = header.clone();
        // Opening a FIFO for writing waits for a reader: weir's checks, then its worker.
        let writer = std::thread::spawn(move || {
            let mut w = std::fs::OpenOptions::new().write(true).open(&fifo_path).unwrap();
            std::io::Write::write_all(&mut w, &header).unwrap();
            let _ = held.recv();
        });
        let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(&args)
            .args(["-r", path(&files[0]), "-r", path(&fifo), "-w", path(&out)])
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let part = loop {
            let found =
                parts_dirs(dir.path()).into_iter().map(|d| d.join("0.part")).find(|p| p.exists());
            if let Some(part) = found {
                break part;
            }
            assert!(Instant::now() < deadline, "{args:?}: no complete part appeared");
            assert!(child.try_wait().unwrap().is_none(), "{args:?}: weir ended early");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(part.metadata().unwrap().len() > 24, "{args:?}: an empty part");
        // SAFETY: kill has no memory preconditions; the child is ours and not yet waited for.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("{args:?}: weir did not end on SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        drop(release);
        writer.join().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM), "{args:?}: {status:?}");
        assert_eq!(parts_dirs(dir.path()), Vec::<PathBuf>::new(), "{args:?}: parts left behind");
        assert!(!out.exists(), "{args:?}: a partial output");
    }
}

/// `-w out.pcap` (a bare relative name) puts the parts in the current directory, beside
/// the output, not in the temporary directory: with TMPDIR naming a directory that does not
/// exist, the run only succeeds if the parts go beside the output.
#[test]
fn relative_output_keeps_its_parts_beside_it() {
    let dir = scratch("relative");
    let files = captures(dir.path());
    let counter = object("xdp_counter.o");
    let commands: [Vec<&str>; 2] = [
        vec!["filter", "--jobs", "2", "tcp"],
        vec!["run", counter.as_str(), "--jobs", "2", "--no-verify"],
    ];
    for (n, args) in commands.iter().enumerate() {
        let absolute = dir.join(&format!("absolute{n}.pcap"));
        let out = weir(
            &[
                args.as_slice(),
                &["-r", path(&files[0]), "-r", path(&files[1]), "-w", path(&absolute)],
            ]
            .concat(),
        );
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        let relative = format!("relative{n}.pcap");
        let out = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(args)
            .args(["-r", path(&files[0]), "-r", path(&files[1]), "-w", &relative])
            .current_dir(dir.path())
            .env("TMPDIR", dir.join("no-such-tmp"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?} -w {relative}: {}", text(&out.stderr));
        let ours = records(&dir.join(&relative));
        assert!(ours.len() > 100, "{args:?}: {} packets written", ours.len());
        assert!(ours == records(&absolute), "{args:?}: -w {relative} differs from -w ABSOLUTE");
        assert_eq!(parts_dirs(dir.path()), Vec::<PathBuf>::new(), "{args:?}: parts left behind");
    }
}
