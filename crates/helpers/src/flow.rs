//! The flow hash: what `bpf_get_hash_recalc` returns and which worker of `weir run --cpus`
//! takes a packet (one concept, one place).
//!
//! The kernel's skb hash (`__skb_get_hash`) is siphash over the flow dissector's keys with
//! a key drawn at boot, so its values cannot be reproduced outside that boot; what can be
//! kept is its shape, and weir keeps that: the keys are the IPv4/IPv6 addresses, the
//! protocol and, for TCP, UDP and SCTP (first fragments only), the ports; the two endpoints
//! are put in order first (`__flow_hash_consistentify`), so both directions of a
//! connection hash alike; a hash of 0 becomes 1 (0 means "no hash"). Frames that are not
//! IP hash their Ethernet addresses, in order too. The function is FNV-1a, seeded by
//! nothing: the same packet gives the same hash on every run.

/// The flow hash of an Ethernet frame (one 802.1Q/802.1ad tag skipped); never 0.
pub fn flow_hash(frame: &[u8]) -> u32 {
    const SEED: u64 = 0xcbf2_9ce4_8422_2325;
    let get = |at: usize, n: usize| frame.get(at..at + n).unwrap_or_default();
    let be16 = |at: usize| match get(at, 2) {
        [a, b] => u16::from_be_bytes([*a, *b]),
        _ => 0,
    };
    let mut off = 12;
    let mut ethertype = be16(off);
    if ethertype == 0x8100 || ethertype == 0x88a8 {
        off += 4;
        ethertype = be16(off);
    }
    let l3 = off + 2;
    let (proto, a, b, l4) = match ethertype {
        0x0800 => {
            let ihl = usize::from(get(l3, 1).first().copied().unwrap_or(0) & 0x0f) * 4;
            let first_fragment = get(l3 + 6, 2).len() == 2 && be16(l3 + 6) & 0x1fff == 0;
            let proto = get(l3 + 9, 1).first().copied().unwrap_or(0);
            (proto, get(l3 + 12, 4), get(l3 + 16, 4), first_fragment.then_some(l3 + ihl))
        }
        0x86dd => {
            let proto = get(l3 + 6, 1).first().copied().unwrap_or(0);
            (proto, get(l3 + 8, 16), get(l3 + 24, 16), Some(l3 + 40))
        }
        _ => {
            let (x, y) = (get(0, 6), get(6, 6));
            let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
            return finish(mix(mix(SEED, lo), hi));
        }
    };
    let (pa, pb): (&[u8], &[u8]) = match (proto, l4) {
        (6 | 17 | 132, Some(at)) => (get(at, 2), get(at + 2, 2)),
        _ => (&[], &[]),
    };
    let ((a, pa), (b, pb)) =
        if (a, pa) <= (b, pb) { ((a, pa), (b, pb)) } else { ((b, pb), (a, pa)) };
    finish([&[proto][..], a, pa, b, pb].iter().fold(SEED, |h, part| mix(h, part)))
}

/// FNV-1a over `bytes`, from `h`.
fn mix(h: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// 32 bits, never 0.
fn finish(h: u64) -> u32 {
    match (h ^ (h >> 32)) as u32 {
        0 => 1,
        h => h,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[14 + 9] = 6;
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f
    }

    #[test]
    fn both_directions_hash_alike_and_ports_count() {
        let a = tcp4([10, 0, 0, 1], [10, 0, 0, 2], 1234, 80);
        let b = tcp4([10, 0, 0, 2], [10, 0, 0, 1], 80, 1234);
        assert_eq!(flow_hash(&a), flow_hash(&b));
        assert_ne!(flow_hash(&a), flow_hash(&tcp4([10, 0, 0, 1], [10, 0, 0, 2], 1235, 80)));
        // The payload and the MAC addresses do not count for IP.
        let mut c = a.clone();
        c[0] = 0xff;
        c.push(7);
        assert_eq!(flow_hash(&a), flow_hash(&c));
        // A later fragment has no ports: it hashes as the addresses and protocol alone.
        let mut frag = a.clone();
        frag[14 + 7] = 1;
        let mut frag2 = tcp4([10, 0, 0, 1], [10, 0, 0, 2], 9, 9);
        frag2[14 + 7] = 1;
        assert_eq!(flow_hash(&frag), flow_hash(&frag2));
    }

    #[test]
    fn any_bytes_hash_never_zero() {
        let mut x = 1u64;
        for len in 0..200 {
            let frame: Vec<u8> = (0..len)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    (x >> 56) as u8
                })
                .collect();
            assert_ne!(flow_hash(&frame), 0);
        }
    }
}
