//! Calls against bindings: which helpers a program may call depends on what the caller
//! gives the engine ([`Bindings`]), so this is a check separate from [`super::validate`].

use super::{ValidateError, ValidateErrorKind};
use crate::abi::Bindings;
use crate::Program;
use weir_isa::ebpf::Op;

/// Reports the first `call` to a helper id with no binding, and the first `call kfunc`
/// (no engine supports kfuncs). Checks calls only: run [`super::validate`] as well.
pub fn validate_calls(program: &Program, bindings: &Bindings) -> Result<(), ValidateError> {
    for (index, insn) in program.insns().iter().enumerate() {
        let kind = match insn.op {
            Op::Call => {
                let bound = u32::try_from(insn.imm).is_ok_and(|id| bindings.helper(id).is_some());
                if bound {
                    continue;
                }
                ValidateErrorKind::UnknownHelper { id: insn.imm }
            }
            Op::CallKfunc => ValidateErrorKind::KfuncUnsupported { id: insn.imm },
            _ => continue,
        };
        return Err(ValidateError::new(index, kind));
    }
    Ok(())
}
