//! Output files: each kind of destination gets what the module table says, checked on the
//! file system (kinds, inodes, modes, owners, contents) rather than through the writer.

use super::*;
use std::io::Read;
use std::os::unix::fs::symlink;
use std::process::Command;
use weir_testkit::Scratch;

/// A fresh directory for one test (the test kit's).
fn scratch(name: &str) -> Scratch {
    Scratch::new(&format!("runtime-output-{name}"))
}

fn write(dest: &Path, bytes: &[u8]) -> io::Result<OutputKind> {
    let mut out = OutputFile::create(dest)?;
    let kind = out.kind();
    out.write_all(bytes)?;
    out.finish()?;
    Ok(kind)
}

fn inode(path: &Path) -> (u64, u64) {
    let meta = std::fs::symlink_metadata(path).unwrap();
    (meta.dev(), meta.ino())
}

/// Root, or a SKIPPED line naming the test.
fn root(test: &str) -> bool {
    if weir_sys::user::is_root() {
        return true;
    }
    println!("SKIPPED: {test}: needs root");
    false
}

/// Runs a command that makes a special file; a refusal (no CAP_MKNOD in a container) is a
/// SKIPPED line.
fn make(test: &str, program: &str, args: &[&str]) -> bool {
    match Command::new(program).args(args).output() {
        Ok(out) if out.status.success() => true,
        Ok(out) => {
            let why = String::from_utf8_lossy(&out.stderr);
            println!("SKIPPED: {test}: {program} {}: {}", args.join(" "), why.trim());
            false
        }
        Err(e) => {
            println!("SKIPPED: {test}: {program}: {e}");
            false
        }
    }
}

#[test]
fn a_new_file_gets_file_creates_mode_and_appears_only_when_finished() {
    let dir = scratch("new");
    let dest = dir.join("out.bin");
    let mut out = OutputFile::create(&dest).unwrap();
    assert_eq!(out.kind(), OutputKind::New);
    out.write_all(b"new bytes").unwrap();
    assert!(!dest.exists(), "nothing under the name before finish");
    assert_eq!(dir.names().len(), 1, "one temporary file: {:?}", dir.names());
    assert!(dir.names()[0].starts_with(".out.bin.weir-"), "{:?}", dir.names());
    assert!(weir_sys::cleanup::handler_installed(weir_sys::cleanup::SIGNALS[2]));
    out.finish().unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), b"new bytes");
    let reference = dir.join("reference");
    File::create(&reference).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
    assert_eq!(mode(&dest), mode(&reference), "0666 minus the umask, as File::create");
    std::fs::remove_file(&reference).unwrap();
    assert_eq!(dir.names(), ["out.bin"]);
}

#[test]
fn an_unfinished_output_leaves_the_old_file_and_no_temporary() {
    let dir = scratch("unfinished");
    let dest = dir.join("out.bin");
    std::fs::write(&dest, b"old").unwrap();
    {
        let mut out = OutputFile::create(&dest).unwrap();
        assert_eq!(out.kind(), OutputKind::Replace);
        out.write_all(b"half").unwrap();
        assert_eq!(dir.names().len(), 2);
    }
    assert_eq!(std::fs::read(&dest).unwrap(), b"old");
    assert_eq!(dir.names(), ["out.bin"]);
}

#[test]
fn a_replaced_file_keeps_its_mode_and_as_root_its_owner_and_group() {
    let dir = scratch("mode");
    let dest = dir.join("private.pcap");
    std::fs::write(&dest, b"old").unwrap();
    std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o600)).unwrap();
    let as_root = root("a_replaced_file_keeps_its_owner_and_group");
    if as_root {
        std::os::unix::fs::chown(&dest, Some(12345), Some(12345)).unwrap();
    }
    let before = inode(&dest);
    assert_eq!(write(&dest, b"new").unwrap(), OutputKind::Replace);
    let meta = std::fs::metadata(&dest).unwrap();
    assert_ne!((meta.dev(), meta.ino()), before, "replaced, not written in place");
    assert_eq!(std::fs::read(&dest).unwrap(), b"new");
    assert_eq!(meta.mode() & 0o7777, 0o600);
    if as_root {
        assert_eq!((meta.uid(), meta.gid()), (12345, 12345));
    }
    // An unusual mode too: group-writable, set-group-ID.
    std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o2664)).unwrap();
    write(&dest, b"newer").unwrap();
    assert_eq!(std::fs::metadata(&dest).unwrap().mode() & 0o7777, 0o2664);
    assert_eq!(dir.names(), ["private.pcap"]);
}

