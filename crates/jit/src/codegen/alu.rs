//! Arithmetic, byte swaps and jump conditions. The eBPF rules that differ from Cranelift's
//! instructions are made explicit here: division and remainder by zero (0, or the dividend
//! unchanged) and the signed overflow case (`MIN / -1 = MIN`, `MIN % -1 = 0`) never reach a
//! trapping host division; shifts need nothing, Cranelift already masks the amount by the
//! operand's width, which is the eBPF rule. 32-bit operations compute on `i32` values and
//! zero-extend the result.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Type, Value};
use weir_isa::ebpf::{Insn, Op};

use super::Translator;
use crate::CompileError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Sdiv,
    Mod,
    Smod,
    Or,
    And,
    Xor,
    Lsh,
    Rsh,
    Arsh,
    Mov,
}

/// Whether `op` divides (or takes the remainder) by a register: the operations whose
/// zero test a proven non-zero divisor drops (`super::facts`).
pub(super) fn divides_by_register(op: Op) -> bool {
    matches!(binary(op), Some((BinOp::Div | BinOp::Sdiv | BinOp::Mod | BinOp::Smod, _, false)))
}

/// `op` as (operation, 64-bit?, immediate form?), for the binary ALU operations.
fn binary(op: Op) -> Option<(BinOp, bool, bool)> {
    use BinOp::*;
    use Op::*;
    Some(match op {
        Add64Imm => (Add, true, true),
        Add64Reg => (Add, true, false),
        Sub64Imm => (Sub, true, true),
        Sub64Reg => (Sub, true, false),
        Mul64Imm => (Mul, true, true),
        Mul64Reg => (Mul, true, false),
        Div64Imm => (Div, true, true),
        Div64Reg => (Div, true, false),
        Sdiv64Imm => (Sdiv, true, true),
        Sdiv64Reg => (Sdiv, true, false),
        Mod64Imm => (Mod, true, true),
        Mod64Reg => (Mod, true, false),
        Smod64Imm => (Smod, true, true),
        Smod64Reg => (Smod, true, false),
        Or64Imm => (Or, true, true),
        Or64Reg => (Or, true, false),
        And64Imm => (And, true, true),
        And64Reg => (And, true, false),
        Xor64Imm => (Xor, true, true),
        Xor64Reg => (Xor, true, false),
        Lsh64Imm => (Lsh, true, true),
        Lsh64Reg => (Lsh, true, false),
        Rsh64Imm => (Rsh, true, true),
        Rsh64Reg => (Rsh, true, false),
        Arsh64Imm => (Arsh, true, true),
        Arsh64Reg => (Arsh, true, false),
        Mov64Imm => (Mov, true, true),
        Mov64Reg => (Mov, true, false),
        Add32Imm => (Add, false, true),
        Add32Reg => (Add, false, false),
        Sub32Imm => (Sub, false, true),
        Sub32Reg => (Sub, false, false),
        Mul32Imm => (Mul, false, true),
        Mul32Reg => (Mul, false, false),
        Div32Imm => (Div, false, true),
        Div32Reg => (Div, false, false),
        Sdiv32Imm => (Sdiv, false, true),
        Sdiv32Reg => (Sdiv, false, false),
        Mod32Imm => (Mod, false, true),
        Mod32Reg => (Mod, false, false),
        Smod32Imm => (Smod, false, true),
        Smod32Reg => (Smod, false, false),
        Or32Imm => (Or, false, true),
        Or32Reg => (Or, false, false),
        And32Imm => (And, false, true),
        And32Reg => (And, false, false),
        Xor32Imm => (Xor, false, true),
        Xor32Reg => (Xor, false, false),
        Lsh32Imm => (Lsh, false, true),
        Lsh32Reg => (Lsh, false, false),
        Rsh32Imm => (Rsh, false, true),
        Rsh32Reg => (Rsh, false, false),
        Arsh32Imm => (Arsh, false, true),
        Arsh32Reg => (Arsh, false, false),
        Mov32Imm => (Mov, false, true),
        Mov32Reg => (Mov, false, false),
        _ => return None,
    })
}

