//! What `weir filter -w` and `weir asm -o` do to what they are told to write to (issue 18:
//! no input may destroy a file): devices and FIFOs are written through, links are followed
//! and kept, hard links keep seeing the file, a replaced file keeps its mode and owner, the
//! input is refused as an output, and a signal leaves no temporary file behind.
//!
//! Every test works in its own directory, removed when it passes; every child process is
//! waited for with a deadline and killed after it.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};
use weir_testkit::Scratch;

use crate::common::{path, sample, text, weir};

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weir runs")
}

/// A fresh directory for one test (the test kit's).
fn scratch(test: &str) -> Scratch {
    Scratch::new(&format!("output-test-{test}"))
}

/// The temporary files weir left in `dir` (`.NAME.weir-PID-N.tmp`).
fn temporaries(dir: &Scratch) -> Vec<String> {
    dir.names().into_iter().filter(|n| n.contains(".weir-") && n.ends_with(".tmp")).collect()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Makes a device node or FIFO; says SKIPPED (and returns false) when the system refuses.
fn mknod(test: &str, at: &Path, mode: libc::mode_t, major: u32, minor: u32) -> bool {
    let c_path = std::ffi::CString::new(path(at)).unwrap();
    // SAFETY: `c_path` is a NUL-terminated path that outlives the call.
    let rc = unsafe { libc::mknod(c_path.as_ptr(), mode | 0o644, libc::makedev(major, minor)) };
    if rc != 0 {
        println!("SKIPPED: {test}: mknod {}: {}", at.display(), std::io::Error::last_os_error());
        return false;
    }
    true
}

fn mkfifo(test: &str, at: &Path) -> bool {
    mknod(test, at, libc::S_IFIFO, 0, 0)
}

/// What `weir filter -r sample -w FILE tcp` writes to a fresh regular file.
fn reference(dir: &Scratch) -> Vec<u8> {
    let file = dir.join("reference.pcap");
    let out = weir(&["filter", "-r", &sample(), "-w", path(&file), "tcp"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let bytes = std::fs::read(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    assert!(bytes.len() > 24, "the sample has TCP packets");
    bytes
}

fn write_filter(dest: &Path) -> Output {
    weir(&["filter", "-r", &sample(), "-w", path(dest), "tcp"])
}

/// Waits for a child for at most `limit`, then kills it (and fails).
fn wait(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: weir did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn signal(child: &Child, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill has no memory preconditions; `pid` is our child, not yet waited for.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
}

#[test]
fn devices_are_written_through_never_replaced() {
    let test = "devices_are_written_through_never_replaced";
    if !is_root() {
        println!("SKIPPED: {test}: mknod needs root");
        return;
    }
    let dir = scratch("devices");
    let null = dir.join("null");
    let full = dir.join("full");
    if !mknod(test, &null, libc::S_IFCHR, 1, 3) || !mknod(test, &full, libc::S_IFCHR, 1, 7) {
        return;
    }
    let out = write_filter(&null);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // A full device is an error (exit 1, the reason), not a file in its place.
    let out = write_filter(&full);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("No space left on device"), "{}", text(&out.stderr));
    // weir asm -o: the same.
    let source = dir.join("prog.s");
    std::fs::write(&source, "mov r0, 1\nexit\n").unwrap();
    let out = weir(&["asm", path(&source), "-o", path(&null)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = weir(&["asm", path(&source), "-o", path(&full)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    for device in [&null, &full] {
        let meta = std::fs::symlink_metadata(device).unwrap();
        assert!(meta.file_type().is_char_device(), "{} is still a device", device.display());
    }
    assert_eq!(std::fs::metadata(&null).unwrap().rdev(), libc::makedev(1, 3));
    assert_eq!(std::fs::metadata(&full).unwrap().rdev(), libc::makedev(1, 7));
    assert_eq!(dir.names(), ["full", "null", "prog.s"]);
}

#[test]
fn the_real_dev_null_stays_a_device() {
    let before = std::fs::metadata("/dev/null").unwrap();
    let out = write_filter(Path::new("/dev/null"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let after = std::fs::metadata("/dev/null").unwrap();
    assert!(after.file_type().is_char_device());
    assert_eq!((after.ino(), after.rdev()), (before.ino(), before.rdev()));
}

#[test]
fn a_fifo_is_written_through_to_its_reader() {
    let test = "a_fifo_is_written_through_to_its_reader";
    let dir = scratch("fifo");
    let expected = reference(&dir);
    let fifo = dir.join("pipe");
    if !mkfifo(test, &fifo) {
        return;
    }
    let reader_path = fifo.clone();
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        File::open(&reader_path).unwrap().read_to_end(&mut bytes).unwrap();
        bytes
    });
    let mut child = spawn(&["filter", "-r", &sample(), "-w", path(&fifo), "tcp"]);
    let status = wait(&mut child, Duration::from_secs(60), test);
    assert!(status.success(), "{status:?}");
    assert_eq!(reader.join().unwrap(), expected);
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert_eq!(dir.names(), ["pipe"]);
}

#[test]
fn dev_stdout_is_standard_output() {
    let dir = scratch("devstdout");
    let expected = reference(&dir);
    // Standard output a pipe: written through.
    let out = weir(&["filter", "-r", &sample(), "-w", "/dev/stdout", "tcp"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(out.stdout, expected);
    // Standard output a regular file: that file gets the capture.
    let file = dir.join("redirected.pcap");
    let status = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["filter", "-r", &sample(), "-w", "/dev/stdout", "tcp"])
        .stdout(File::create(&file).unwrap())
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(std::fs::read(&file).unwrap(), expected);
    assert_eq!(dir.names(), ["redirected.pcap"]);
}

#[test]
fn a_symlink_is_followed_its_target_replaced_and_the_link_kept() {
    let dir = scratch("symlink");
    let expected = reference(&dir);
    std::fs::create_dir(dir.join("data")).unwrap();
    let target = dir.join("data/target.pcap");
    std::fs::write(&target, b"old").unwrap();
    let link = dir.join("link.pcap");
    std::os::unix::fs::symlink("data/target.pcap", &link).unwrap();
    let out = write_filter(&link);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("data/target.pcap"));
    assert_eq!(std::fs::read(&target).unwrap(), expected);
    // A dangling link: its target is created.
    let dangling = dir.join("dangling.pcap");
    std::os::unix::fs::symlink("data/new.pcap", &dangling).unwrap();
    let out = write_filter(&dangling);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::symlink_metadata(&dangling).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read(dir.join("data/new.pcap")).unwrap(), expected);
    // weir asm -o through a link.
    let source = dir.join("prog.s");
    std::fs::write(&source, "mov r0, 1\nexit\n").unwrap();
    let out = weir(&["asm", path(&source), "-o", path(&link)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read(&target).unwrap().len(), 16, "two instructions");
    assert_eq!(dir.names(), ["dangling.pcap", "data", "link.pcap", "prog.s"]);
    let mut data: Vec<_> = std::fs::read_dir(dir.join("data"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    data.sort();
    assert_eq!(data, ["new.pcap", "target.pcap"], "no temporary left beside the target");
}

#[test]
fn a_hard_linked_file_is_written_in_place_and_both_names_see_it() {
    let dir = scratch("hardlink");
    let expected = reference(&dir);
    let first = dir.join("first.pcap");
    let second = dir.join("second.pcap");
    std::fs::write(&first, vec![0x55; 100_000]).unwrap();
    std::fs::hard_link(&first, &second).unwrap();
    let inode = std::fs::metadata(&first).unwrap().ino();
    let out = write_filter(&first);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(&first).unwrap(), expected);
    assert_eq!(std::fs::read(&second).unwrap(), expected, "truncated, not only overwritten");
    for name in [&first, &second] {
        let meta = std::fs::metadata(name).unwrap();
        assert_eq!((meta.ino(), meta.nlink()), (inode, 2));
    }
    assert_eq!(dir.names(), ["first.pcap", "second.pcap"]);
}

#[test]
fn a_replaced_file_keeps_its_mode_and_owner() {
    let dir = scratch("owner");
    let expected = reference(&dir);
    let dest = dir.join("private.pcap");
    std::fs::write(&dest, b"old").unwrap();
    std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o600)).unwrap();
    let root = is_root();
    if root {
        std::os::unix::fs::chown(&dest, Some(12345), Some(12345)).unwrap();
    } else {
        println!("SKIPPED: a_replaced_file_keeps_its_owner: chown to another user needs root");
    }
    let out = write_filter(&dest);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(&dest).unwrap(), expected);
    let meta = std::fs::metadata(&dest).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o600, "mode {:o}", meta.mode());
    if root {
        assert_eq!((meta.uid(), meta.gid()), (12345, 12345));
    }
    // weir asm -o keeps them too.
    let source = dir.join("prog.s");
    std::fs::write(&source, "mov r0, 1\nexit\n").unwrap();
    std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = weir(&["asm", path(&source), "-o", path(&dest)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let meta = std::fs::metadata(&dest).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o640, "mode {:o}", meta.mode());
    if root {
        assert_eq!((meta.uid(), meta.gid()), (12345, 12345));
    }
    assert_eq!(dir.names(), ["private.pcap", "prog.s"]);
}

#[test]
fn a_new_file_gets_the_usual_mode() {
    let dir = scratch("newmode");
    let dest = dir.join("new.pcap");
    assert!(write_filter(&dest).status.success());
    let probe = dir.join("probe");
    File::create(&probe).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
    assert_eq!(mode(&dest), mode(&probe), "0666 minus the umask, as any new file");
}

#[test]
fn the_input_is_refused_as_the_output_and_left_unchanged() {
    let dir = scratch("same");
    let input = dir.join("in.pcap");
    std::fs::copy(sample(), &input).unwrap();
    let original = std::fs::read(&input).unwrap();
    let soft = dir.join("soft.pcap");
    std::os::unix::fs::symlink("in.pcap", &soft).unwrap();
    let hard = dir.join("hard.pcap");
    std::fs::hard_link(&input, &hard).unwrap();
    let dotted = dir.join(".").join("in.pcap");
    for output in [&input, &soft, &hard, &dotted] {
        let out = weir(&["filter", "-r", path(&input), "-w", path(output), "tcp"]);
        assert_eq!(out.status.code(), Some(1), "-w {}", output.display());
        let expected = format!(
            "weir: {}: is the input file (-r {}); refusing to overwrite it\n",
            output.display(),
            input.display()
        );
        assert_eq!(text(&out.stderr), expected);
        assert_eq!(std::fs::read(&input).unwrap(), original, "-w {}", output.display());
    }
    // The other way round: -r through the link, -w the file.
    let out = weir(&["filter", "-r", path(&soft), "-w", path(&input), "tcp"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read(&input).unwrap(), original);
    // -r - cannot clash, whatever -w names.
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["filter", "-r", "-", "-w", path(&dir.join("copy.pcap")), "tcp"])
        .stdin(File::open(&input).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    // weir asm -o naming its source.
    let source = dir.join("prog.s");
    std::fs::write(&source, "mov r0, 1\nexit\n").unwrap();
    let out = weir(&["asm", path(&source), "-o", path(&source)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("is the input file"), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(&source).unwrap(), b"mov r0, 1\nexit\n");
    assert_eq!(dir.names(), ["copy.pcap", "hard.pcap", "in.pcap", "prog.s", "soft.pcap"]);
}

/// A pcap of `packets` records of `size` bytes each (an empty expression keeps them all).
fn big_capture(at: &Path, packets: u32, size: u32) {
    let mut out = std::io::BufWriter::new(File::create(at).unwrap());
    // Little-endian, version 2.4, zone 0, sigfigs 0, snap length, Ethernet.
    let mut header = Vec::new();
    header.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    header.extend_from_slice(&2u16.to_le_bytes());
    header.extend_from_slice(&4u16.to_le_bytes());
    for word in [0u32, 0, 65_535, 1] {
        header.extend_from_slice(&word.to_le_bytes());
    }
    out.write_all(&header).unwrap();
    let payload = vec![0xabu8; size as usize];
    for i in 0..packets {
        for word in [i, 0, size, size] {
            out.write_all(&word.to_le_bytes()).unwrap();
        }
        out.write_all(&payload).unwrap();
    }
    out.flush().unwrap();
}

#[test]
fn a_signal_while_writing_a_fifo_ends_weir_by_that_signal() {
    let test = "a_signal_while_writing_a_fifo_ends_weir_by_that_signal";
    let dir = scratch("fifosignal");
    let input = dir.join("in.pcap");
    // 2 MB: far more than a pipe holds.
    big_capture(&input, 2_000, 1_000);
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let fifo = dir.join("pipe");
        if !mkfifo(test, &fifo) {
            return;
        }
        // A reader that opens the FIFO and never reads: weir blocks once the pipe is full.
        let (opened_tx, opened_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let reader_path = fifo.clone();
        let reader = std::thread::spawn(move || {
            let held = File::open(&reader_path).unwrap();
            opened_tx.send(()).unwrap();
            let _ = done_rx.recv_timeout(Duration::from_secs(60));
            drop(held);
        });
        let mut child = spawn(&["filter", "-r", path(&input), "-w", path(&fifo)]);
        if opened_rx.recv_timeout(Duration::from_secs(30)).is_err() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("weir never opened the FIFO");
        }
        // Give it time to fill the pipe and block (the signal ends it either way).
        std::thread::sleep(Duration::from_millis(200));
        signal(&child, sig);
        let status = wait(&mut child, Duration::from_secs(30), test);
        done_tx.send(()).unwrap();
        reader.join().unwrap();
        assert_eq!(status.signal(), Some(sig), "{status:?}");
        assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(dir.names(), ["in.pcap", "pipe"]);
        std::fs::remove_file(&fifo).unwrap();
    }
}

#[test]
fn a_signal_while_writing_a_file_removes_the_temporary_and_keeps_the_old_file() {
    let test = "a_signal_while_writing_a_file_removes_the_temporary_and_keeps_the_old_file";
    let dir = scratch("filesignal");
    let input = dir.join("in.pcap");
    let dest = dir.join("out.pcap");
    // weir reads the whole input before it creates the output, so the temporary file
    // exists only while weir writes (and syncs): a capture large enough makes that window
    // wide, and the test signals as soon as it sees the temporary file. Should weir still
    // finish first, the next round doubles the size.
    let mut packets = 20_000;
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        let mut caught = false;
        for _round in 0..4 {
            big_capture(&input, packets, 1_000);
            std::fs::write(&dest, b"old contents").unwrap();
            let mut child = spawn(&["filter", "-r", path(&input), "-w", path(&dest)]);
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut seen = false;
            while Instant::now() < deadline {
                if !temporaries(&dir).is_empty() {
                    seen = true;
                    break;
                }
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            if seen {
                signal(&child, sig);
            }
            let status = wait(&mut child, Duration::from_secs(60), test);
            if status.success() {
                // weir won the race: it replaced the file whole.
                assert!(temporaries(&dir).is_empty());
                assert_ne!(std::fs::read(&dest).unwrap(), b"old contents");
                packets *= 2;
                continue;
            }
            assert!(seen, "weir failed on its own: {status:?}");
            assert_eq!(status.signal(), Some(sig), "{status:?}");
            assert_eq!(temporaries(&dir), Vec::<String>::new(), "signal {sig}");
            // The old file, or (had the signal come between the rename and the end) the
            // whole new capture, which is the input itself: never a part.
            let now = std::fs::read(&dest).unwrap();
            assert!(
                now == b"old contents" || now == std::fs::read(&input).unwrap(),
                "signal {sig}: out.pcap holds {} bytes",
                now.len()
            );
            caught = true;
            break;
        }
        if !caught {
            println!("SKIPPED: {test}: signal {sig}: weir always finished before the signal");
        }
    }
    assert_eq!(dir.names(), ["in.pcap", "out.pcap"]);
}
