//! Deep and long filters through the optimizer, both emitters, the evaluator and the
//! derived traits, on a 2 MiB thread stack (a spawned thread's default).
//!
//! The passes recurse on the tree, so its depth is what must stay bounded: 1,100 levels is
//! the native compiler's limit, above pflang's (1,000, plus what the optimizer may add).
//! The length of an `and`/`or` list costs no stack.

use crate::emit::{cbpf, ebpf};
use crate::{BinOp, CmpOp, Expr, Filter, Pred, Size};
use weir_program::ProgType;

const DEPTH: usize = 1_100;

fn byte(k: usize) -> Expr {
    Expr::load_at((k % 40) as u32, Size::Byte)
}

fn on_small_stack(f: Filter) {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let copy = f.clone();
            assert_eq!(copy, f);
            let optimized = crate::opt::optimize(&f);
            for g in [&f, &optimized] {
                let _ = cbpf::emit(g);
                let _ = ebpf::emit(g, ProgType::SocketFilter).expect("ebpf");
                for len in [0usize, 20, 64] {
                    let packet = vec![1u8; len];
                    assert_eq!(g.run(&packet, 64), f.run(&packet, 64));
                }
                assert!(!g.pred.to_string().is_empty());
            }
        })
        .expect("spawn")
        .join()
        .expect("a stage panicked");
}

#[test]
fn nested_junctions_and_nots() {
    let mut p = Pred::eq(byte(3), 1);
    for i in 1..DEPTH {
        p = match i % 3 {
            0 => Pred::Not(Box::new(p)),
            1 => Pred::And(vec![Pred::eq(byte(i), 1), p]),
            _ => Pred::Or(vec![p, Pred::eq(byte(i), 9)]),
        };
    }
    on_small_stack(Filter::new(p));
}

#[test]
fn nested_expressions() {
    let ops = [BinOp::Add, BinOp::Sub, BinOp::Div, BinOp::Xor, BinOp::Shr];
    let mut e = byte(1);
    for i in 1..DEPTH - 1 {
        e = if i % 2 == 0 {
            Expr::binary(ops[i % ops.len()], e, byte(i))
        } else {
            Expr::binary(ops[i % ops.len()], Expr::WireLen.plus(1), e)
        };
    }
    on_small_stack(Filter::new(Pred::cmp(CmpOp::Ne, e, Expr::Const(5))));
    let mut e = byte(1);
    for _ in 1..DEPTH - 1 {
        e = Expr::load(e, Size::Byte);
    }
    on_small_stack(Filter::new(Pred::cmp(CmpOp::Ne, e, Expr::Const(5))));
}

#[test]
fn long_lists() {
    let n = 100_000;
    let any = Pred::Or((0..n).map(|i| Pred::eq(byte(i), (i % 7) as u32)).collect());
    on_small_stack(Filter::new(any));
    let all = Pred::And(
        (0..n).map(|i| Pred::cmp(CmpOp::Ne, Expr::WireLen, Expr::Const(i as u32))).collect(),
    );
    on_small_stack(Filter::new(all));
}
