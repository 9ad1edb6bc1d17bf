//! [`ElfError`]: every refusal names where it is (the section and the byte offset inside it,
//! when there is one) and what is wrong.

use std::fmt;

/// Why an object, or one of its programs, was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElfError {
    /// The section the problem is in (`None`: the file as a whole, e.g. its header).
    pub section: Option<String>,
    /// The byte offset inside `section` (or inside the file when `section` is `None`).
    pub offset: Option<u64>,
    pub kind: ElfErrorKind,
}

/// The kinds of refusal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ElfErrorKind {
    /// The file is not well-formed: truncated, an index or an offset out of range, a record
    /// that contradicts itself. The text says which.
    Malformed(String),
    /// Well-formed, but uses something weir does not support (yet): the text names it.
    Unsupported(String),
    /// A program asked for by name that the object does not have.
    NoSuchProgram(String),
    /// A `.rodata` variable asked for by name that the object does not have.
    NoSuchVariable(String),
}

impl ElfError {
    pub(crate) fn malformed(section: Option<&str>, offset: Option<u64>, what: String) -> Self {
        ElfError {
            section: section.map(str::to_owned),
            offset,
            kind: ElfErrorKind::Malformed(what),
        }
    }

    pub(crate) fn unsupported(section: Option<&str>, offset: Option<u64>, what: String) -> Self {
        ElfError {
            section: section.map(str::to_owned),
            offset,
            kind: ElfErrorKind::Unsupported(what),
        }
    }

    /// Whether the refusal is for a feature weir does not support (as opposed to a broken
    /// file).
    pub fn is_unsupported(&self) -> bool {
        matches!(self.kind, ElfErrorKind::Unsupported(_))
    }
}

impl fmt::Display for ElfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.section, self.offset) {
            (Some(s), Some(o)) => write!(f, "section `{s}` offset {o:#x}: ")?,
            (Some(s), None) => write!(f, "section `{s}`: ")?,
            (None, Some(o)) => write!(f, "file offset {o:#x}: ")?,
            (None, None) => {}
        }
        match &self.kind {
            ElfErrorKind::Malformed(what) => write!(f, "malformed object: {what}"),
            ElfErrorKind::Unsupported(what) => write!(f, "not supported: {what}"),
            ElfErrorKind::NoSuchProgram(name) => write!(f, "no program named `{name}`"),
            ElfErrorKind::NoSuchVariable(name) => {
                write!(f, "no read-only global variable named `{name}`")
            }
        }
    }
}

impl std::error::Error for ElfError {}
