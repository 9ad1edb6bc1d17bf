//! The `-- raw` section format of the conformance corpus: a program written as 64-bit words,
//! one per slot, each the little-endian `u64` of the slot's 8 bytes
//! ([`RawInsn::from_u64`]). Words are separated by whitespace; `#` starts a comment.
//! Decoding the slots is left to [`crate::ebpf::decode`], which names a bad slot by index.

use super::lexer::{number_error, numbered_lines, parse_number, strip_comment};
use super::AsmError;
use crate::ebpf::RawInsn;

/// Reads whitespace-separated 64-bit words (`0x00000001000000b4`, or decimal) into slots.
pub fn parse_raw_words(text: &str) -> Result<Vec<RawInsn>, AsmError> {
    let mut slots = Vec::new();
    for (number, line) in numbered_lines(text) {
        let code = strip_comment(line);
        let mut column = 0usize;
        let mut in_word = false;
        let mut word_start = 0usize;
        let mut word_column = 0usize;
        // Walk characters so columns count characters, as every assembler error does.
        for (byte, c) in code.char_indices().chain(std::iter::once((code.len(), ' '))) {
            column = column.wrapping_add(1);
            if c.is_whitespace() {
                if in_word {
                    let word = code.get(word_start..byte).unwrap_or("");
                    slots.push(RawInsn::from_u64(parse_word(word, number, word_column)?));
                    in_word = false;
                }
            } else if !in_word {
                in_word = true;
                word_start = byte;
                word_column = column;
            }
        }
    }
    Ok(slots)
}

fn parse_word(word: &str, line: usize, column: usize) -> Result<u64, AsmError> {
    if !word.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(AsmError::new(
            line,
            column,
            format!("expected a 64-bit word like 0x00000001000000b4, found `{word}`"),
        ));
    }
    parse_number(word).map_err(|e| number_error(line, column, word, e))
}