#[test]
fn a_symlink_is_followed_and_kept() {
    let dir = scratch("symlink");
    let target = dir.join("target.pcap");
    std::fs::write(&target, b"old").unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    // A relative link in another directory, through a second link.
    let link = dir.join("sub/link.pcap");
    symlink("../target.pcap", &link).unwrap();
    let link2 = dir.join("link2");
    symlink(&link, &link2).unwrap();
    assert_eq!(write(&link2, b"via links").unwrap(), OutputKind::Replace);
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert!(std::fs::symlink_metadata(&link2).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read(&target).unwrap(), b"via links");
    assert_eq!(dir.names(), ["link2", "sub", "target.pcap"], "the temporary was beside the target");
}

#[test]
fn a_dangling_symlink_creates_its_target() {
    let dir = scratch("dangling");
    let link = dir.join("link");
    symlink("made.pcap", &link).unwrap();
    assert_eq!(write(&link, b"created").unwrap(), OutputKind::New);
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read(dir.join("made.pcap")).unwrap(), b"created");
    // A loop is an error, not a hang.
    symlink("loop-b", dir.join("loop-a")).unwrap();
    symlink("loop-a", dir.join("loop-b")).unwrap();
    assert!(OutputFile::create(&dir.join("loop-a")).is_err());
}

#[test]
fn a_hard_linked_file_is_written_in_place_so_every_name_sees_it() {
    let dir = scratch("hardlink");
    let first = dir.join("first.pcap");
    let second = dir.join("second.pcap");
    std::fs::write(&first, b"old contents, longer than the new").unwrap();
    std::fs::hard_link(&first, &second).unwrap();
    let before = inode(&first);
    assert_eq!(write(&second, b"new").unwrap(), OutputKind::InPlace);
    assert_eq!(std::fs::read(&first).unwrap(), b"new", "truncated, then written");
    assert_eq!(std::fs::read(&second).unwrap(), b"new");
    assert_eq!(inode(&first), before);
    assert_eq!(inode(&second), before);
    assert_eq!(std::fs::metadata(&first).unwrap().nlink(), 2);
}

#[test]
fn a_proc_fd_link_to_a_regular_file_is_written_in_place() {
    let dir = scratch("procfd");
    let file_path = dir.join("held.pcap");
    std::fs::write(&file_path, b"old contents").unwrap();
    let held = File::open(&file_path).unwrap();
    let proc_link =
        PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&held)));
    if !proc_link.exists() {
        println!("SKIPPED: a_proc_fd_link_to_a_regular_file_is_written_in_place: no /proc");
        return;
    }
    // Through the link the kernel names the file; reading the link also gives its name,
    // so it is replaced by name like any other link target.
    let kind = write(&proc_link, b"through proc").unwrap();
    assert!(matches!(kind, OutputKind::Replace | OutputKind::InPlace), "{kind:?}");
    assert_eq!(std::fs::read(&file_path).unwrap(), b"through proc");
    // Once the name is gone the kernel still follows the link, but there is no name to
    // rename to: in place.
    let gone = dir.join("gone.pcap");
    std::fs::write(&gone, b"unnamed").unwrap();
    let unnamed = File::options().read(true).write(true).open(&gone).unwrap();
    std::fs::remove_file(&gone).unwrap();
    let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&unnamed));
    assert_eq!(write(Path::new(&link), b"kept").unwrap(), OutputKind::InPlace);
    let mut back = String::new();
    File::open(&link).unwrap().read_to_string(&mut back).unwrap();
    assert_eq!(back, "kept");
    assert_eq!(dir.names(), ["held.pcap"]);
}

#[test]
fn a_directory_is_an_error() {
    let dir = scratch("directory");
    let err = OutputFile::create(dir.path()).err().unwrap();
    assert!(err.to_string().contains("is a directory"), "{err}");
    assert!(dir.names().is_empty());
}

