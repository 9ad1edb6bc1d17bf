//! The control-flow skeleton both emitters write into before they lay out real
//! instructions: statements, two-way conditional jumps (a true and a false target, as
//! classic BPF has them), unconditional jumps and program ends, between labels.
//!
//! Predicates compile naively into this form (every test names both its targets, every
//! join gets a label), and [`Flow::simplify`] then removes what that costs: jumps to jumps
//! are threaded, jumps to the next instruction dropped, and code no path reaches deleted.
//! The last matters beyond size: the Linux verifier refuses an eBPF program with an
//! unreachable instruction.
//!
//! Every jump the emitters write goes forward (a label is always bound after the jumps to
//! it), which is what lets each pass here be one walk in program order, except
//! [`Item::Back`]: the closing jump of a `protochain` loop to its head, a label reached by
//! falling through before it. The passes leave those jumps and their targets alone.

/// A position in the flow, bound once with [`Flow::bind`]. 32 bits, not a `usize`: a
/// classic item is then 16 bytes, not 24 (a small filter's flow stays in one small
/// allocation), and no flow has 2^32 labels (each costs its items' memory first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Label(u32);

impl Label {
    pub(crate) fn index(self) -> usize {
        // (u32 -> usize widens on every target Rust supports here)
        self.0 as usize
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Item<S, C> {
    Label(Label),
    /// An instruction that falls through to the next item.
    Stmt(S),
    /// A test: `cond` holds -> `t`, otherwise -> `f`. Never falls through.
    Cond {
        cond: C,
        t: Label,
        f: Label,
    },
    Goto(Label),
    /// A jump back to a label bound earlier (a loop's head, reached by falling through
    /// first). Never falls through; never threaded or removed while the loop lives.
    Back(Label),
    /// An instruction that ends the program (classic `ret`, eBPF `exit`).
    End(S),
}

/// Items in program order, and the number of labels made so far.
#[derive(Clone, Debug)]
pub(crate) struct Flow<S, C> {
    items: Vec<Item<S, C>>,
    labels: u32,
}

impl<S: Clone, C: Clone> Flow<S, C> {
    pub(crate) fn new() -> Self {
        Flow { items: Vec::new(), labels: 0 }
    }

    /// An empty flow with room for `items` items.
    pub(crate) fn with_capacity(items: usize) -> Self {
        Flow { items: Vec::with_capacity(items), labels: 0 }
    }

    pub(crate) fn label(&mut self) -> Label {
        self.labels = self.labels.wrapping_add(1);
        Label(self.labels.wrapping_sub(1))
    }

    pub(crate) fn label_count(&self) -> usize {
        self.labels as usize
    }

    pub(crate) fn bind(&mut self, label: Label) {
        self.items.push(Item::Label(label));
    }

    pub(crate) fn stmt(&mut self, s: S) {
        self.items.push(Item::Stmt(s));
    }

    pub(crate) fn cond(&mut self, cond: C, t: Label, f: Label) {
        self.items.push(Item::Cond { cond, t, f });
    }

    /// A jump back to `head`, bound earlier (see [`Item::Back`]).
    pub(crate) fn back(&mut self, head: Label) {
        self.items.push(Item::Back(head));
    }

    pub(crate) fn goto(&mut self, target: Label) {
        self.items.push(Item::Goto(target));
    }

    pub(crate) fn end(&mut self, s: S) {
        self.items.push(Item::End(s));
    }

    pub(crate) fn items(&self) -> &[Item<S, C>] {
        &self.items
    }

    pub(crate) fn set_items(&mut self, items: Vec<Item<S, C>>) {
        self.items = items;
    }

    /// Removes the last item when it is a `goto` to `label` (about to be bound right after
    /// it, so the jump goes nowhere) that no label lands on (no jump could be threaded
    /// through it to `label`: two labels landing in one place are not one to
    /// [`Flow::simplify`]); true when it did.
    pub(crate) fn drop_trailing_goto(&mut self, label: Label) -> bool {
        let trailing = match self.items.as_slice() {
            [.., Item::Label(_), Item::Goto(_)] => false,
            [.., Item::Goto(target)] => *target == label,
            _ => false,
        };
        if trailing {
            self.items.pop();
        }
        trailing
    }

    /// Removes the item at `index` (one found needless once the flow is written).
    pub(crate) fn remove(&mut self, index: usize) {
        if index < self.items.len() {
            self.items.remove(index);
        }
    }

    /// Threads jumps, removes dead code and jumps to the next instruction, until nothing
    /// changes. Every pass shrinks the program or leaves it alone, so this ends.
    pub(crate) fn simplify(&mut self) {
        // (what the emitters write is often simple already: one walk says so, where a
        // round of the passes costs three walks, two tables and a compaction)
        if self.is_simple() {
            return;
        }
        // One set of buffers for every pass of every round.
        let mut first = Vec::new();
        let mut replacements = Vec::new();
        let mut reached = Vec::new();
        loop {
            let threaded = self.thread_jumps(&mut first, &mut replacements);
            let pruned = self.remove_unreachable(&mut reached);
            let dropped = self.drop_jumps_to_next();
            if !(threaded || pruned || dropped) {
                break;
            }
        }
    }

    /// Whether none of [`Flow::simplify`]'s passes would change anything: every label is
    /// reached by a jump before it and every item by a path (nothing for remove_unreachable);
    /// no label lands on a `goto`, none a `goto` names lands on a program end, no test has
    /// equal targets (nothing for thread_jumps); no `goto` is followed by its label
    /// (nothing for drop_jumps_to_next). One walk in program order; a loop head (reached
    /// by falling through) counts as not simple.
    fn is_simple(&self) -> bool {
        const REACHED: u8 = 1;
        const BY_GOTO: u8 = 2;
        with_label_table(self.label_count(), 0u8, |marks| {
            let mark = |marks: &mut [u8], label: Label, bit: u8| {
                if let Some(m) = marks.get_mut(label.index()) {
                    *m |= bit;
                }
            };
            let marked = |marks: &[u8], label: Label, bit: u8| {
                marks.get(label.index()).is_some_and(|m| m & bit != 0)
            };
            let mut live = true;
            // The `goto` just before the labels since the last instruction, if any.
            let mut goto_before: Option<Label> = None;
            // Labels bound since the last instruction, and whether a `goto` names one.
            let (mut landing, mut landing_by_goto) = (false, false);
            for item in &self.items {
                if let Item::Label(label) = item {
                    if !marked(marks, *label, REACHED) || goto_before == Some(*label) {
                        return false;
                    }
                    landing = true;
                    landing_by_goto |= marked(marks, *label, BY_GOTO);
                    live = true;
                    continue;
                }
                if !live {
                    return false;
                }
                match item {
                    Item::Goto(_) if landing => return false,
                    Item::End(_) if landing_by_goto => return false,
                    Item::Cond { t, f, .. } if t == f => return false,
                    _ => {}
                }
                goto_before = None;
                match item {
                    Item::Cond { t, f, .. } => {
                        mark(marks, *t, REACHED);
                        mark(marks, *f, REACHED);
                    }
                    Item::Goto(target) => {
                        mark(marks, *target, REACHED | BY_GOTO);
                        goto_before = Some(*target);
                    }
                    _ => {}
                }
                live = matches!(item, Item::Stmt(_));
                (landing, landing_by_goto) = (false, false);
            }
            true
        })
    }

    /// For each label, the index of the first item after it that is not a label (into
    /// `first`, overwritten).
    fn first_items(&self, first: &mut Vec<Option<usize>>) {
        first.clear();
        first.resize(self.label_count(), None);
        let mut next_real = None;
        for (index, item) in self.items.iter().enumerate().rev() {
            match item {
                Item::Label(label) => {
                    if let Some(slot) = first.get_mut(label.index()) {
                        *slot = next_real;
                    }
                }
                _ => next_real = Some(index),
            }
        }
    }

    /// Retargets jumps that land on a `goto` to where it goes; a `goto` to a program end
    /// becomes that end; a test whose targets are equal becomes a `goto`.
    fn thread_jumps(
        &mut self,
        first: &mut Vec<Option<usize>>,
        replacements: &mut Vec<(usize, Item<S, C>)>,
    ) -> bool {
        self.first_items(first);
        let first = &*first;
        let item_at = |label: Label| {
            first.get(label.index()).copied().flatten().and_then(|i| self.items.get(i))
        };
        // Jumps go forward, so following `goto`s ends within `items.len()` steps.
        let resolve = |mut label: Label| {
            for _ in 0..self.items.len() {
                match item_at(label) {
                    Some(Item::Goto(next)) if *next != label => label = *next,
                    _ => break,
                }
            }
            label
        };
        // The replacements are collected first: `resolve` reads the items as they were.
        replacements.clear();
        for (index, item) in self.items.iter().enumerate() {
            let replacement = match item {
                Item::Cond { cond, t, f } => {
                    let (t2, f2) = (resolve(*t), resolve(*f));
                    if t2 == f2 {
                        Some(Item::Goto(t2))
                    } else if (t2, f2) != (*t, *f) {
                        Some(Item::Cond { cond: cond.clone(), t: t2, f: f2 })
                    } else {
                        None
                    }
                }
                Item::Goto(target) => {
                    let resolved = resolve(*target);
                    match item_at(resolved) {
                        Some(Item::End(s)) => Some(Item::End(s.clone())),
                        _ if resolved != *target => Some(Item::Goto(resolved)),
                        _ => None,
                    }
                }
                _ => None,
            };
            if let Some(new) = replacement {
                replacements.push((index, new));
            }
        }
        let changed = !replacements.is_empty();
        for (index, new) in replacements.drain(..) {
            if let Some(item) = self.items.get_mut(index) {
                *item = new;
            }
        }
        changed
    }

    /// Drops items no path reaches, and labels no jump names (`reached`: a buffer, overwritten).
    fn remove_unreachable(&mut self, reached: &mut Vec<bool>) -> bool {
        fn mark(reached: &mut [bool], label: Label) {
            if let Some(r) = reached.get_mut(label.index()) {
                *r = true;
            }
        }
        reached.clear();
        reached.resize(self.label_count(), false);
        // A loop head is reached by falling through; its label must stay for the jump back.
        for item in &self.items {
            if let Item::Back(head) = item {
                mark(reached, *head);
            }
        }
        let mut live = true;
        let before = self.items.len();
        // `retain` visits the items in order, so the walk's state carries from one to the next.
        self.items.retain(|item| match item {
            Item::Label(label) => {
                // Jumps go forward: every jump to this label has been seen.
                let kept = reached.get(label.index()).copied().unwrap_or(false);
                if kept {
                    live = true;
                }
                kept
            }
            Item::Stmt(_) => live,
            Item::Cond { t, f, .. } => {
                let kept = live;
                if kept {
                    mark(reached, *t);
                    mark(reached, *f);
                }
                live = false;
                kept
            }
            Item::Goto(target) => {
                let kept = live;
                if kept {
                    mark(reached, *target);
                }
                live = false;
                kept
            }
            Item::End(_) | Item::Back(_) => {
                let kept = live;
                live = false;
                kept
            }
        });
        self.items.len() != before
    }

    /// Drops a `goto` whose target label follows it directly. In place: item `read` is
    /// judged on the items after it, which the compaction (writing at `write <= read`) has
    /// not touched yet.
    fn drop_jumps_to_next(&mut self) -> bool {
        let before = self.items.len();
        let mut write = 0usize;
        for read in 0..before {
            let lands_next = match self.items.get(read) {
                Some(Item::Goto(target)) => self
                    .items
                    .get(read.wrapping_add(1)..)
                    .unwrap_or_default()
                    .iter()
                    .map_while(|i| match i {
                        Item::Label(l) => Some(*l),
                        _ => None,
                    })
                    .any(|l| l == *target),
                _ => false,
            };
            if !lands_next {
                self.items.swap(write, read);
                write = write.wrapping_add(1);
            }
        }
        self.items.truncate(write);
        self.items.len() != before
    }
}

/// Labels a table on the stack has room for (a small filter's flow has a few dozen).
const STACK_LABELS: usize = 64;

/// Runs `f` on a table of `labels` entries set to `init`: on the stack when it fits, so
/// that a small flow's one-off tables cost no allocation.
pub(crate) fn with_label_table<T: Copy, R>(
    labels: usize,
    init: T,
    f: impl FnOnce(&mut [T]) -> R,
) -> R {
    let mut small = [init; STACK_LABELS];
    match small.get_mut(..labels) {
        Some(table) => f(table),
        None => f(&mut vec![init; labels]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The passes as they were before they reused buffers and edited in place (issue 13,
    /// compile-emit-4): the oracle for the random flows below.
    impl<S: Clone, C: Clone> Flow<S, C> {
        /// Threads jumps, removes dead code and jumps to the next instruction, until nothing
        /// changes. Every pass shrinks the program or leaves it alone, so this ends.
        fn simplify_as_it_was(&mut self) {
            loop {
                let threaded = self.thread_jumps_as_it_was();
                let pruned = self.remove_unreachable_as_it_was();
                let dropped = self.drop_jumps_to_next_as_it_was();
                if !(threaded || pruned || dropped) {
                    break;
                }
            }
        }

        /// For each label, the index of the first item after it that is not a label.
        fn first_items_as_it_was(&self) -> Vec<Option<usize>> {
            let mut first = vec![None; self.label_count()];
            let mut next_real = None;
            for (index, item) in self.items.iter().enumerate().rev() {
                match item {
                    Item::Label(label) => {
                        if let Some(slot) = first.get_mut(label.index()) {
                            *slot = next_real;
                        }
                    }
                    _ => next_real = Some(index),
                }
            }
            first
        }

        /// Retargets jumps that land on a `goto` to where it goes; a `goto` to a program end
        /// becomes that end; a test whose targets are equal becomes a `goto`.
        fn thread_jumps_as_it_was(&mut self) -> bool {
            let first = self.first_items_as_it_was();
            let item_at = |label: Label| {
                first.get(label.index()).copied().flatten().and_then(|i| self.items.get(i))
            };
            // Jumps go forward, so following `goto`s ends within `items.len()` steps.
            let resolve = |mut label: Label| {
                for _ in 0..self.items.len() {
                    match item_at(label) {
                        Some(Item::Goto(next)) if *next != label => label = *next,
                        _ => break,
                    }
                }
                label
            };
            // The replacements are collected first: `resolve` reads the items as they were.
            let mut replacements = Vec::new();
            for (index, item) in self.items.iter().enumerate() {
                let replacement = match item {
                    Item::Cond { cond, t, f } => {
                        let (t2, f2) = (resolve(*t), resolve(*f));
                        if t2 == f2 {
                            Some(Item::Goto(t2))
                        } else if (t2, f2) != (*t, *f) {
                            Some(Item::Cond { cond: cond.clone(), t: t2, f: f2 })
                        } else {
                            None
                        }
                    }
                    Item::Goto(target) => {
                        let resolved = resolve(*target);
                        match item_at(resolved) {
                            Some(Item::End(s)) => Some(Item::End(s.clone())),
                            _ if resolved != *target => Some(Item::Goto(resolved)),
                            _ => None,
                        }
                    }
                    _ => None,
                };
                if let Some(new) = replacement {
                    replacements.push((index, new));
                }
            }
            let changed = !replacements.is_empty();
            for (index, new) in replacements {
                if let Some(item) = self.items.get_mut(index) {
                    *item = new;
                }
            }
            changed
        }

        /// Drops items no path reaches, and labels no jump names.
        fn remove_unreachable_as_it_was(&mut self) -> bool {
            fn mark(reached: &mut [bool], label: Label) {
                if let Some(r) = reached.get_mut(label.index()) {
                    *r = true;
                }
            }
            let mut reached = vec![false; self.label_count()];
            // A loop head is reached by falling through; its label must stay for the jump back.
            for item in &self.items {
                if let Item::Back(head) = item {
                    mark(&mut reached, *head);
                }
            }
            let mut live = true;
            let before = self.items.len();
            let mut out = Vec::with_capacity(before);
            for item in std::mem::take(&mut self.items) {
                match &item {
                    Item::Label(label) => {
                        // Jumps go forward: every jump to this label has been seen.
                        if reached.get(label.index()).copied().unwrap_or(false) {
                            live = true;
                            out.push(item);
                        }
                    }
                    Item::Stmt(_) => {
                        if live {
                            out.push(item);
                        }
                    }
                    Item::Cond { t, f, .. } => {
                        if live {
                            mark(&mut reached, *t);
                            mark(&mut reached, *f);
                            out.push(item);
                        }
                        live = false;
                    }
                    Item::Goto(target) => {
                        if live {
                            mark(&mut reached, *target);
                            out.push(item);
                        }
                        live = false;
                    }
                    Item::End(_) | Item::Back(_) => {
                        if live {
                            out.push(item);
                        }
                        live = false;
                    }
                }
            }
            self.items = out;
            self.items.len() != before
        }

        /// Drops a `goto` whose target label follows it directly.
        fn drop_jumps_to_next_as_it_was(&mut self) -> bool {
            let mut keep = vec![true; self.items.len()];
            for (index, item) in self.items.iter().enumerate() {
                let Item::Goto(target) = item else { continue };
                let following = self.items.iter().skip(index.wrapping_add(1));
                let lands_next = following
                    .map_while(|i| match i {
                        Item::Label(l) => Some(*l),
                        _ => None,
                    })
                    .any(|l| l == *target);
                if lands_next {
                    if let Some(k) = keep.get_mut(index) {
                        *k = false;
                    }
                }
            }
            let before = self.items.len();
            let mut flags = keep.into_iter();
            self.items.retain(|_| flags.next().unwrap_or(true));
            self.items.len() != before
        }
    }

    /// A random flow as the emitters write them: labels bound in order, every jump forward
    /// to a label bound later, and now and then a jump back to a label bound earlier.
    fn random_flow(rng: &mut weir_testkit::SplitMix64) -> Flow<u32, u32> {
        let mut flow = Flow::new();
        let labels: Vec<Label> = (0..rng.range_usize(1, 12)).map(|_| flow.label()).collect();
        let mut bound = 0usize;
        let forward = |rng: &mut weir_testkit::SplitMix64, bound: usize| {
            labels.get(rng.range_usize(bound, labels.len().saturating_sub(1))).copied()
        };
        for _ in 0..rng.range_usize(0, 30) {
            let v = u32::try_from(rng.below(4)).unwrap_or(0);
            match rng.below(7) {
                0 | 1 if bound < labels.len() => {
                    flow.bind(labels.get(bound).copied().unwrap_or(Label(0)));
                    bound += 1;
                }
                2 => flow.stmt(v),
                3 => match (forward(rng, bound), forward(rng, bound)) {
                    (Some(t), Some(f)) if bound < labels.len() => flow.cond(v, t, f),
                    _ => flow.stmt(v),
                },
                4 => match forward(rng, bound) {
                    Some(t) if bound < labels.len() => flow.goto(t),
                    _ => flow.end(v),
                },
                5 if bound > 0 && rng.chance(30) => {
                    let head = labels.get(rng.below_usize(bound)).copied().unwrap_or(Label(0));
                    flow.back(head);
                }
                _ => flow.end(v),
            }
        }
        for &label in labels.get(bound..).unwrap_or_default() {
            flow.bind(label);
            flow.end(9);
        }
        flow
    }

    #[test]
    fn simplify_gives_what_the_passes_gave_before_they_edited_in_place() {
        let mut rng = weir_testkit::SplitMix64::new(0x5117_f10e);
        let mut changed = 0;
        for _ in 0..5_000 {
            let flow = random_flow(&mut rng);
            let (mut new, mut old) = (flow.clone(), flow.clone());
            new.simplify();
            old.simplify_as_it_was();
            assert_eq!(new.items(), old.items(), "from {:?}", flow.items());
            changed += usize::from(new.items() != flow.items());
        }
        // Most random flows have something to thread, drop or prune.
        assert!(changed > 2_500, "{changed}");
    }

    /// `is_simple` may say "not simple" of a flow simplify leaves alone (a loop head), never
    /// "simple" of one it changes. Flows that simplify settled (simple unless they loop)
    /// with one random item put in somewhere are near the line both ways.
    #[test]
    fn a_flow_is_simple_only_when_simplify_would_change_nothing() {
        let mut rng = weir_testkit::SplitMix64::new(0x5117_51e0);
        let (mut simple, mut not_simple) = (0, 0);
        let mut check = |flow: &Flow<u32, u32>| {
            let mut settled = flow.clone();
            settled.simplify_as_it_was();
            if flow.is_simple() {
                assert_eq!(settled.items(), flow.items(), "called simple: {:?}", flow.items());
                simple += 1;
            } else {
                not_simple += 1;
            }
            settled
        };
        for _ in 0..20_000 {
            let flow = random_flow(&mut rng);
            let settled = check(&flow);
            let loops = settled.items().iter().any(|i| matches!(i, Item::Back(_)));
            assert!(loops || settled.is_simple(), "settled: {:?}", settled.items());
            let mut items = settled.items().to_vec();
            let label = Label(u32::try_from(rng.below_usize(settled.label_count())).unwrap_or(0));
            let extra = match rng.below(5) {
                0 => Item::Stmt(7),
                1 => Item::Goto(label),
                2 => Item::End(8),
                3 => Item::Label(label),
                _ => Item::Cond { cond: 6, t: label, f: label },
            };
            items.insert(rng.below_usize(items.len().saturating_add(1)), extra);
            let mut near = settled.clone();
            near.set_items(items);
            check(&near);
        }
        assert!(simple > 1_500 && not_simple > 10_000, "{simple} simple, {not_simple} not");
    }

    /// The items with each jump's label replaced by where it lands (the index of the next
    /// item that is not a label) and the labels left out: the program the flow encodes.
    fn landing_form<S: Clone, C: Clone>(flow: &Flow<S, C>) -> Vec<Item<S, C>> {
        let mut at = vec![u32::MAX; flow.label_count()];
        let mut real = 0u32;
        for item in flow.items() {
            match item {
                Item::Label(l) => at[l.index()] = real,
                _ => real += 1,
            }
        }
        let lands = |l: &Label| Label(at[l.index()]);
        flow.items()
            .iter()
            .filter_map(|item| match item {
                Item::Label(_) => None,
                Item::Cond { cond, t, f } => {
                    Some(Item::Cond { cond: cond.clone(), t: lands(t), f: lands(f) })
                }
                Item::Goto(l) => Some(Item::Goto(lands(l))),
                Item::Back(l) => Some(Item::Back(lands(l))),
                other => Some(other.clone()),
            })
            .collect()
    }

    #[test]
    fn a_label_named_by_no_jump_or_only_by_a_goto_just_before_it_can_be_left_out() {
        // What the classic emitter leaves out as it binds a label: the flow simplifies to
        // the same program without them.
        let mut rng = weir_testkit::SplitMix64::new(0x1abe_1013);
        let mut cut_some = 0;
        for _ in 0..20_000 {
            let flow = random_flow(&mut rng);
            // Jumps to each label, counted as the emitter counts them (a test's two edges
            // twice), and the flow as the emitter binds it: a label no jump names left out,
            // and one whose only jump is a `goto` just before it left out with the `goto`.
            let mut jumps = vec![0u32; flow.label_count()];
            for item in flow.items() {
                match item {
                    Item::Cond { t, f, .. } => {
                        jumps[t.index()] += 1;
                        jumps[f.index()] += 1;
                    }
                    Item::Goto(l) | Item::Back(l) => jumps[l.index()] += 1,
                    _ => {}
                }
            }
            let mut cut = flow.clone();
            cut.set_items(Vec::new());
            for item in flow.items() {
                match item {
                    Item::Label(l) if jumps[l.index()] == 1 && cut.drop_trailing_goto(*l) => {}
                    Item::Label(l) if jumps[l.index()] == 0 => {}
                    other => cut.items.push(other.clone()),
                }
            }
            if cut.items().len() == flow.items().len() {
                continue;
            }
            cut_some += 1;
            let mut whole = flow.clone();
            whole.simplify();
            cut.simplify();
            assert_eq!(landing_form(&cut), landing_form(&whole), "from {:?}", flow.items());
        }
        assert!(cut_some > 5_000, "{cut_some}");
    }

    #[test]
    fn simplify_threads_jumps_and_drops_what_no_path_reaches() {
        let mut flow: Flow<&str, &str> = Flow::new();
        let (a, b, c, d) = (flow.label(), flow.label(), flow.label(), flow.label());
        flow.cond("test", a, b);
        flow.stmt("dead: after a test, nothing falls through");
        flow.bind(a);
        flow.goto(c);
        flow.bind(b);
        flow.stmt("b");
        flow.goto(d);
        flow.bind(c);
        flow.end("ret c");
        flow.bind(d);
        flow.end("ret d");
        flow.simplify();
        // The test goes straight to c's `ret`, b's jump to a `ret` is that `ret`, and the
        // unreachable statement, the jump block a and d's unused `ret` are gone.
        assert_eq!(
            flow.items(),
            &[
                Item::Cond { cond: "test", t: c, f: b },
                Item::Label(b),
                Item::Stmt("b"),
                Item::End("ret d"),
                Item::Label(c),
                Item::End("ret c"),
            ]
        );
    }

    #[test]
    fn a_test_with_one_target_becomes_a_jump_and_a_jump_to_an_end_becomes_the_end() {
        let mut flow: Flow<&str, &str> = Flow::new();
        let (a, b) = (flow.label(), flow.label());
        flow.cond("test", a, a);
        flow.stmt("dead");
        flow.bind(b);
        flow.stmt("unreached");
        flow.bind(a);
        flow.end("ret");
        flow.simplify();
        assert_eq!(flow.items(), &[Item::End("ret")]);
    }
}
