//! `control::Table`: handles as the kernel gives them, adds and deletes checked as tc
//! checks them (refusals change nothing), and stats rows that stay with their rules.

use weir_flow::control::{handles, Selector, Table};
use weir_flow::{Classifier, RuleSet, Verdict, Work};

/// An IPv4/UDP frame to `port`, as the classifier sees it: (verdict, line).
fn run(c: &Classifier, port: u16) -> (Verdict, Option<usize>) {
    let mut f = vec![0u8; 42];
    f[12] = 0x08;
    f[14] = 0x45;
    f[23] = 17;
    f[36..38].copy_from_slice(&port.to_be_bytes());
    let mut m = Vec::new();
    let mut w = Work::new(&mut f, 42, 0, 5_000_000_000, &mut m);
    let o = c.process(&mut w);
    (o.verdict(), o.line())
}

const RULES: &str = "prio 2 protocol ip flower ip_proto udp dst_port 53 action drop\n\
prio 2 protocol ip flower ip_proto udp dst_port 54 action drop\n\
prio 2 handle 0x7 protocol ip flower ip_proto udp dst_port 55 action drop\n\
prio 2 protocol ip flower ip_proto udp dst_port 56 action drop\n\
\n\
prio 9 protocol all flower action pass\n";

#[test]
fn handles_are_the_kernels() {
    let set = RuleSet::parse(RULES).unwrap();
    // Lowest free from 1 within (chain, prio); a written handle is kept.
    assert_eq!(handles(&set), vec![1, 2, 7, 3, 1]);
}

/// Random files of rules over a few chains and priorities, some with written handles:
/// every handle the table gives is the lowest one free within its (chain, prio) when its
/// rule comes, counted here from the rules before it.
#[test]
fn handles_are_the_lowest_free_in_random_files() {
    let mut rng = weir_testkit::SplitMix64::new(0x4a4d);
    let mut checked = 0;
    for _ in 0..300 {
        let mut text = String::new();
        let mut want: Vec<u32> = Vec::new();
        let mut taken: Vec<(u32, u32, u32)> = Vec::new();
        for _ in 0..rng.below(40) {
            let (chain, prio) = (rng.below(2) as u32, 1 + rng.below(3) as u32);
            let written = (rng.below(3) == 0).then(|| 1 + rng.below(12) as u32);
            if written.is_some_and(|h| taken.contains(&(chain, prio, h))) {
                continue;
            }
            let handle = written.unwrap_or_else(|| {
                (1..).find(|h| !taken.contains(&(chain, prio, *h))).unwrap_or(0)
            });
            taken.push((chain, prio, handle));
            want.push(handle);
            let written = written.map_or(String::new(), |h| format!("handle {h} "));
            text += &format!("chain {chain} prio {prio} {written}protocol ip flower action drop\n");
        }
        let set = RuleSet::parse(&text).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        assert_eq!(handles(&set), want, "{text}");
        checked += want.len();
    }
    assert!(checked > 3000, "{checked} rules");
}

#[test]
fn refused_changes_leave_the_table_and_the_classifier_alone() {
    let set = RuleSet::parse(RULES).unwrap();
    let c = Classifier::new(&set);
    let mut t = Table::new(&set);
    for (rule, words) in [
        ("prio 2 protocol ipv6 flower action drop", "priority/protocol not found"),
        ("prio 2 handle 7 protocol ip flower action drop", "Filter already exists"),
        ("protocol ip flower action mirred egress redirect dev a/b", "not a valid ifname"),
        ("protocol ip flower ip_proto udp dst_port 99999 action drop", "dst_port"),
        (
            "prio 1 protocol ip flower action drop\nprio 3 protocol ip flower action drop",
            "one rule",
        ),
    ] {
        let e = t.add(&c, rule).unwrap_err();
        assert!(e.contains(words), "{rule}: {e}");
    }
    for (sel, words) in [
        ("prio 3", "priority/protocol not found"),
        ("prio 2 protocol ipv6", "priority/protocol not found"),
        ("prio 2 handle 9", "Specified filter handle not found"),
        ("handle 1", "give prio too"),
        ("line 5", "no rule from line 5"),
    ] {
        let words_in: Vec<&str> = sel.split(' ').collect();
        let e = t.delete(&c, &Selector::parse(&words_in).unwrap()).unwrap_err();
        assert!(e.contains(words), "{sel}: {e}");
    }
    assert!(Selector::parse(&["protocol", "ip"]).unwrap_err().contains("Cannot flush"));
    assert!(Selector::parse(&["line", "0"]).is_err());
    assert!(Selector::parse(&["prio"]).is_err());
    assert_eq!(t.entries().count(), 5);
    assert_eq!(c.counters().len(), 5);
    assert_eq!(run(&c, 53), (Verdict::Drop, Some(1)));
}

#[test]
fn adds_and_deletes_take_effect_and_rows_follow_their_rules() {
    let set = RuleSet::parse(RULES).unwrap();
    let c = Classifier::new(&set);
    let mut t = Table::new(&set);
    assert_eq!(run(&c, 80), (Verdict::Pass, Some(6)));
    // No prio: one below the chain's lowest (2), as the kernel picks it; the next line.
    let e = t.add(&c, "protocol ip flower ip_proto udp dst_port 80 action drop").unwrap();
    assert_eq!((e.line, e.prio, e.handle), (7, 1, 1));
    assert_eq!(run(&c, 80), (Verdict::Drop, Some(7)));
    let e = t.add(&c, "prio 2 protocol ip flower ip_proto udp dst_port 81 action drop").unwrap();
    assert_eq!((e.line, e.handle), (8, 4), "handles 1, 2, 3, 7 are taken in prio 2");
    // The whole of prio 2 (five rules) goes; their counters with them.
    assert_eq!(run(&c, 55), (Verdict::Drop, Some(3)));
    assert_eq!(t.delete(&c, &Selector::parse(&["pref", "2"]).unwrap()), Ok(5));
    assert_eq!(run(&c, 55), (Verdict::Pass, Some(6)));
    assert_eq!(run(&c, 80), (Verdict::Drop, Some(7)));
    let rows = t.rows(&c);
    let ids: Vec<(usize, u32, u32, u64)> =
        rows.iter().map(|r| (r.line, r.prio, r.handle, r.packets)).collect();
    assert_eq!(ids, vec![(6, 9, 1, 2), (7, 1, 1, 2)]);
    assert_eq!(
        rows[1].to_string(),
        "line 7 packets 2 bytes 84 used 5.000 prio 1 chain 0 handle 0x1"
    );
    // By line, then the chain flushed (tc's del without prio).
    assert_eq!(t.delete(&c, &Selector::parse(&["line", "7"]).unwrap()), Ok(1));
    assert_eq!(run(&c, 80), (Verdict::Pass, Some(6)));
    assert_eq!(t.delete(&c, &Selector::parse(&[]).unwrap()), Ok(1));
    assert_eq!(run(&c, 80).1, None);
    assert!(t.rows(&c).is_empty());
}