/// The comparison of a conditional jump: (condition, 64-bit?, immediate form?); `None` as
/// the condition means `jset` (any common bit).
pub(super) fn comparison(op: Op) -> Option<(Option<IntCC>, bool, bool)> {
    use IntCC::*;
    use Op::*;
    let (cc, wide, imm) = match op {
        Jeq64Imm => (Some(Equal), true, true),
        Jeq64Reg => (Some(Equal), true, false),
        Jgt64Imm => (Some(UnsignedGreaterThan), true, true),
        Jgt64Reg => (Some(UnsignedGreaterThan), true, false),
        Jge64Imm => (Some(UnsignedGreaterThanOrEqual), true, true),
        Jge64Reg => (Some(UnsignedGreaterThanOrEqual), true, false),
        Jset64Imm => (None, true, true),
        Jset64Reg => (None, true, false),
        Jne64Imm => (Some(NotEqual), true, true),
        Jne64Reg => (Some(NotEqual), true, false),
        Jsgt64Imm => (Some(SignedGreaterThan), true, true),
        Jsgt64Reg => (Some(SignedGreaterThan), true, false),
        Jsge64Imm => (Some(SignedGreaterThanOrEqual), true, true),
        Jsge64Reg => (Some(SignedGreaterThanOrEqual), true, false),
        Jlt64Imm => (Some(UnsignedLessThan), true, true),
        Jlt64Reg => (Some(UnsignedLessThan), true, false),
        Jle64Imm => (Some(UnsignedLessThanOrEqual), true, true),
        Jle64Reg => (Some(UnsignedLessThanOrEqual), true, false),
        Jslt64Imm => (Some(SignedLessThan), true, true),
        Jslt64Reg => (Some(SignedLessThan), true, false),
        Jsle64Imm => (Some(SignedLessThanOrEqual), true, true),
        Jsle64Reg => (Some(SignedLessThanOrEqual), true, false),
        Jeq32Imm => (Some(Equal), false, true),
        Jeq32Reg => (Some(Equal), false, false),
        Jgt32Imm => (Some(UnsignedGreaterThan), false, true),
        Jgt32Reg => (Some(UnsignedGreaterThan), false, false),
        Jge32Imm => (Some(UnsignedGreaterThanOrEqual), false, true),
        Jge32Reg => (Some(UnsignedGreaterThanOrEqual), false, false),
        Jset32Imm => (None, false, true),
        Jset32Reg => (None, false, false),
        Jne32Imm => (Some(NotEqual), false, true),
        Jne32Reg => (Some(NotEqual), false, false),
        Jsgt32Imm => (Some(SignedGreaterThan), false, true),
        Jsgt32Reg => (Some(SignedGreaterThan), false, false),
        Jsge32Imm => (Some(SignedGreaterThanOrEqual), false, true),
        Jsge32Reg => (Some(SignedGreaterThanOrEqual), false, false),
        Jlt32Imm => (Some(UnsignedLessThan), false, true),
        Jlt32Reg => (Some(UnsignedLessThan), false, false),
        Jle32Imm => (Some(UnsignedLessThanOrEqual), false, true),
        Jle32Reg => (Some(UnsignedLessThanOrEqual), false, false),
        Jslt32Imm => (Some(SignedLessThan), false, true),
        Jslt32Reg => (Some(SignedLessThan), false, false),
        Jsle32Imm => (Some(SignedLessThanOrEqual), false, true),
        Jsle32Reg => (Some(SignedLessThanOrEqual), false, false),
        _ => return None,
    };
    Some((cc, wide, imm))
}

impl Translator<'_, '_> {
    /// The second operand of an instruction at width `ty`: `src`, or the immediate (64-bit:
    /// sign-extended; 32-bit: its low 32 bits), with its value when it is known.
    fn operand(&mut self, insn: &Insn, ty: Type, imm: bool) -> (Value, Option<i64>) {
        if !imm {
            let src = self.get(insn.src);
            return (self.narrow(src, ty), None);
        }
        let value = i64::from(insn.imm as i32);
        let wide = self.imm(value);
        (self.narrow(wide, ty), self.known(value))
    }

    pub(super) fn narrow(&mut self, value: Value, ty: Type) -> Value {
        if ty == types::I64 {
            value
        } else {
            self.b.ins().ireduce(ty, value)
        }
    }

    /// A result at width `ty`, zero-extended into a register value.
    pub(super) fn widen(&mut self, value: Value, ty: Type) -> Value {
        if ty == types::I64 {
            value
        } else {
            self.b.ins().uextend(types::I64, value)
        }
    }

