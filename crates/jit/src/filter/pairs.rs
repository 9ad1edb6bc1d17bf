//! [`weir_filter::Pred::Pairs`] in native code: the code walks both tests as the reference
//! evaluator does (each branch's guards, then its fields' loads; an abort ends a walk),
//! recording each loaded value in a stack area and its field's bit in a mask, then calls
//! [`super::code::decide_pairs`], which probes the list's table
//! ([`weir_filter::PairTable::decide`]). So the code is the size of one term, whatever the
//! length of the list, and the table is shared with the IR (an `Arc` the `NativeFilter`
//! keeps alive while the code holds its address).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::StackSlot;
use cranelift_codegen::ir::{types, AbiParam, Block, InstBuilder, Signature};
use cranelift_codegen::ir::{StackSlotData, StackSlotKind};
use cranelift_frontend::Variable;
use weir_filter::{PairBranch, Pairs};

use super::code::{decide_pairs, PAIR_FIELDS};
use super::lower::Lowering;
use super::CompileError;

impl Lowering<'_, '_> {
    /// Branches to `t` when the list holds, `f` when not; its aborts go where aborts go.
    pub(super) fn pairs(
        &mut self,
        pairs: &Pairs,
        t: Block,
        f: Block,
        depth: u32,
    ) -> Result<(), CompileError> {
        if pairs.first.field_count() > PAIR_FIELDS || pairs.second.field_count() > PAIR_FIELDS {
            return self.pred(&pairs.expand(), t, f, depth);
        }
        let words = u32::try_from(2 * PAIR_FIELDS * 4).unwrap_or(u32::MAX);
        let area = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            words,
            2,
        ));
        let zero = self.b.ins().iconst(types::I32, 0);
        let masks = [self.fresh_var(), self.fresh_var()];
        let aborted = self.fresh_var();
        for var in [masks[0], masks[1], aborted] {
            self.b.def_var(var, zero);
        }
        for (side, test) in [&pairs.first, &pairs.second].into_iter().enumerate() {
            let done = self.new_block();
            let cut = self.new_block();
            let outer = std::mem::replace(&mut self.abort, cut);
            let mut index = 0usize;
            let walked =
                self.walk_branches(&test.branches, side, area, masks[side], &mut index, depth);
            if walked.is_ok() {
                self.jump(done);
            }
            self.abort = outer;
            walked?;
            self.switch_to(cut);
            let bits = self.b.use_var(aborted);
            let bits = self.b.ins().bor_imm(bits, 1i64 << side);
            self.b.def_var(aborted, bits);
            self.jump(done);
            self.switch_to(done);
        }
        let mut sig = Signature::new(self.b.func.signature.call_conv);
        sig.params.extend(
            [types::I64, types::I64, types::I32, types::I32, types::I32].map(AbiParam::new),
        );
        sig.returns.push(AbiParam::new(types::I32));
        let sig = self.b.import_signature(sig);
        let callee = self.b.ins().iconst(types::I64, decide_pairs as *const () as usize as i64);
        let table = self.b.ins().iconst(types::I64, std::sync::Arc::as_ptr(&pairs.table) as i64);
        self.tables.pairs.push(pairs.table.clone());
        let values = self.b.ins().stack_addr(types::I64, area, 0);
        let (first, second) = (self.b.use_var(masks[0]), self.b.use_var(masks[1]));
        let bits = self.b.use_var(aborted);
        let call = self.b.ins().call_indirect(sig, callee, &[table, values, first, second, bits]);
        let verdict = *self
            .b
            .inst_results(call)
            .first()
            .ok_or(CompileError::Internal("pair probe result"))?;
        let holds = self.b.ins().icmp_imm(IntCC::Equal, verdict, 1);
        let rest = self.new_block();
        self.branch(holds, t, rest);
        self.switch_to(rest);
        let aborts = self.b.ins().icmp_imm(IntCC::Equal, verdict, 2);
        self.abort_if(aborts);
        self.jump(f);
        Ok(())
    }

    /// The walk of `branches` (nested ones included): each branch's guards, then its
    /// fields, each stored at word `side * PAIR_FIELDS + index` of `area` with its bit set in
    /// `mask`, then its nested branches; the next branch when a guard is false. Ends on
    /// the current path (the walk's end); aborts go to `self.abort`.
    fn walk_branches(
        &mut self,
        branches: &[PairBranch],
        side: usize,
        area: StackSlot,
        mask: Variable,
        index: &mut usize,
        depth: u32,
    ) -> Result<(), CompileError> {
        for branch in branches {
            let (load, next) = (self.new_block(), self.new_block());
            self.sequence(&branch.guards, load, next, depth, true)?;
            self.switch_to(load);
            for field in &branch.fields {
                self.need_loads(&[field]);
                let v = self.expr(field, depth)?;
                let at = i32::try_from(4 * (side * PAIR_FIELDS + *index))
                    .map_err(|_| CompileError::Internal("pair values area"))?;
                self.b.ins().stack_store(v, area, at);
                let bits = self.b.use_var(mask);
                let bits = self.b.ins().bor_imm(bits, 1i64 << *index);
                self.b.def_var(mask, bits);
                *index += 1;
            }
            self.walk_branches(&branch.inner, side, area, mask, index, depth)?;
            self.jump(next);
            self.switch_to(next);
        }
        Ok(())
    }
}
