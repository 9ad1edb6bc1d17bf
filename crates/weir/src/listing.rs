//! Listings: an eBPF assembly program (the assembler's syntax, [`weir_isa::asm`]) with what
//! it needs to be loaded as the kernel would load it — its program type and its maps — and,
//! for the verifier corpus (`testdata/verifier`), what the Linux verifier said about it.
//!
//! Directives are comment lines starting with `#!`, anywhere before the first instruction
//! (the assembler reads them as comments, so a listing is also plain assembly); on them a
//! `#` after white space starts a comment (a refusal's message is quoted, so it may hold one):
//!
//! ```text
//! #! type xdp                                   # weir_program::ProgType names
//! #! map counts hash key=4 value=8 entries=16   # [flags=N]; index = declaration order
//! #! kernel reject "invalid access to packet"   # or: #! kernel accept
//! #! rule packet-range
//! #! note free text, as many as wanted
//! ```
//!
//! Instructions name maps by index, `lddw %r1, map_idx(0)` and `lddw %r1,
//! map_idx_value(0, 8)`; the [`Program`] gets one [`Relocation`] per such `lddw`, exactly
//! as `weir-elf` writes them for a clang-built object, so every engine and the kernel loader
//! (`weir_testkit::kernel_object::bind`) treat both alike. `map_fd(N)`/`map_value(N, OFF)`
//! stay raw (no relocation): the kernel sees descriptor N.
//!
//! ```
//! let text = "#! type xdp\n#! map m array key=4 value=8 entries=1\n\
//!             #! kernel accept\nlddw %r1, map_idx(0)\nmov %r0, 2\nexit\n";
//! let listing = weir::listing::parse(text).unwrap();
//! assert_eq!(listing.program.prog_type(), Some(weir::ProgType::Xdp));
//! assert_eq!(listing.program.maps()[0].name, "m");
//! assert_eq!(listing.program.relocations().len(), 1);
//! assert!(listing.kernel.unwrap().accept);
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use weir_isa::asm::assemble;
use weir_isa::ebpf::Op;
use weir_program::{MapSpec, MapType, ProgType, Program, RelocTarget, Relocation};

/// A parsed listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listing {
    /// The instructions with the declared type, maps and map relocations.
    pub program: Program,
    /// What the Linux verifier said (`#! kernel`), when the listing records it.
    pub kernel: Option<Expected>,
    /// The rule the case exercises (`#! rule`).
    pub rule: Option<String>,
    /// `#! note` lines, in order.
    pub notes: Vec<String>,
}

/// A recorded verdict of the Linux verifier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    pub accept: bool,
    /// For a refusal: a substring of the verifier log's last error line.
    pub message: Option<String>,
}

/// What is wrong with a listing, and where (1-based line and column, in characters).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListingError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ListingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}: {}", self.line, self.column, self.message)
    }
}

impl ListingError {
    /// The offending source line with a caret under the column, as the assembler shows its
    /// errors ([`weir_isa::asm::AsmError::render`]).
    pub fn render(&self, source: &str) -> String {
        weir_isa::asm::AsmError::new(self.line, self.column, self.message.clone()).render(source)
    }
}

impl std::error::Error for ListingError {}

fn err(line: usize, column: usize, message: impl Into<String>) -> ListingError {
    ListingError { line, column, message: message.into() }
}

/// One word of a directive: its text (quotes removed) and 1-based column.
struct Word {
    text: String,
    column: usize,
    quoted: bool,
}

/// Splits a directive's text (after `#!`) into words; a quoted word may hold spaces and
/// `\"`/`\\`; an unquoted word starting with `#` starts a comment. `base` is the column of
/// the first character of `text`.
fn words(text: &str, line: usize, base: usize) -> Result<Vec<Word>, ListingError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_whitespace() {
            i += 1;
            continue;
        }
        let column = base + i;
        if chars[i] == '#' {
            break;
        }
        if chars[i] == '"' {
            let mut s = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err(err(line, column, "unterminated string")),
                    Some('"') => break,
                    Some('\\') => match chars.get(i + 1) {
                        Some(&c @ ('"' | '\\')) => {
                            s.push(c);
                            i += 1;
                        }
                        _ => return Err(err(line, base + i, "only \\\" and \\\\ are escapes")),
                    },
                    Some(&c) => s.push(c),
                }
                i += 1;
            }
            i += 1;
            out.push(Word { text: s, column, quoted: true });
        } else {
            let start = i;
            while i < chars.len() && !chars[i].is_whitespace() {
                i += 1;
            }
            out.push(Word { text: chars[start..i].iter().collect(), column, quoted: false });
        }
    }
    Ok(out)
}