    pub(super) fn alu(&mut self, insn: &Insn) -> Result<(), CompileError> {
        if let Some((op, wide, imm)) = binary(insn.op) {
            let ty = if wide { types::I64 } else { types::I32 };
            let (b, known) = self.operand(insn, ty, imm);
            let result = if op == BinOp::Mov {
                b
            } else {
                let dst = self.get(insn.dst);
                let a = self.narrow(dst, ty);
                if insn.op == Op::Add64Reg {
                    // Kept for the address of a direct access through `dst` (`memory`).
                    self.pending_sum = Some((dst, b));
                }
                // A known operand, seen at the operation's width.
                let known = known.map(|k| if wide { k } else { i64::from(k as i32) });
                self.binary(op, ty, a, b, known)
            };
            let result = self.widen(result, ty);
            let sum = self.pending_sum.take();
            self.set(insn.dst, result)?;
            if let Some(slot) = self.sums.get_mut(usize::from(insn.dst)) {
                *slot = sum;
            }
            return Ok(());
        }
        let dst = self.get(insn.dst);
        let src = self.get(insn.src);
        let result = match insn.op {
            Op::Neg64 => self.b.ins().ineg(dst),
            Op::Neg32 => {
                let low = self.narrow(dst, types::I32);
                let negated = self.b.ins().ineg(low);
                self.widen(negated, types::I32)
            }
            Op::MovSx8To64 | Op::MovSx16To64 | Op::MovSx32To64 => {
                let ty = match insn.op {
                    Op::MovSx8To64 => types::I8,
                    Op::MovSx16To64 => types::I16,
                    _ => types::I32,
                };
                let low = self.narrow(src, ty);
                self.b.ins().sextend(types::I64, low)
            }
            Op::MovSx8To32 | Op::MovSx16To32 => {
                let ty = if insn.op == Op::MovSx8To32 { types::I8 } else { types::I16 };
                let low = self.narrow(src, ty);
                let extended = self.b.ins().sextend(types::I32, low);
                self.widen(extended, types::I32)
            }
            Op::Le16 => self.b.ins().band_imm(dst, 0xffff),
            Op::Le32 => {
                let low = self.narrow(dst, types::I32);
                self.widen(low, types::I32)
            }
            Op::Le64 => dst,
            Op::Be16 | Op::Bswap16 => {
                // The low 32 bits swapped, then shifted down 16: the low two bytes swapped,
                // zero-extended. Shorter than a 16-bit swap and its zero-extension (x86-64:
                // `bswap r32; shr r32, 16`, 5 bytes for 8, and the 32-bit result needs no
                // extension), which keeps a checksum loop within one 32-byte fetch window.
                let low = self.narrow(dst, types::I32);
                let swapped = self.b.ins().bswap(low);
                let shifted = self.b.ins().ushr_imm(swapped, 16);
                self.widen(shifted, types::I32)
            }
            Op::Be32 | Op::Bswap32 => {
                let low = self.narrow(dst, types::I32);
                let swapped = self.b.ins().bswap(low);
                self.widen(swapped, types::I32)
            }
            Op::Be64 | Op::Bswap64 => self.b.ins().bswap(dst),
            _ => return Err(self.error(crate::CompileErrorKind::BadTarget)),
        };
        self.set(insn.dst, result)
    }

    /// `a op b` at width `ty`, with eBPF's meaning. `known` is `b` when it is a constant.
    fn binary(&mut self, op: BinOp, ty: Type, a: Value, b: Value, known: Option<i64>) -> Value {
        let bits = i64::from(ty.bits());
        match op {
            BinOp::Add => self.b.ins().iadd(a, b),
            BinOp::Sub => self.b.ins().isub(a, b),
            BinOp::Mul => self.b.ins().imul(a, b),
            BinOp::Or => self.b.ins().bor(a, b),
            BinOp::And => self.b.ins().band(a, b),
            BinOp::Xor => self.b.ins().bxor(a, b),
            BinOp::Mov => b,
            BinOp::Lsh | BinOp::Rsh | BinOp::Arsh => match known {
                Some(amount) => {
                    let amount = amount & (bits - 1);
                    match op {
                        BinOp::Lsh => self.b.ins().ishl_imm(a, amount),
                        BinOp::Rsh => self.b.ins().ushr_imm(a, amount),
                        _ => self.b.ins().sshr_imm(a, amount),
                    }
                }
                None => match op {
                    BinOp::Lsh => self.b.ins().ishl(a, b),
                    BinOp::Rsh => self.b.ins().ushr(a, b),
                    _ => self.b.ins().sshr(a, b),
                },
            },
            BinOp::Div | BinOp::Mod | BinOp::Sdiv | BinOp::Smod => match known {
                Some(divisor) => self.divide_by_constant(op, ty, a, b, divisor),
                None => self.divide(op, ty, a, b),
            },
        }
    }

