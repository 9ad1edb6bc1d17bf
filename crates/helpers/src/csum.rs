//! The Internet checksum arithmetic of the kernel's `csum_*` helpers: 32-bit ones'
//! complement sums of native-endian words (`__wsum`), folded to 16 bits.

/// `csum_add`: 32-bit add with end-around carry.
pub(crate) fn add(a: u32, b: u32) -> u32 {
    let (sum, carry) = a.overflowing_add(b);
    sum.wrapping_add(u32::from(carry))
}

/// `csum_sub`.
pub(crate) fn sub(a: u32, b: u32) -> u32 {
    add(a, !b)
}

/// `csum_fold`: the 16-bit complement of the folded sum.
pub(crate) fn fold(sum: u32) -> u16 {
    let s = (sum & 0xffff) + (sum >> 16);
    let s = (s & 0xffff) + (s >> 16);
    !(s as u16)
}

/// `csum_partial` over whole 32-bit words (what `bpf_csum_diff` sums), from `seed`.
pub(crate) fn partial(words: &[u8], seed: u32) -> u32 {
    words
        .chunks_exact(4)
        .fold(seed, |acc, w| add(acc, u32::from_ne_bytes([w[0], w[1], w[2], w[3]])))
}

/// `csum_replace4`/`csum_replace2` on a stored checksum (native-endian load of the field):
/// the new field value.
pub(crate) fn replace(field: u16, from: u32, to: u32) -> u16 {
    fold(add(sub(!u32::from(field), from), to))
}

/// `csum_replace_by_diff`.
pub(crate) fn replace_by_diff(field: u16, diff: u32) -> u16 {
    fold(add(diff, !u32::from(field)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replacing_a_word_matches_recomputing() {
        // An IPv4 header's checksum before and after changing its TTL/protocol word.
        let mut header =
            [0x45u8, 0, 0, 0x54, 0, 0, 0x40, 0, 0x40, 0x01, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        let sum = |h: &[u8]| fold(partial(h, 0));
        let c = sum(&header);
        header[10..12].copy_from_slice(&c.to_ne_bytes());
        assert_eq!(fold(partial(&header, 0)), 0);
        let old = u16::from_ne_bytes([header[8], header[9]]);
        header[8] = 0x3f;
        let new = u16::from_ne_bytes([header[8], header[9]]);
        let field = u16::from_ne_bytes([header[10], header[11]]);
        let updated = replace(field, u32::from(old), u32::from(new));
        header[10..12].copy_from_slice(&updated.to_ne_bytes());
        assert_eq!(fold(partial(&header, 0)), 0);
    }
}
