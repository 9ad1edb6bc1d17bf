//! Hex text as the conformance tools write it: `aa bb cc`, `aabbcc`, `0xaa 0xbb`.

/// Parses hex bytes; whitespace between tokens is optional, a `0x` prefix per token allowed.
pub fn parse_bytes(text: &str) -> Result<Vec<u8>, String> {
    let mut digits = String::new();
    for token in text.split_whitespace() {
        let token = token.strip_prefix("0x").or_else(|| token.strip_prefix("0X")).unwrap_or(token);
        if token.len() % 2 != 0 {
            return Err(format!("hex token `{token}` has an odd number of digits"));
        }
        digits.push_str(token);
    }
    let bytes = digits.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() / 2);
    for (i, pair) in bytes.chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).map_err(|_| format!("byte {i}: not hex"))?;
        let value =
            u8::from_str_radix(text, 16).map_err(|_| format!("byte {i}: `{text}` is not hex"))?;
        out.push(value);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_common_spellings() {
        assert_eq!(parse_bytes("aa bb cc").unwrap(), [0xaa, 0xbb, 0xcc]);
        assert_eq!(parse_bytes("aabbcc").unwrap(), [0xaa, 0xbb, 0xcc]);
        assert_eq!(parse_bytes("0xaa 0XBB\n0x0c").unwrap(), [0xaa, 0xbb, 0x0c]);
        assert_eq!(parse_bytes("").unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn rejects_odd_or_bad_digits() {
        assert!(parse_bytes("abc").is_err());
        assert!(parse_bytes("zz").unwrap_err().contains("byte 0"));
    }
}