    /// Division and remainder by a known divisor: the special cases are decided here, the
    /// rest is a plain (never trapping) host division Cranelift may strength-reduce.
    fn divide_by_constant(
        &mut self,
        op: BinOp,
        ty: Type,
        a: Value,
        b: Value,
        divisor: i64,
    ) -> Value {
        match (op, divisor) {
            (BinOp::Div | BinOp::Sdiv, 0) => self.b.ins().iconst(ty, 0),
            (BinOp::Mod | BinOp::Smod, 0) => a,
            (BinOp::Sdiv, -1) => self.b.ins().ineg(a),
            (BinOp::Smod, -1) => self.b.ins().iconst(ty, 0),
            (BinOp::Div, _) => self.b.ins().udiv(a, b),
            (BinOp::Mod, _) => self.b.ins().urem(a, b),
            (BinOp::Sdiv, _) => self.b.ins().sdiv(a, b),
            _ => self.b.ins().srem(a, b),
        }
    }

    /// Division and remainder by a run-time divisor: the host division always gets a
    /// divisor that is neither 0 nor -1, and selects put the eBPF results in those cases.
    /// A divisor the verifier proved non-zero goes to the host division as it is (signed
    /// ones still test -1, whose host division overflows).
    fn divide(&mut self, op: BinOp, ty: Type, a: Value, b: Value) -> Value {
        if self.plan.nonzero(self.pc) {
            return match op {
                BinOp::Div => self.b.ins().udiv(a, b),
                BinOp::Mod => self.b.ins().urem(a, b),
                _ => {
                    let zero = self.b.ins().iconst(ty, 0);
                    let one = self.b.ins().iconst(ty, 1);
                    let by_minus_one = self.b.ins().icmp_imm(IntCC::Equal, b, -1);
                    let safe = self.b.ins().select(by_minus_one, one, b);
                    if op == BinOp::Sdiv {
                        let q = self.b.ins().sdiv(a, safe);
                        let negated = self.b.ins().ineg(a);
                        self.b.ins().select(by_minus_one, negated, q)
                    } else {
                        let r = self.b.ins().srem(a, safe);
                        self.b.ins().select(by_minus_one, zero, r)
                    }
                }
            };
        }
        let zero = self.b.ins().iconst(ty, 0);
        let one = self.b.ins().iconst(ty, 1);
        let by_zero = self.b.ins().icmp_imm(IntCC::Equal, b, 0);
        match op {
            BinOp::Div | BinOp::Mod => {
                let safe = self.b.ins().select(by_zero, one, b);
                if op == BinOp::Div {
                    let q = self.b.ins().udiv(a, safe);
                    self.b.ins().select(by_zero, zero, q)
                } else {
                    let r = self.b.ins().urem(a, safe);
                    self.b.ins().select(by_zero, a, r)
                }
            }
            _ => {
                let by_minus_one = self.b.ins().icmp_imm(IntCC::Equal, b, -1);
                let special = self.b.ins().bor(by_zero, by_minus_one);
                let safe = self.b.ins().select(special, one, b);
                if op == BinOp::Sdiv {
                    let q = self.b.ins().sdiv(a, safe);
                    let negated = self.b.ins().ineg(a);
                    let q = self.b.ins().select(by_minus_one, negated, q);
                    self.b.ins().select(by_zero, zero, q)
                } else {
                    let r = self.b.ins().srem(a, safe);
                    let r = self.b.ins().select(by_minus_one, zero, r);
                    self.b.ins().select(by_zero, a, r)
                }
            }
        }
    }

    /// Whether the conditional jump `insn` is taken.
    pub(super) fn condition(&mut self, insn: &Insn) -> Value {
        let Some((cc, wide, imm)) = comparison(insn.op) else {
            return self.b.ins().iconst(types::I8, 0);
        };
        let ty = if wide { types::I64 } else { types::I32 };
        let dst = self.get(insn.dst);
        let a = self.narrow(dst, ty);
        let (b, known) = self.operand(insn, ty, imm);
        let known = known.map(|k| if wide { k } else { i64::from(k as i32) });
        match (cc, known) {
            (None, Some(mask)) => {
                let common = self.b.ins().band_imm(a, mask);
                self.b.ins().icmp_imm(IntCC::NotEqual, common, 0)
            }
            (None, None) => {
                let common = self.b.ins().band(a, b);
                self.b.ins().icmp_imm(IntCC::NotEqual, common, 0)
            }
            (Some(cc), Some(k)) => self.b.ins().icmp_imm(cc, a, k),
            (Some(cc), None) => self.b.ins().icmp(cc, a, b),
        }
    }
}