/// A number as the assembler writes them: decimal or `0x` hex.
fn number(text: &str) -> Option<u32> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// `#! map NAME TYPE key=N value=N entries=N [flags=N]`.
fn map_directive(args: &[Word], line: usize, end: usize) -> Result<MapSpec, ListingError> {
    let name = args.first().ok_or_else(|| err(line, end, "a map needs a name and a type"))?;
    let ty = args.get(1).ok_or_else(|| err(line, end, "a map needs a type after its name"))?;
    let map_type = MapType::from_name(&ty.text).ok_or_else(|| {
        err(
            line,
            ty.column,
            format!("unknown map type `{}` (bpftool's names: hash, array, ...)", ty.text),
        )
    })?;
    let mut fields: [Option<u32>; 4] = [None; 4];
    const KEYS: [&str; 4] = ["key", "value", "entries", "flags"];
    for w in &args[2..] {
        let (k, v) = w.text.split_once('=').ok_or_else(|| {
            err(
                line,
                w.column,
                format!("expected key=N, value=N, entries=N or flags=N, found `{}`", w.text),
            )
        })?;
        let at = KEYS.iter().position(|&n| n == k).ok_or_else(|| {
            err(line, w.column, format!("unknown map field `{k}` (key, value, entries, flags)"))
        })?;
        if fields[at].is_some() {
            return Err(err(line, w.column, format!("`{k}=` given twice")));
        }
        let value_column = w.column + k.chars().count() + 1;
        fields[at] = Some(number(v).ok_or_else(|| {
            err(line, value_column, format!("bad number `{v}` (decimal or 0x hex, 32 bits)"))
        })?);
    }
    let need = |i: usize| fields[i].ok_or_else(|| err(line, end, format!("missing {}=", KEYS[i])));
    Ok(MapSpec {
        name: name.text.clone(),
        map_type,
        key_size: need(0)?,
        value_size: need(1)?,
        max_entries: need(2)?,
        flags: fields[3].unwrap_or(0),
    })
}

