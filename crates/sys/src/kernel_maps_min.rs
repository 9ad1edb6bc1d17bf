//! The least of `bpf(BPF_MAP_CREATE)` and `bpf(BPF_MAP_UPDATE_ELEM)` that a test needs to
//! load an ELF object's programs with their maps (weir-elf's kernel test): create a map
//! from its sizes and flags, write an element (the initial contents of global data).
//!
//! Kept apart from [`crate::kernel`] (which will get the full map commands) so that the two
//! can grow independently; the attributes are encoded as there, a prefix of
//! `union bpf_attr` passed with its own size.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `BPF_MAP_CREATE`.
const MAP_CREATE: libc::c_long = 0;
/// `BPF_MAP_UPDATE_ELEM`.
const MAP_UPDATE_ELEM: libc::c_long = 2;
/// `BPF_OBJ_NAME_LEN`: map names are at most 15 bytes and a NUL.
const OBJ_NAME_LEN: usize = 16;

fn bpf(cmd: libc::c_long, attr: &mut [u8]) -> io::Result<i64> {
    // SAFETY: `attr` is a live, exclusively borrowed buffer of `attr.len()` bytes, the size
    // passed; the callers below put in it only addresses of buffers that outlive the call
    // and are as long as the sizes the map was created with (checked by the callers).
    let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len()) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn put(attr: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(field) = attr.get_mut(at..at + bytes.len()) {
        field.copy_from_slice(bytes);
    }
}

/// What `BPF_MAP_CREATE` takes (no BTF, no inner map).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapAttr<'a> {
    /// `enum bpf_map_type`.
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    /// `BPF_F_*`.
    pub flags: u32,
    /// Cut to 15 bytes, and to the characters the kernel takes (letters, digits, `_`,
    /// `.`; others become `_`).
    pub name: &'a str,
}

/// A map the kernel created: its descriptor and the sizes it was created with.
#[derive(Debug)]
pub struct MinMap {
    pub fd: OwnedFd,
    pub key_size: u32,
    pub value_size: u32,
}

/// Creates a map (needs root or CAP_BPF).
pub fn create_map(attr: &MapAttr<'_>) -> io::Result<MinMap> {
    let mut raw = [0u8; 44];
    put(&mut raw, 0, &attr.map_type.to_ne_bytes());
    put(&mut raw, 4, &attr.key_size.to_ne_bytes());
    put(&mut raw, 8, &attr.value_size.to_ne_bytes());
    put(&mut raw, 12, &attr.max_entries.to_ne_bytes());
    put(&mut raw, 16, &attr.flags.to_ne_bytes());
    let name: Vec<u8> = attr
        .name
        .bytes()
        .take(OBJ_NAME_LEN - 1)
        .map(|b| if b.is_ascii_alphanumeric() || b == b'_' || b == b'.' { b } else { b'_' })
        .collect();
    put(&mut raw, 28, &name);
    let rc = bpf(MAP_CREATE, &mut raw)?;
    let fd = i32::try_from(rc).map_err(|_| io::Error::other("descriptor out of range"))?;
    // SAFETY: a successful BPF_MAP_CREATE returns a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok(MinMap { fd, key_size: attr.key_size, value_size: attr.value_size })
}

impl MinMap {
    /// Writes `value` at `key` (`BPF_ANY`); both must be exactly the map's sizes.
    pub fn update(&self, key: &[u8], value: &[u8]) -> io::Result<()> {
        if key.len() != self.key_size as usize || value.len() != self.value_size as usize {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "key or value size"));
        }
        let mut raw = [0u8; 32];
        put(&mut raw, 0, &(self.fd.as_raw_fd() as u32).to_ne_bytes());
        put(&mut raw, 8, &(key.as_ptr() as u64).to_ne_bytes());
        put(&mut raw, 16, &(value.as_ptr() as u64).to_ne_bytes());
        bpf(MAP_UPDATE_ELEM, &mut raw).map(|_| ())
    }
}
