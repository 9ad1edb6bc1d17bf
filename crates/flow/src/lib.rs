//! weir-flow: flow rules in tc-flower syntax, classified in user space by a tuple-space
//! search, with tc's actions and per-rule counters. The datapath part of the pipeline: a
//! rule file is a spec (`rule::RuleSet`), a [`Classifier`] is the live table that packets
//! (from weir-runtime's sources, through `weir flow run`) go through.
//!
//! ```
//! use weir_flow::{Classifier, RuleSet, Verdict, Work};
//! let rules = RuleSet::parse(
//!     "prio 1 protocol ip flower ip_proto udp dst_port 53 action drop\n\
//!      prio 2 protocol all flower action mirred egress redirect dev out0\n",
//! ).unwrap();
//! let classifier = Classifier::new(&rules);
//! // An IPv4/UDP frame to port 53.
//! let mut frame = vec![0u8; 42];
//! frame[12] = 0x08; frame[14] = 0x45; frame[23] = 17; frame[36] = 0; frame[37] = 53;
//! let mut mirrored = Vec::new();
//! let mut work = Work::new(&mut frame, 42, 0, 0, &mut mirrored);
//! let outcome = classifier.process(&mut work);
//! assert_eq!(outcome.verdict(), Verdict::Drop);
//! assert_eq!(outcome.line(), Some(1));
//! ```
//!
//! Modules: [`rule`] (the language: parse, print, check, compile to a masked key),
//! [`key`] (the flow key and its extraction, as the kernel's flow dissector fills it for
//! flower), [`engine`] (actions, controls, chains, counters: shared by every classifier),
//! [`reference`] (the linear oracle), [`classifier`] (tuple space search) and [`control`]
//! (a running classifier's rules as tc names them: add, del, stats rows).

pub mod classifier;
pub mod control;
pub mod engine;
pub mod key;
pub mod reference;
pub mod rule;
pub mod xdp;

pub use classifier::{Classifier, FlowCache, RuleId, Version, BATCH};
pub use engine::{Counters, Outcome, Verdict, Work};
pub use reference::Reference;
pub use rule::{Action, Control, Match, Rule, RuleError, RuleSet};
