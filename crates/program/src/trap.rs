//! Traps: how a program run fails. Traps are values, never panics, and their numeric codes
//! are stable across engines and releases (the JIT returns them from native code).

use std::fmt;

/// Why a run stopped abnormally. The discriminants are the stable codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum TrapCode {
    /// A load or store outside every region the program may touch.
    OutOfBounds = 1,
    /// A store to a region the program may only read (e.g. a read-only context).
    ReadOnly = 2,
    /// The instruction budget ran out (a loop that does not end, or a very long run).
    InstructionBudget = 3,
    /// Local calls nested deeper than the configured limit.
    CallDepth = 4,
    /// A helper id with no binding.
    UnknownHelper = 5,
    /// A helper reported failure.
    HelperFailed = 6,
    /// A local call or call-by-register to something that is not a function.
    BadCallTarget = 7,
    /// An instruction the engine cannot execute (e.g. kfunc calls, pseudo `lddw` forms
    /// without bindings).
    Unsupported = 8,
    /// Execution ran off the end of the program or into the second slot of `lddw`.
    BadJump = 9,
}

impl TrapCode {
    pub fn code(self) -> u32 {
        self as u32
    }

    pub fn from_code(code: u32) -> Option<TrapCode> {
        use TrapCode::*;
        [
            OutOfBounds,
            ReadOnly,
            InstructionBudget,
            CallDepth,
            UnknownHelper,
            HelperFailed,
            BadCallTarget,
            Unsupported,
            BadJump,
        ]
        .into_iter()
        .find(|c| c.code() == code)
    }

    /// A short stable name, used in `-- error` sections of the conformance corpus.
    pub fn name(self) -> &'static str {
        match self {
            TrapCode::OutOfBounds => "out of bounds",
            TrapCode::ReadOnly => "write to read-only memory",
            TrapCode::InstructionBudget => "instruction budget exhausted",
            TrapCode::CallDepth => "call depth exceeded",
            TrapCode::UnknownHelper => "unknown helper",
            TrapCode::HelperFailed => "helper failed",
            TrapCode::BadCallTarget => "bad call target",
            TrapCode::Unsupported => "unsupported instruction",
            TrapCode::BadJump => "bad jump",
        }
    }
}

/// A trap with where it happened: the slot index and, for memory traps, the address and
/// access size; for helper traps, the helper id in `addr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Trap {
    pub code: TrapCode,
    pub pc: usize,
    pub addr: u64,
    pub size: u32,
}

impl Trap {
    pub fn new(code: TrapCode, pc: usize) -> Self {
        Trap { code, pc, addr: 0, size: 0 }
    }

    pub fn memory(code: TrapCode, pc: usize, addr: u64, size: u32) -> Self {
        Trap { code, pc, addr, size }
    }
}

impl fmt::Display for Trap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at instruction {}", self.code.name(), self.pc)?;
        match self.code {
            TrapCode::OutOfBounds | TrapCode::ReadOnly => {
                write!(f, ": {}-byte access at {:#x}", self.size, self.addr)
            }
            TrapCode::UnknownHelper | TrapCode::HelperFailed => write!(f, ": helper {}", self.addr),
            _ => Ok(()),
        }
    }
}

impl std::error::Error for Trap {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_and_round_trip() {
        assert_eq!(TrapCode::OutOfBounds.code(), 1);
        assert_eq!(TrapCode::BadJump.code(), 9);
        for c in 1..=9 {
            assert_eq!(TrapCode::from_code(c).unwrap().code(), c);
        }
        assert_eq!(TrapCode::from_code(0), None);
    }

    #[test]
    fn display_names_the_place() {
        let t = Trap::memory(TrapCode::OutOfBounds, 3, 0x1000, 4);
        assert_eq!(t.to_string(), "out of bounds at instruction 3: 4-byte access at 0x1000");
    }
}
