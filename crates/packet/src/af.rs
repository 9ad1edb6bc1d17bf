//! Address families as BSD loopback headers (DLT_NULL, DLT_LOOP) carry them. IPv4 is the
//! same everywhere; IPv6 is numbered differently by each system family.

pub const INET: u32 = 2;
/// IPv6 on Linux.
pub const INET6_LINUX: u32 = 10;
/// IPv6 on NetBSD and OpenBSD.
pub const INET6_NETBSD: u32 = 24;
/// IPv6 on FreeBSD.
pub const INET6_FREEBSD: u32 = 28;
/// IPv6 on Darwin.
pub const INET6_DARWIN: u32 = 30;
/// The IPv6 values a capture file (written on a BSD) may hold.
pub const INET6_BSD: [u32; 3] = [INET6_NETBSD, INET6_FREEBSD, INET6_DARWIN];
