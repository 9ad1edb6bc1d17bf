#![cfg(test)]
use weir_filter::{BinOp, CmpOp, Expr, Filter, Pred, Size};

fn build(kind: &str, d: usize) -> Filter {
    let byte = |k: u32| Expr::load_at(k, Size::Byte);
    match kind {
        "pred" => {
            let mut p = Pred::eq(byte(3), 3);
            for i in 0..d {
                p = match i % 3 {
                    0 => Pred::Not(Box::new(p)),
                    1 => Pred::And(vec![Pred::eq(byte((i % 7) as u32), 0), p]),
                    _ => Pred::Or(vec![p, Pred::eq(byte((i % 5) as u32), 9)]),
                };
            }
            Filter::new(p)
        }
        "andor" => {
            let mut p = Pred::eq(byte(3), 3);
            for i in 0..d {
                p = match i % 2 {
                    0 => Pred::And(vec![p, Pred::eq(byte((i % 7) as u32), 0)]),
                    _ => Pred::Or(vec![p, Pred::eq(byte((i % 5) as u32), 9)]),
                };
            }
            Filter::new(p)
        }
        "expr" => {
            let mut e = byte(1);
            for i in 0..d {
                e = if i % 2 == 0 { Expr::binary(BinOp::Add, e, byte((i % 9) as u32)) } else { Expr::binary(BinOp::Div, e, Expr::WireLen) };
            }
            Filter::new(Pred::cmp(CmpOp::Ne, e, Expr::Const(5)))
        }
        "rexpr" => {
            let mut e = byte(1);
            for i in 0..d {
                e = Expr::binary(BinOp::Mod, byte((i % 9) as u32), e);
            }
            Filter::new(Pred::cmp(CmpOp::Ne, e, Expr::Const(5)))
        }
        "load" => {
            let mut e = byte(1);
            for _ in 0..d {
                e = Expr::load(e, Size::Byte);
            }
            Filter::new(Pred::cmp(CmpOp::Ne, e, Expr::Const(5)))
        }
        _ => panic!(),
    }
}

#[test]
#[ignore]
fn probe() {
    let kind = std::env::var("PK").unwrap();
    let d: usize = std::env::var("PD").unwrap().parse().unwrap();
    let stage = std::env::var("PS").unwrap();
    let f = build(&kind, d);
    let h = std::thread::Builder::new().stack_size(2 << 20).spawn(move || {
        match stage.as_str() {
            "clone" => { let g = f.clone(); assert_eq!(g, f); }
            "opt" => { let _ = weir_filter::opt::optimize(&f); }
            "cbpf" => { let r = weir_filter::emit::cbpf::emit(&f); eprintln!("cbpf ok={}", r.is_ok()); }
            "ebpf" => { let r = weir_filter::emit::ebpf::emit(&f, weir_program::ProgType::SocketFilter); eprintln!("ebpf ok={}", r.is_ok()); }
            "jit" => { let r = weir_jit::filter::compile(&f); eprintln!("jit {:?}", r.as_ref().err()); }
            "eval" => { let _ = f.run(&[0u8; 64], 64); }
            "disp" => { let _ = format!("{}", f.pred).len(); }
            _ => {}
        }
        drop(f);
    }).unwrap();
    h.join().unwrap();
}
