//! Ports and port ranges over TCP, UDP and SCTP, on IPv4 and IPv6.
//!
//! STUB (being completed).