#[test]
fn character_devices_are_written_through_and_stay_devices() {
    let test = "character_devices_are_written_through_and_stay_devices";
    if !root(test) {
        return;
    }
    let dir = scratch("devices");
    let null = dir.join("null");
    let full = dir.join("full");
    if !make(test, "mknod", &[null.to_str().unwrap(), "c", "1", "3"])
        || !make(test, "mknod", &[full.to_str().unwrap(), "c", "1", "7"])
    {
        return;
    }
    assert_eq!(write(&null, b"discarded").unwrap(), OutputKind::Device);
    let mut out = OutputFile::create(&full).unwrap();
    assert_eq!(out.kind(), OutputKind::Device);
    let err = out.write_all(b"no room").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(28), "ENOSPC: {err}");
    drop(out);
    // A link to a device reaches the device.
    let link = dir.join("to-null");
    symlink(&null, &link).unwrap();
    assert_eq!(write(&link, b"discarded").unwrap(), OutputKind::Device);
    for device in [&null, &full] {
        let meta = std::fs::symlink_metadata(device).unwrap();
        assert!(meta.file_type().is_char_device(), "{} is still a device", device.display());
    }
    assert_eq!(dir.names(), ["full", "null", "to-null"]);
}

#[test]
fn a_fifo_is_written_through_to_its_reader() {
    let test = "a_fifo_is_written_through_to_its_reader";
    let dir = scratch("fifo");
    let fifo = dir.join("pipe");
    if !make(test, "mkfifo", &[fifo.to_str().unwrap()]) {
        return;
    }
    let reader_path = fifo.clone();
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        File::open(&reader_path).unwrap().read_to_end(&mut bytes).unwrap();
        bytes
    });
    // More than a pipe buffer: the writer must wait for the reader, not fail.
    let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(write(&fifo, &data).unwrap(), OutputKind::Fifo);
    assert_eq!(reader.join().unwrap(), data);
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert_eq!(dir.names(), ["pipe"]);
}

#[test]
fn a_read_only_file_is_refused_not_replaced() {
    let test = "a_read_only_file_is_refused_not_replaced";
    if weir_sys::user::is_root() {
        println!("SKIPPED: {test}: root may write any file");
        return;
    }
    let dir = scratch("readonly");
    let dest = dir.join("ro.pcap");
    std::fs::write(&dest, b"keep").unwrap();
    std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o444)).unwrap();
    let err = OutputFile::create(&dest).err().unwrap();
    assert_eq!(err.kind(), io::ErrorKind::PermissionDenied, "{err}");
    assert_eq!(std::fs::read(&dest).unwrap(), b"keep");
    assert_eq!(dir.names(), ["ro.pcap"]);
}

#[test]
fn a_writable_file_in_a_read_only_directory_is_written_in_place() {
    let test = "a_writable_file_in_a_read_only_directory_is_written_in_place";
    if weir_sys::user::is_root() {
        println!("SKIPPED: {test}: root may create files in any directory");
        return;
    }
    let dir = scratch("readonlydir");
    let dest = dir.join("out.pcap");
    std::fs::write(&dest, b"old contents").unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    let written = write(&dest, b"new");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(written.unwrap(), OutputKind::InPlace);
    assert_eq!(std::fs::read(&dest).unwrap(), b"new");
    assert_eq!(dir.names(), ["out.pcap"]);
}

#[test]
fn same_file_sees_through_links_and_never_through_standard_streams() {
    let dir = scratch("same");
    let input = dir.join("in.pcap");
    std::fs::write(&input, b"x").unwrap();
    let soft = dir.join("soft");
    symlink("in.pcap", &soft).unwrap();
    let hard = dir.join("hard");
    std::fs::hard_link(&input, &hard).unwrap();
    let other = dir.join("other");
    std::fs::write(&other, b"x").unwrap();
    assert!(same_file(&input, &input));
    assert!(same_file(&soft, &input));
    assert!(same_file(&input, &soft));
    assert!(same_file(&hard, &input));
    let relative = input.parent().unwrap().join(".").join("in.pcap");
    assert!(same_file(&relative, &input));
    assert!(!same_file(&other, &input));
    assert!(!same_file(&dir.join("missing"), &input));
    assert!(!same_file(Path::new("-"), &input));
    assert!(!same_file(&input, Path::new("-")));
}