/// Parses a listing: directives, then the assembly.
pub fn parse(text: &str) -> Result<Listing, ListingError> {
    let mut prog_type: Option<ProgType> = None;
    let mut maps: Vec<MapSpec> = Vec::new();
    let mut kernel: Option<Expected> = None;
    let mut rule: Option<String> = None;
    let mut notes = Vec::new();
    let mut in_code = false;
    // Where each `map_idx`/`map_idx_value` operand is written, in order: the lines of the
    // relocated `lddw`s, for errors that name them.
    let mut map_refs: Vec<(usize, usize)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let indent = raw.chars().take_while(|c| c.is_whitespace()).count();
        let trimmed = raw.trim_start();
        if let Some(rest) = trimmed.strip_prefix("#!") {
            let base = indent + 3;
            if in_code {
                return Err(err(line, indent + 1, "directive after the first instruction"));
            }
            let end = raw.chars().count() + 1;
            let ws = words(rest, line, base)?;
            let Some(head) = ws.first() else {
                return Err(err(line, base, "empty directive (type, map, kernel, rule or note)"));
            };
            let args = &ws[1..];
            // Free text: everything after the directive's name, as written, up to a `#`
            // that follows white space (a comment, as on every directive line).
            let free = || {
                let skip = head.column - base + head.text.chars().count();
                let text: String = rest.chars().skip(skip).collect();
                let mut end = text.len();
                let mut prev_space = true;
                for (at, ch) in text.char_indices() {
                    if ch == '#' && prev_space {
                        end = at;
                        break;
                    }
                    prev_space = ch.is_whitespace();
                }
                text[..end].trim().to_string()
            };
            match head.text.as_str() {
                "type" => {
                    if prog_type.is_some() {
                        return Err(err(line, head.column, "a second `type`"));
                    }
                    let [t] = args else {
                        return Err(err(line, end, "`type` takes one program type name"));
                    };
                    prog_type = Some(t.text.parse().map_err(|e: String| err(line, t.column, e))?);
                }
                "map" => {
                    let spec = map_directive(args, line, end)?;
                    if maps.iter().any(|m| m.name == spec.name) {
                        let at = args[0].column;
                        return Err(err(line, at, format!("map `{}` declared twice", spec.name)));
                    }
                    maps.push(spec);
                }
                "kernel" => {
                    if kernel.is_some() {
                        return Err(err(line, head.column, "a second `kernel` verdict"));
                    }
                    kernel = Some(match args {
                        [v] if v.text == "accept" && !v.quoted => {
                            Expected { accept: true, message: None }
                        }
                        [v] if v.text == "reject" && !v.quoted => {
                            Expected { accept: false, message: None }
                        }
                        [v, m] if v.text == "reject" && m.quoted => {
                            Expected { accept: false, message: Some(m.text.clone()) }
                        }
                        [v, m, ..] if v.text == "reject" => {
                            return Err(err(
                                line,
                                m.column,
                                "a refusal's message is one quoted string",
                            ));
                        }
                        [v, m, ..] if v.text == "accept" => {
                            return Err(err(line, m.column, "`accept` takes no message"));
                        }
                        [v, ..] => {
                            return Err(err(
                                line,
                                v.column,
                                format!("expected accept or reject, found `{}`", v.text),
                            ));
                        }
                        [] => return Err(err(line, end, "expected accept or reject")),
                    });
                }
                "rule" => {
                    if rule.is_some() {
                        return Err(err(line, head.column, "a second `rule`"));
                    }
                    let text = free();
                    if text.is_empty() {
                        return Err(err(line, end, "`rule` needs a name"));
                    }
                    rule = Some(text);
                }
                "note" => notes.push(free()),
                other => {
                    return Err(err(
                        line,
                        head.column,
                        format!("unknown directive `{other}` (type, map, kernel, rule, note)"),
                    ));
                }
            }
            continue;
        }
        let code = raw.split('#').next().unwrap_or("");
        if !code.trim().is_empty() {
            in_code = true;
            for (at, _) in code.match_indices("map_idx") {
                map_refs.push((line, code[..at].chars().count() + 1));
            }
        }
    }
    let insns = assemble(text).map_err(|e| err(e.line, e.column, e.message))?;
    let mut program = Program::from_insns(insns);
    if let Some(t) = prog_type {
        program = program.with_prog_type(t);
    }
    let mut relocations = Vec::new();
    for (slot, insn) in program.insns().iter().enumerate() {
        let target = match insn.op {
            Op::LddwMapIdx => (insn.imm, None),
            Op::LddwMapIdxValue => (insn.imm & 0xffff_ffff, Some((insn.imm >> 32) as u32)),
            _ => continue,
        };
        let (line, column) = map_refs.get(relocations.len()).copied().unwrap_or((0, 0));
        let map = usize::try_from(target.0).ok().filter(|&m| m < maps.len()).ok_or_else(|| {
            err(
                line,
                column,
                format!("map_idx {} out of range: {} map(s) declared", target.0, maps.len()),
            )
        })?;
        let target = match target.1 {
            None => RelocTarget::Map { map },
            Some(offset) => RelocTarget::MapValue { map, offset },
        };
        relocations.push(Relocation { slot, target });
    }
    for m in maps {
        program.add_map(m);
    }
    for r in relocations {
        program.add_relocation(r);
    }
    Ok(Listing { program, kernel, rule, notes })
}

