//! OpenBSD's pflog header (`struct pfloghdr`): where it keeps its fields, pf's directions,
//! and the reason and action codes under the names libpcap's filter language gives them.
//! Read by weir-pflang's pflog tests and by the line printer.

/// The header's length (a byte, rounded up to 4 bytes for the payload's start).
pub const LENGTH: usize = 0;
/// The address family of the payload (a byte).
pub const AF: usize = 1;
/// The action taken (a byte, [`ACTIONS`]).
pub const ACTION: usize = 2;
/// Why (a byte, [`REASONS`]).
pub const REASON: usize = 3;
/// The interface name: [`NAME_LEN`] bytes, NUL-terminated.
pub const IFNAME: usize = 4;
/// The ruleset name: [`NAME_LEN`] bytes, NUL-terminated.
pub const RULESET: usize = 20;
/// The rule number (a big-endian word).
pub const RULENR: usize = 36;
/// The subrule number (a big-endian word, all ones for none).
pub const SUBRULENR: usize = 40;
/// The direction (a byte: [`DIR_INOUT`], [`DIR_IN`], [`DIR_OUT`]).
pub const DIR: usize = 60;
/// The length of the interface and ruleset name fields, their terminating NUL included.
pub const NAME_LEN: usize = 16;

/// pf's directions.
pub const DIR_INOUT: u8 = 0;
pub const DIR_IN: u8 = 1;
pub const DIR_OUT: u8 = 2;

/// pf's reasons under libpcap's names (the index is the reason code).
pub const REASONS: [&str; 15] = [
    "match",
    "bad-offset",
    "fragment",
    "short",
    "normalize",
    "memory",
    "bad-timestamp",
    "congestion",
    "ip-option",
    "proto-cksum",
    "state-mismatch",
    "state-insert",
    "state-limit",
    "src-limit",
    "synproxy",
];

/// pf's actions under libpcap's names, with their codes (some codes have two names).
pub const ACTIONS: [(&str, u8); 13] = [
    ("pass", 0),
    ("accept", 0),
    ("drop", 1),
    ("block", 1),
    ("scrub", 2),
    ("noscrub", 3),
    ("nat", 4),
    ("nonat", 5),
    ("binat", 6),
    ("nobinat", 7),
    ("rdr", 8),
    ("nordr", 9),
    ("synproxy-drop", 10),
];

/// The code of a reason named as libpcap names it (case-insensitive).
pub fn reason_code(name: &str) -> Option<u8> {
    REASONS.iter().position(|r| r.eq_ignore_ascii_case(name)).map(|i| i as u8)
}

/// The code of an action named as libpcap names it (case-insensitive).
pub fn action_code(name: &str) -> Option<u8> {
    ACTIONS.iter().find(|(a, _)| a.eq_ignore_ascii_case(name)).map(|&(_, code)| code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_find_their_codes_in_any_case() {
        assert_eq!(reason_code("State-Mismatch"), Some(10));
        assert_eq!(reason_code("nope"), None);
        assert_eq!(action_code("BLOCK"), action_code("drop"));
        assert_eq!(action_code("synproxy-drop"), Some(10));
        assert_eq!(action_code("reject"), None);
    }
}
