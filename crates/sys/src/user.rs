//! Who the process runs as.

/// The effective user id.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether the process runs as root (effective uid 0): it may then give files to other
/// owners, as the output writer does to keep a replaced file's owner.
pub fn is_root() -> bool {
    effective_uid() == 0
}