/// Every `*.s` listing in `dir`, parsed, sorted by file name: the verifier corpus
/// (`testdata/verifier`) for the kernel-verdict test and the weir-side comparison. The
/// error names the file.
pub fn corpus(dir: &Path) -> Result<Vec<(PathBuf, Listing)>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut paths = Vec::new();
    for e in entries {
        let path = e.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        if path.extension().is_some_and(|x| x == "s") {
            paths.push(path);
        }
    }
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            let listing = parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            Ok((path, listing))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn bad(text: &str, line: usize, column: usize, needle: &str) {
        match parse(text) {
            Ok(l) => panic!("{text:?} parsed: {l:?}"),
            Err(e) => {
                assert_eq!((e.line, e.column), (line, column), "{text:?}: {e}");
                assert!(e.message.contains(needle), "{text:?}: {e} should mention {needle:?}");
            }
        }
    }

    #[test]
    fn a_full_listing() {
        let text = "# a comment\n#! type tc   # trailing comment\n\
                    #! map counts hash key=4 value=8 entries=16\n\
                    #! map glob array key=4 value=0x20 entries=1 flags=0x400\n\
                    #! kernel reject \"invalid access to \\\"map\\\" # value\"\n\
                    #! rule map-value-bounds\n#! note first\n#!note   second one  \n\
                    lddw %r1, map_idx(0)\n  lddw %r2, map_idx_value(1, 8) # glob+8\n\
                    mov %r0, 0\nexit\n";
        let l = parse(text).unwrap();
        assert_eq!(l.program.prog_type(), Some(ProgType::SchedCls));
        let m = l.program.maps();
        assert_eq!(m.len(), 2);
        assert_eq!(
            (m[0].name.as_str(), m[0].map_type, m[0].key_size),
            ("counts", MapType::Hash, 4)
        );
        assert_eq!((m[0].value_size, m[0].max_entries, m[0].flags), (8, 16, 0));
        assert_eq!((m[1].map_type, m[1].value_size, m[1].flags), (MapType::Array, 32, 0x400));
        assert_eq!(
            l.program.relocations(),
            [
                Relocation { slot: 0, target: RelocTarget::Map { map: 0 } },
                Relocation { slot: 2, target: RelocTarget::MapValue { map: 1, offset: 8 } },
            ]
        );
        // As weir-elf writes them: map_idx (src 5) and map_idx_value (src 6), index in imm.
        let i = l.program.insns();
        assert_eq!((i[0].op, i[0].src, i[0].imm), (Op::LddwMapIdx, 5, 0));
        assert_eq!((i[2].op, i[2].src, i[2].imm), (Op::LddwMapIdxValue, 6, 1 | (8 << 32)));
        let want =
            Expected { accept: false, message: Some("invalid access to \"map\" # value".into()) };
        assert_eq!(l.kernel, Some(want));
        assert_eq!(l.rule.as_deref(), Some("map-value-bounds"));
        assert_eq!(l.notes, ["first", "second one"]);
        let l = parse("#! rule pkt-range  # the rule\n#! note a#b c # why\nexit").unwrap();
        assert_eq!((l.rule.as_deref(), l.notes[0].as_str()), (Some("pkt-range"), "a#b c"));
    }

    #[test]
    fn errors_render_with_a_caret() {
        let text = "#! type xdp\n#! map m hash key=4 value=4 entries=1 size=2\nexit\n";
        let e = parse(text).unwrap_err();
        let shown = e.render(text);
        assert!(shown.ends_with("|                                       ^"), "{shown}");
        assert!(shown.contains(" 2 | #! map m hash"), "{shown}");
    }

    #[test]
    fn plain_assembly_is_a_listing_without_directives() {
        let l = parse("mov %r0, 1\nexit\n").unwrap();
        assert_eq!((l.program.prog_type(), l.kernel, l.rule), (None, None, None));
        assert_eq!(l.program.len(), 2);
        assert!(l.program.maps().is_empty());
        let l = parse("#! kernel accept\n#! type socket_filter\nexit").unwrap();
        assert_eq!(l.kernel, Some(Expected { accept: true, message: None }));
        assert_eq!(l.program.prog_type(), Some(ProgType::SocketFilter));
        let l = parse("#! kernel reject\nexit").unwrap();
        assert_eq!(l.kernel, Some(Expected { accept: false, message: None }));
    }

    #[test]
    fn raw_map_forms_are_not_relocated() {
        let l = parse("#! map m array key=4 value=4 entries=1\nlddw %r1, map_fd(3)\nexit").unwrap();
        assert!(l.program.relocations().is_empty());
        assert_eq!(l.program.maps().len(), 1);
    }

    #[test]
    fn bad_input_names_line_column_and_reason() {
        bad("#! type kprobe\nexit", 1, 9, "unknown program type `kprobe`");
        bad("#! type\nexit", 1, 8, "one program type");
        bad("#! type xdp\n#! type tc\nexit", 2, 4, "second `type`");
        bad("#! map m hashmap key=4 value=4 entries=1\nexit", 1, 10, "unknown map type `hashmap`");
        bad("#! map m hash value=4 entries=1\nexit", 1, 32, "missing key=");
        bad("#! map m hash key=4 entries=1\nexit", 1, 30, "missing value=");
        bad("#! map m hash key=4 value=4\nexit", 1, 28, "missing entries=");
        bad("#! map m hash key=x4 value=4 entries=1", 1, 19, "bad number `x4`");
        bad("#! map m hash key=4 value=4 entries=0x1_0", 1, 37, "bad number");
        bad("#! map m hash key=4 value=99999999999 entries=1", 1, 27, "bad number");
        bad("#! map m hash key=4 key=4 value=4 entries=1", 1, 21, "`key=` given twice");
        bad("#! map m hash key=4 value=4 entries=1 size=3", 1, 39, "unknown map field `size`");
        bad("#! map m hash key=4 value=4 entries=1 7", 1, 39, "expected key=N");
        bad("#! map m\nexit", 1, 9, "a type after its name");
        bad("#! map\nexit", 1, 7, "a name and a type");
        bad(
            "#! map m array key=4 value=4 entries=1\n#! map m hash key=4 value=4 entries=1\nexit",
            2,
            8,
            "declared twice",
        );
        bad("#! kernel maybe\nexit", 1, 11, "expected accept or reject, found `maybe`");
        bad("#! kernel\nexit", 1, 10, "expected accept or reject");
        bad("#! kernel accept \"x\"\nexit", 1, 18, "takes no message");
        bad("#! kernel reject invalid access\nexit", 1, 18, "one quoted string");
        bad("#! kernel reject \"open\nexit", 1, 18, "unterminated string");
        bad("#! kernel reject \"a\\nb\"\nexit", 1, 20, "escapes");
        bad("#! kernel accept\n#! kernel reject\nexit", 2, 4, "second `kernel`");
        bad("#! rule\nexit", 1, 8, "needs a name");
        bad("#! rule a\n#! rule b\nexit", 2, 4, "second `rule`");
        bad("#!\nexit", 1, 3, "empty directive");
        bad("#! verdict accept\nexit", 1, 4, "unknown directive `verdict`");
        bad("mov %r0, 0\n  #! type xdp\nexit", 2, 3, "after the first instruction");
        bad("start:\n#! type xdp\nexit", 2, 1, "after the first instruction");
        // Assembler errors keep their place.
        bad("#! type xdp\nmov %r0, 0\nfoo %r1\nexit", 3, 1, "unknown mnemonic `foo`");
        // Map indices must name a declared map.
        bad(
            "#! map m array key=4 value=4 entries=1\nlddw %r1, map_idx(1)\nexit",
            2,
            11,
            "map_idx 1 out of range: 1 map(s)",
        );
        bad(
            "mov %r0, 0\n  lddw %r1, map_idx_value(0, 4)\nexit",
            2,
            13,
            "map_idx 0 out of range: 0 map(s)",
        );
    }

    #[test]
    fn the_corpus_reader_names_the_file() {
        let dir = std::env::temp_dir().join(format!("weir-listing-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("b-01-ok.s"), "#! kernel accept\nmov %r0, 0\nexit\n").unwrap();
        std::fs::write(dir.join("a-01-ok.s"), "exit\n").unwrap();
        std::fs::write(dir.join("README.md"), "not a listing").unwrap();
        let got = corpus(&dir).unwrap();
        let names: Vec<_> = got.iter().map(|(p, _)| p.file_name().unwrap().to_owned()).collect();
        assert_eq!(names, ["a-01-ok.s", "b-01-ok.s"]);
        std::fs::write(dir.join("c-01-bad.s"), "#! type nope\nexit\n").unwrap();
        let e = corpus(&dir).unwrap_err();
        assert!(e.contains("c-01-bad.s: line 1, column 9"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(corpus(&dir).is_err());
    }
}
