//! The pflang parser: tokens -> [`Expr`], by recursive descent.
//!
//! It accepts the language of the grammar of record (libpcap's LALR grammar) and builds the
//! tree its actions imply:
//! - `and`/`or` have equal precedence and associate left; `not` binds tighter.
//! - Qualifier inheritance follows the grammar's `$<blk>0` threading: an id after `and`/`or`
//!   takes the qualifiers of the term before it; a parenthesised expression passes on the
//!   qualifiers that were in effect *before* the parenthesis (so `(host a) and b` has none
//!   and is an error, while `host a and (port 1) and b` makes `b` a host); `not term` passes
//!   on its term's; relations and other keywords pass on none.
//! - Arithmetic: `|` < `&` < `<<` `>>` < `+` `-` < `*` `/`, all left-associative, unary minus
//!   above them. `%` and `^` have no precedence there, so the parser always shifts on them:
//!   `a + b % c + d` is `a + (b % (c + d))` and `-a % b` is `-(a % b)` (checked against
//!   the system libpcap by the tests).
//!
//! Where the grammar needs more lookahead than one token (a `(` may open an arithmetic
//! expression, a boolean expression or a list of ids), the parser tries the readings in
//! turn; arithmetic parses are memoised by position so nesting stays polynomial.
//!
//! Length never costs stack: `and`/`or` chains and the left spine of arithmetic (`a + b - c
//! ...`) are lists built in loops, a run of `not`s (or of unary `-`) keeps only its parity,
//! and parentheses that only wrap other parentheses (`((x))`) are skipped, however many.
//! Nesting does: the parser's recursion is limited to [`MAX_DEPTH`], and after parsing,
//! `depth::check` bounds the depth of the filter the tree lowers to by the same number, so
//! that no stage after the parser can run out of stack either (see `depth`). Going past it
//! is an error with a caret, whichever reading of the input got there.

use crate::ast::*;
use crate::error::ParseError;
use crate::lexer::{tokenize, Kw, Punct, Tok, Token};
use std::collections::HashMap;

/// Deepest nesting accepted: levels of the parser's recursion (parentheses that hold more
/// than another pair, `not (`, packet accesses, `%` and `^`) and levels of the filter tree an
/// expression lowers to. Every stage after the parser is tested at this depth on a 2 MiB
/// thread stack.
pub const MAX_DEPTH: usize = 1_000;

/// Parses a filter expression. `Ok(None)` is the empty expression, which accepts every
/// packet.
pub fn parse(expr: &str) -> Result<Option<Expr>, ParseError> {
    let toks = tokenize(expr)?;
    let close_of = matching_parens(&toks);
    let mut p =
        Parser { toks, close_of, pos: 0, depth: 0, too_deep: None, arith_memo: HashMap::new() };
    if p.peek() == &Tok::End {
        return Ok(None);
    }
    let parsed = p.expr(None).and_then(|(e, _)| {
        if p.peek() != &Tok::End {
            return Err(p.unexpected("`and`, `or` or the end of the expression"));
        }
        Ok(e)
    });
    // Too deep is the reason, whichever reading of the input ran into the limit: the
    // other readings failing further on only say that they are not the right ones.
    let e = match (parsed, p.too_deep.take()) {
        (Err(_), Some(deep)) => return Err(deep),
        (parsed, _) => parsed?,
    };
    crate::depth::check(&e)?;
    Ok(Some(e))
}

/// For each `(` token, the index of its matching `)` (`usize::MAX` for other tokens and
/// for unbalanced parentheses).
fn matching_parens(toks: &[Token]) -> Vec<usize> {
    let mut close_of = vec![usize::MAX; toks.len()];
    let mut open = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        match t.tok {
            Tok::Punct(Punct::LParen) => open.push(i),
            Tok::Punct(Punct::RParen) => {
                if let Some(o) = open.pop() {
                    close_of[o] = i;
                }
            }
            _ => {}
        }
    }
    close_of
}

fn too_deep_error(span: Span) -> ParseError {
    ParseError::new(span, format!("expression nested too deeply (more than {MAX_DEPTH} levels)"))
}

/// Qualifiers an id may inherit; `None` means there is nothing to inherit.
type Ctx = Option<Qualifiers>;

type PResult<T> = Result<T, ParseError>;

struct Parser {
    toks: Vec<Token>,
    /// [`matching_parens`] of `toks`.
    close_of: Vec<usize>,
    pos: usize,
    depth: usize,
    /// Set when any reading of the input went deeper than [`MAX_DEPTH`].
    too_deep: Option<ParseError>,
    /// Arithmetic parses by start position: result and the position after it.
    arith_memo: HashMap<usize, PResult<(Arith, usize)>>,
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Kw(k) => {
            let word =
                crate::lexer::KEYWORDS.iter().find(|(_, kw)| kw == k).map_or("?", |(w, _)| w);
            format!("`{word}`")
        }
        Tok::Punct(p) => format!("`{}`", crate::display::punct_str(*p)),
        Tok::Num(n) => format!("number {n}"),
        Tok::Id(s) => format!("name `{s}`"),
        Tok::Hid(s) => format!("address `{s}`"),
        Tok::Hid6(a) => format!("address `{a}`"),
        Tok::Eid(_) => "an Ethernet address".to_string(),
        Tok::Aid(a) => format!("ARCnet address `${a}`"),
        Tok::End => "the end of the expression".to_string(),
    }
}

fn relop_of(t: &Tok) -> Option<RelOp> {
    match t {
        Tok::Punct(Punct::Gt) => Some(RelOp::Gt),
        Tok::Punct(Punct::Ge) => Some(RelOp::Ge),
        Tok::Punct(Punct::Eq) => Some(RelOp::Eq),
        Tok::Punct(Punct::Le) => Some(RelOp::Le),
        Tok::Punct(Punct::Lt) => Some(RelOp::Lt),
        Tok::Punct(Punct::Ne) => Some(RelOp::Ne),
        _ => None,
    }
}

/// Binary operators with a precedence level; `%` and `^` have none (see the module doc).
fn binop_of(t: &Tok) -> Option<(BinOp, Option<u8>)> {
    Some(match t {
        Tok::Punct(Punct::Pipe) => (BinOp::Or, Some(1)),
        Tok::Punct(Punct::Amp) => (BinOp::And, Some(2)),
        Tok::Punct(Punct::Shl) => (BinOp::Shl, Some(3)),
        Tok::Punct(Punct::Shr) => (BinOp::Shr, Some(3)),
        Tok::Punct(Punct::Plus) => (BinOp::Add, Some(4)),
        Tok::Punct(Punct::Minus) => (BinOp::Sub, Some(4)),
        Tok::Punct(Punct::Star) => (BinOp::Mul, Some(5)),
        Tok::Punct(Punct::Slash) => (BinOp::Div, Some(5)),
        Tok::Punct(Punct::Percent) => (BinOp::Mod, None),
        Tok::Punct(Punct::Caret) => (BinOp::Xor, None),
        _ => return None,
    })
}

fn starts_simple_id(t: &Tok) -> bool {
    matches!(t, Tok::Id(_) | Tok::Hid(_) | Tok::Hid6(_) | Tok::Eid(_) | Tok::Aid(_))
}

impl Parser {
    fn peek(&self) -> &Tok {
        self.peek_at(0)
    }

    fn peek_at(&self, n: usize) -> &Tok {
        self.toks.get(self.pos.saturating_add(n)).or(self.toks.last()).map_or(&Tok::End, |t| &t.tok)
    }

    fn span(&self) -> Span {
        self.toks.get(self.pos).or(self.toks.last()).map_or(Span::default(), |t| t.span)
    }

    /// End of the previous token (for node spans).
    fn prev_end(&self) -> usize {
        self.pos.checked_sub(1).and_then(|i| self.toks.get(i)).map_or(0, |t| t.span.end)
    }

    fn bump(&mut self) -> Token {
        let t =
            self.toks.get(self.pos).cloned().unwrap_or(Token { tok: Tok::End, span: self.span() });
        if self.pos < self.toks.len().saturating_sub(1) {
            self.pos += 1;
        }
        t
    }

    fn unexpected(&self, expected: &str) -> ParseError {
        ParseError::new(
            self.span(),
            format!("expected {expected}, found {}", describe(self.peek())),
        )
    }

    fn expect_punct(&mut self, p: Punct, expected: &str) -> PResult<Token> {
        if self.peek() == &Tok::Punct(p) {
            Ok(self.bump())
        } else {
            Err(self.unexpected(expected))
        }
    }

    fn expect_num(&mut self, after: &str) -> PResult<u32> {
        match *self.peek() {
            Tok::Num(n) => {
                self.bump();
                Ok(n)
            }
            _ => Err(self.unexpected(&format!("a number after {after}"))),
        }
    }

    fn expect_name(&mut self, after: &str) -> PResult<String> {
        match self.peek().clone() {
            Tok::Id(s) => {
                self.bump();
                Ok(s)
            }
            _ => Err(self.unexpected(&format!("a name after {after}"))),
        }
    }

    fn name_or_num(&mut self, after: &str) -> PResult<NameOrNum> {
        match self.peek().clone() {
            Tok::Id(s) => {
                self.bump();
                Ok(NameOrNum::Name(s))
            }
            Tok::Num(n) => {
                self.bump();
                Ok(NameOrNum::Num(n))
            }
            _ => Err(self.unexpected(&format!("a name or number after {after}"))),
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let e = too_deep_error(self.span());
            self.too_deep.get_or_insert_with(|| e.clone());
            return Err(e);
        }
        Ok(())
    }

    /// At a `(`: skips the parentheses that only wrap the next pair (`((x))` is `(x)`) and
    /// returns how many closing ones that leaves to skip after the pair. Such parentheses
    /// add nothing to the tree, so any number of them costs no depth.
    fn skip_redundant_parens(&mut self) -> usize {
        let mut k = 0;
        while let (Some(&outer), Some(&inner)) =
            (self.close_of.get(self.pos), self.close_of.get(self.pos + 1))
        {
            if outer == usize::MAX || inner == usize::MAX || inner + 1 != outer {
                break;
            }
            self.pos += 1;
            k += 1;
        }
        k
    }

    /// The `k` closing parentheses [`Parser::skip_redundant_parens`] left.
    fn close_redundant_parens(&mut self, k: usize) -> PResult<()> {
        for _ in 0..k {
            self.expect_punct(Punct::RParen, "`)`")?;
        }
        Ok(())
    }

    /// Consumes a run of `not`s: the start of the first and whether their number is odd
    /// (`not not e` is `e`, so a run of any length is one node at most).
    fn nots(&mut self) -> Option<(usize, bool)> {
        let mut run = None;
        while self.peek() == &Tok::Kw(Kw::Not) {
            let start = self.bump().span.start;
            let (first, odd) = run.unwrap_or((start, false));
            run = Some((first, !odd));
        }
        run
    }

    /// `e` under a run of `not`s ([`Parser::nots`]).
    fn negate(&self, e: Expr, run: Option<(usize, bool)>) -> Expr {
        match run {
            Some((start, true)) => self.node(ExprKind::Not(Box::new(e)), start),
            Some((start, false)) => relabel_start(e, start),
            None => e,
        }
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Runs `f`; on failure puts the position and depth back.
    fn attempt<T>(&mut self, f: impl FnOnce(&mut Parser) -> PResult<T>) -> PResult<T> {
        let (pos, depth) = (self.pos, self.depth);
        let r = f(self);
        if r.is_err() {
            self.pos = pos;
            self.depth = depth;
        }
        r
    }

    fn node(&self, kind: ExprKind, start: usize) -> Expr {
        Expr { kind, span: Span::new(start, self.prev_end().max(start)) }
    }

    // ---- boolean level -------------------------------------------------------------

    /// `expr: term | expr and term | expr and id | expr or term | expr or id`.
    fn expr(&mut self, ctx: Ctx) -> PResult<(Expr, Ctx)> {
        let start = self.span().start;
        let (first, mut q) = self.term(ctx)?;
        let mut rest = Vec::new();
        loop {
            let op = match self.peek() {
                Tok::Kw(Kw::And) => BoolOp::And,
                Tok::Kw(Kw::Or) => BoolOp::Or,
                _ => break,
            };
            self.bump();
            let (e, q2) = self.term_or_id(q)?;
            rest.push((op, e));
            q = q2;
        }
        if rest.is_empty() {
            return Ok((first, q));
        }
        let kind = ExprKind::Chain { first: Box::new(first), rest };
        Ok((self.node(kind, start), q))
    }

    /// `term: rterm | not term`.
    fn term(&mut self, ctx: Ctx) -> PResult<(Expr, Ctx)> {
        self.enter()?;
        let nots = self.nots();
        let r = self.rterm(ctx).map(|(e, q)| (self.negate(e, nots), q));
        self.leave();
        r
    }

    /// After `and`/`or`: either a term or an id that inherits `q`.
    fn term_or_id(&mut self, q: Ctx) -> PResult<(Expr, Ctx)> {
        let nots = self.nots();
        let (e, q) = match self.peek() {
            t if starts_simple_id(t) => (self.simple_id(q, true)?, q),
            Tok::Num(_) => {
                let next = self.peek_at(1);
                if relop_of(next).is_some() || binop_of(next).is_some() {
                    (self.relation()?, None)
                } else {
                    (self.simple_id(q, true)?, q)
                }
            }
            Tok::Punct(Punct::LParen) => self.paren_any(q)?,
            _ => self.rterm(q)?,
        };
        Ok((self.negate(e, nots), q))
    }

    /// A `(` after `and`/`or`: an arithmetic relation, a parenthesised expression (which
    /// passes `q` on) or a parenthesised list of ids inheriting `q`.
    fn paren_any(&mut self, q: Ctx) -> PResult<(Expr, Ctx)> {
        let e1 = match self.attempt(|p| p.relation()) {
            Ok(e) => return Ok((e, None)),
            Err(e) => e,
        };
        let e2 = match self.attempt(|p| p.paren_expr(q)) {
            Ok(e) => return Ok((e, q)),
            Err(e) => e,
        };
        let e3 = match self.attempt(|p| p.id(q, true)) {
            Ok(e) => return Ok(e),
            Err(e) => e,
        };
        Err(furthest(furthest(e1, e2), e3))
    }

    /// A parenthesised expression. Its depth is counted by the `term` inside.
    fn paren_expr(&mut self, ctx: Ctx) -> PResult<Expr> {
        let start = self.span().start;
        let redundant = self.skip_redundant_parens();
        self.expect_punct(Punct::LParen, "`(`")?;
        let (mut e, _) = self.expr(ctx)?;
        self.expect_punct(Punct::RParen, "`)`, `and` or `or`")?;
        self.close_redundant_parens(redundant)?;
        // The parentheses belong to the span, not to the tree.
        e.span = Span::new(start, self.prev_end());
        Ok(e)
    }

    /// `rterm`: everything that is a term by itself.
    fn rterm(&mut self, ctx: Ctx) -> PResult<(Expr, Ctx)> {
        let start = self.span().start;
        let tok = self.peek().clone();
        let simple = |p: &mut Parser, kind: ExprKind| {
            p.bump();
            Ok((p.node(kind, start), None))
        };
        match tok {
            Tok::Punct(Punct::LParen) => {
                let e1 = match self.attempt(|p| p.relation()) {
                    Ok(e) => return Ok((e, None)),
                    Err(e) => e,
                };
                match self.attempt(|p| p.paren_expr(ctx)) {
                    Ok(e) => Ok((e, ctx)),
                    Err(e2) => Err(furthest(e1, e2)),
                }
            }
            Tok::Num(_) | Tok::Punct(Punct::Minus) | Tok::Kw(Kw::Len) => {
                Ok((self.relation()?, None))
            }
            Tok::Kw(Kw::Proto(p)) => {
                if self.peek_at(1) == &Tok::Punct(Punct::LBracket) {
                    Ok((self.relation()?, None))
                } else {
                    self.bump();
                    self.after_pqual(Some(p), start)
                }
            }
            Tok::Kw(
                Kw::Src
                | Kw::Dst
                | Kw::Addr1
                | Kw::Addr2
                | Kw::Addr3
                | Kw::Addr4
                | Kw::Ra
                | Kw::Ta
                | Kw::Host
                | Kw::Net
                | Kw::Port
                | Kw::PortRange
                | Kw::ProtoKw
                | Kw::ProtoChain
                | Kw::Gateway
                | Kw::Broadcast
                | Kw::Multicast
                | Kw::Type
                | Kw::Subtype
                | Kw::Dir,
            ) => self.after_pqual(None, start),
            Tok::Kw(Kw::Less) => {
                self.bump();
                let n = self.expect_num("`less`")?;
                Ok((self.node(ExprKind::Less(n), start), None))
            }
            Tok::Kw(Kw::Greater) => {
                self.bump();
                let n = self.expect_num("`greater`")?;
                Ok((self.node(ExprKind::Greater(n), start), None))
            }
            Tok::Kw(Kw::Byte) => {
                self.bump();
                let offset = self.expect_num("`byte`")?;
                let op = match self.peek() {
                    Tok::Punct(Punct::Amp) => ByteOp::And,
                    Tok::Punct(Punct::Pipe) => ByteOp::Or,
                    Tok::Punct(Punct::Lt) => ByteOp::Lt,
                    Tok::Punct(Punct::Gt) => ByteOp::Gt,
                    Tok::Punct(Punct::Eq) => ByteOp::Eq,
                    _ => {
                        return Err(self.unexpected("one of `&`, `|`, `<`, `>`, `=` after `byte N`"))
                    }
                };
                self.bump();
                let value = self.expect_num("the `byte` operator")?;
                Ok((self.node(ExprKind::Byte { offset, op, value }, start), None))
            }
            Tok::Kw(Kw::Inbound) => simple(self, ExprKind::Inbound),
            Tok::Kw(Kw::Outbound) => simple(self, ExprKind::Outbound),
            Tok::Kw(Kw::Pppoed) => simple(self, ExprKind::Pppoed),
            Tok::Kw(Kw::IfIndex) => {
                self.bump();
                let n = self.expect_num("`ifindex`")?;
                Ok((self.node(ExprKind::IfIndex(n), start), None))
            }
            Tok::Kw(k @ (Kw::Vlan | Kw::Mpls | Kw::Pppoes | Kw::Geneve | Kw::Vxlan)) => {
                self.bump();
                let encap = match k {
                    Kw::Vlan => Encap::Vlan,
                    Kw::Mpls => Encap::Mpls,
                    Kw::Pppoes => Encap::Pppoes,
                    Kw::Geneve => Encap::Geneve,
                    _ => Encap::Vxlan,
                };
                let n = match self.peek() {
                    Tok::Num(_) | Tok::Punct(Punct::LParen) => Some(self.pnum()?),
                    _ => None,
                };
                Ok((self.node(ExprKind::Encap(encap, n), start), None))
            }
            Tok::Kw(Kw::PfIfname) => {
                self.bump();
                let s = self.expect_name("`ifname`")?;
                Ok((self.node(ExprKind::Pf(PfTest::Ifname(s)), start), None))
            }
            Tok::Kw(Kw::PfRset) => {
                self.bump();
                let s = self.expect_name("`ruleset`")?;
                Ok((self.node(ExprKind::Pf(PfTest::Ruleset(s)), start), None))
            }
            Tok::Kw(Kw::PfRnr) => {
                self.bump();
                let n = self.expect_num("`rulenum`")?;
                Ok((self.node(ExprKind::Pf(PfTest::Rulenum(n)), start), None))
            }
            Tok::Kw(Kw::PfSrnr) => {
                self.bump();
                let n = self.expect_num("`subrulenum`")?;
                Ok((self.node(ExprKind::Pf(PfTest::Subrulenum(n)), start), None))
            }
            Tok::Kw(Kw::PfReason) => {
                self.bump();
                let r = self.name_or_num("`reason`")?;
                Ok((self.node(ExprKind::Pf(PfTest::Reason(r)), start), None))
            }
            Tok::Kw(Kw::PfAction) => {
                self.bump();
                let s = self.expect_name("`action`")?;
                Ok((self.node(ExprKind::Pf(PfTest::Action(s)), start), None))
            }
            Tok::Kw(Kw::Llc) => {
                self.bump();
                let kind = match self.peek().clone() {
                    Tok::Id(s) => {
                        self.bump();
                        Some(LlcKind::Name(s))
                    }
                    Tok::Kw(Kw::PfRnr) => {
                        self.bump();
                        Some(LlcKind::Rnr)
                    }
                    _ => None,
                };
                Ok((self.node(ExprKind::Llc(kind), start), None))
            }
            Tok::Kw(Kw::Atm(a)) => simple(self, ExprKind::Atm(AtmTest::Abbrev(a))),
            Tok::Kw(k @ (Kw::Vpi | Kw::Vci)) => {
                self.bump();
                let field = if k == Kw::Vpi { AtmField::Vpi } else { AtmField::Vci };
                let v = self.field_value()?;
                Ok((self.node(ExprKind::Atm(AtmTest::Field(field, v)), start), None))
            }
            Tok::Kw(Kw::Mtp2(t)) => simple(self, ExprKind::Mtp2(t)),
            Tok::Kw(Kw::Mtp3(f)) => {
                self.bump();
                let v = self.field_value()?;
                Ok((self.node(ExprKind::Mtp3(f, v), start), None))
            }
            _ => Err(self.unexpected(
                "a primitive (such as `host`, `port`, `tcp`, `vlan`), `not`, `(` or a comparison",
            )),
        }
    }

    /// `atmvalue`/`mtp3value`: `N`, `relop N`, or `(N or N ...)`.
    fn field_value(&mut self) -> PResult<FieldValue> {
        if let Some(op) = relop_of(self.peek()) {
            self.bump();
            return Ok(FieldValue::Rel(op, self.expect_num("the comparison")?));
        }
        match *self.peek() {
            Tok::Num(n) => {
                self.bump();
                Ok(FieldValue::Eq(n))
            }
            Tok::Punct(Punct::LParen) => {
                self.bump();
                let mut list = vec![self.expect_num("`(`")?];
                while self.peek() == &Tok::Kw(Kw::Or) {
                    self.bump();
                    list.push(self.expect_num("`or`")?);
                }
                self.expect_punct(Punct::RParen, "`)` or `or`")?;
                Ok(FieldValue::List(list))
            }
            _ => Err(self.unexpected("a number, a comparison or `(` with numbers")),
        }
    }

    /// `pnum: NUM | ( pnum )`.
    fn pnum(&mut self) -> PResult<u32> {
        match *self.peek() {
            Tok::Num(n) => {
                self.bump();
                Ok(n)
            }
            Tok::Punct(Punct::LParen) => {
                // `((n))`: the number, however many parentheses wrap it.
                let redundant = self.skip_redundant_parens();
                self.enter()?;
                self.bump();
                let n = self.pnum()?;
                self.expect_punct(Punct::RParen, "`)`")?;
                self.close_redundant_parens(redundant)?;
                self.leave();
                Ok(n)
            }
            _ => Err(self.unexpected("a number")),
        }
    }

    /// What may follow an optional protocol qualifier: the rest of a head and its id,
    /// `broadcast`/`multicast`, 802.11 tests, or nothing (the protocol alone).
    fn after_pqual(&mut self, proto: Option<Proto>, start: usize) -> PResult<(Expr, Ctx)> {
        let mut qual = Qualifiers { proto, dir: None, addr: None };
        match self.peek() {
            Tok::Kw(Kw::Broadcast) => {
                self.bump();
                return Ok((self.node(ExprKind::Broadcast(proto), start), None));
            }
            Tok::Kw(Kw::Multicast) => {
                self.bump();
                return Ok((self.node(ExprKind::Multicast(proto), start), None));
            }
            Tok::Kw(Kw::Type) => {
                self.bump();
                let ty = self.name_or_num("`type`")?;
                let subtype = if self.peek() == &Tok::Kw(Kw::Subtype) {
                    self.bump();
                    Some(self.name_or_num("`subtype`")?)
                } else {
                    None
                };
                let t = WlanTest::Type { ty, subtype };
                return Ok((self.node(ExprKind::Wlan(proto, t), start), None));
            }
            Tok::Kw(Kw::Subtype) => {
                self.bump();
                let s = self.expect_name("`subtype`")?;
                let t = WlanTest::Subtype(s);
                return Ok((self.node(ExprKind::Wlan(proto, t), start), None));
            }
            Tok::Kw(Kw::Dir) => {
                self.bump();
                let d = self.name_or_num("`dir`")?;
                return Ok((self.node(ExprKind::Wlan(proto, WlanTest::Dir(d)), start), None));
            }
            Tok::Kw(Kw::ProtoKw) => {
                self.bump();
                qual.addr = Some(AddrKind::Proto);
            }
            Tok::Kw(Kw::ProtoChain) => {
                self.bump();
                qual.addr = Some(AddrKind::ProtoChain);
            }
            Tok::Kw(Kw::Gateway) => {
                self.bump();
                qual.addr = Some(AddrKind::Gateway);
            }
            _ => {
                qual.dir = self.dqual()?;
                qual.addr = self.aqual();
                if qual.dir.is_none() && qual.addr.is_none() {
                    return match proto {
                        Some(p) => Ok((self.node(ExprKind::Proto(p), start), None)),
                        None => Err(self.unexpected("a qualifier")),
                    };
                }
            }
        }
        let (e, _) = self.id(Some(qual), false)?;
        // The head belongs to the primitive's span.
        let e = relabel_start(e, start);
        Ok((e, Some(qual)))
    }

    fn dqual(&mut self) -> PResult<Option<Dir>> {
        let d = match self.peek() {
            Tok::Kw(Kw::Src) => Dir::Src,
            Tok::Kw(Kw::Dst) => Dir::Dst,
            Tok::Kw(Kw::Addr1) => Dir::Addr1,
            Tok::Kw(Kw::Addr2) => Dir::Addr2,
            Tok::Kw(Kw::Addr3) => Dir::Addr3,
            Tok::Kw(Kw::Addr4) => Dir::Addr4,
            Tok::Kw(Kw::Ra) => Dir::Ra,
            Tok::Kw(Kw::Ta) => Dir::Ta,
            _ => return Ok(None),
        };
        self.bump();
        if matches!(d, Dir::Src | Dir::Dst) {
            let combined = match self.peek() {
                Tok::Kw(Kw::Or) => Dir::SrcOrDst,
                Tok::Kw(Kw::And) => Dir::SrcAndDst,
                _ => return Ok(Some(d)),
            };
            self.bump();
            let other = if d == Dir::Src { Kw::Dst } else { Kw::Src };
            if self.peek() != &Tok::Kw(other) {
                let word = if other == Kw::Dst { "`dst`" } else { "`src`" };
                return Err(self.unexpected(word));
            }
            self.bump();
            return Ok(Some(combined));
        }
        Ok(Some(d))
    }

    fn aqual(&mut self) -> Option<AddrKind> {
        let a = match self.peek() {
            Tok::Kw(Kw::Host) => AddrKind::Host,
            Tok::Kw(Kw::Net) => AddrKind::Net,
            Tok::Kw(Kw::Port) => AddrKind::Port,
            Tok::Kw(Kw::PortRange) => AddrKind::PortRange,
            _ => return None,
        };
        self.bump();
        Some(a)
    }

    // ---- ids -----------------------------------------------------------------------

    /// `id: nid | pnum | ( pid )`, `nid: ... | not id`.
    fn id(&mut self, q: Ctx, inherited: bool) -> PResult<(Expr, Ctx)> {
        self.enter()?;
        let start = self.span().start;
        let r = match self.peek() {
            Tok::Kw(Kw::Not) => {
                let nots = self.nots();
                self.id(q, inherited).map(|(e, q)| (self.negate(e, nots), q))
            }
            Tok::Punct(Punct::LParen) => {
                self.bump();
                let r = self.pid(q, inherited);
                match r {
                    Ok(mut e) => self.expect_punct(Punct::RParen, "`)`, `and` or `or`").map(|_| {
                        e.span = Span::new(start, self.prev_end());
                        (e, q)
                    }),
                    Err(e) => Err(e),
                }
            }
            _ => self.simple_id(q, inherited).map(|e| (e, q)),
        };
        self.leave();
        r
    }

    /// `pid: nid | qid and id | qid or id` with `qid: pnum | pid`.
    fn pid(&mut self, q: Ctx, inherited: bool) -> PResult<Expr> {
        let start = self.span().start;
        let first = match self.peek() {
            Tok::Kw(Kw::Not) => self.id(q, inherited)?.0,
            Tok::Punct(Punct::LParen) => {
                // Only a parenthesised number may open a list.
                let id_start = self.span().start;
                let n = self.pnum()?;
                let id_span = Span::new(id_start, self.prev_end());
                self.primitive(q, Id::Num(n), id_span, inherited)?
            }
            _ => self.simple_id(q, inherited)?,
        };
        let mut rest = Vec::new();
        loop {
            let op = match self.peek() {
                Tok::Kw(Kw::And) => BoolOp::And,
                Tok::Kw(Kw::Or) => BoolOp::Or,
                _ => break,
            };
            self.bump();
            rest.push((op, self.id(q, true)?.0));
        }
        if rest.is_empty() {
            return Ok(first);
        }
        let kind = ExprKind::Chain { first: Box::new(first), rest };
        Ok(self.node(kind, start))
    }

    fn primitive(&self, q: Ctx, id: Id, id_span: Span, inherited: bool) -> PResult<Expr> {
        let Some(qual) = q else {
            return Err(ParseError::new(
                id_span,
                "expected a qualifier such as `host`, `net` or `port` before this id \
                 (there is no earlier one to inherit here)",
            ));
        };
        Ok(Expr {
            kind: ExprKind::Primitive(Primitive { qual, id, id_span, inherited }),
            span: id_span,
        })
    }

    /// A single id token, with `/len` or `mask M` where they apply.
    fn simple_id(&mut self, q: Ctx, inherited: bool) -> PResult<Expr> {
        let start = self.span().start;
        let id = match self.peek().clone() {
            Tok::Num(n) => {
                self.bump();
                Id::Num(n)
            }
            Tok::Id(s) => {
                self.bump();
                Id::Name(s)
            }
            Tok::Hid(s) => {
                self.bump();
                match self.peek() {
                    Tok::Punct(Punct::Slash) => {
                        self.bump();
                        Id::Ipv4Cidr(s, self.expect_num("`/`")?)
                    }
                    Tok::Kw(Kw::Mask) => {
                        self.bump();
                        match self.peek().clone() {
                            Tok::Hid(m) => {
                                self.bump();
                                Id::Ipv4Mask(s, m)
                            }
                            _ => return Err(self.unexpected("a dotted netmask after `mask`")),
                        }
                    }
                    _ => Id::Ipv4(s),
                }
            }
            Tok::Hid6(a) => {
                self.bump();
                if self.peek() == &Tok::Punct(Punct::Slash) {
                    self.bump();
                    Id::Ipv6Cidr(a, self.expect_num("`/`")?)
                } else {
                    Id::Ipv6(a)
                }
            }
            Tok::Eid(m) => {
                self.bump();
                Id::Mac(m)
            }
            Tok::Aid(a) => {
                self.bump();
                Id::Arcnet(a)
            }
            _ => {
                return Err(self
                    .unexpected("a host, network, port, protocol or name (an id), `not` or `(`"))
            }
        };
        let id_span = Span::new(start, self.prev_end());
        self.primitive(q, id, id_span, inherited)
    }

    // ---- arithmetic ----------------------------------------------------------------

    /// `arth relop arth`.
    fn relation(&mut self) -> PResult<Expr> {
        let start = self.span().start;
        let lhs = self.arith_at()?;
        let Some(op) = relop_of(self.peek()) else {
            return Err(self.unexpected(
                "a comparison (`>`, `<`, `>=`, `<=`, `=`, `!=`) or an arithmetic operator",
            ));
        };
        self.bump();
        let rhs = self.arith_at()?;
        Ok(self.node(ExprKind::Relation(Relation { op, lhs, rhs }), start))
    }

    /// A whole arithmetic expression at the current position, memoised.
    fn arith_at(&mut self) -> PResult<Arith> {
        let at = self.pos;
        if let Some(r) = self.arith_memo.get(&at) {
            return match r {
                Ok((a, end)) => {
                    self.pos = *end;
                    Ok(a.clone())
                }
                Err(e) => Err(e.clone()),
            };
        }
        let r = self.arith_bin(0).map(|a| (a, self.pos));
        self.arith_memo.insert(at, r.clone());
        r.map(|(a, _)| a)
    }

    /// Precedence climbing. The operators this call takes form one [`ArithKind::Chain`]
    /// (its left spine), in a loop: a flat `a + b + c ...` of any length nests nothing.
    /// Only `%` and `^`, which take everything after them, and parentheses nest.
    fn arith_bin(&mut self, min_prec: u8) -> PResult<Arith> {
        let first = self.arith_unary()?;
        let mut rest = Vec::new();
        while let Some((op, prec)) = binop_of(self.peek()) {
            let rhs = match prec {
                None => {
                    self.bump();
                    self.enter()?;
                    let r = self.arith_bin(0)?;
                    self.leave();
                    r
                }
                Some(p) if p >= min_prec => {
                    self.bump();
                    self.arith_bin(p + 1)?
                }
                Some(_) => break,
            };
            rest.push((op, rhs));
        }
        Ok(chain(first, rest))
    }

    fn arith_unary(&mut self) -> PResult<Arith> {
        if self.peek() != &Tok::Punct(Punct::Minus) {
            return self.arith_primary();
        }
        // A run of minus signs: `- - x` is `x`, so only the parity makes a node.
        let start = self.span().start;
        let mut odd = false;
        while self.peek() == &Tok::Punct(Punct::Minus) {
            self.bump();
            odd = !odd;
        }
        let operand = self.arith_primary()?;
        // `%` and `^` have no precedence, so they are shifted even after a unary minus.
        let mut rest = Vec::new();
        while let Some((op, None)) = binop_of(self.peek()) {
            self.bump();
            self.enter()?;
            let rhs = self.arith_bin(0)?;
            self.leave();
            rest.push((op, rhs));
        }
        let operand = chain(operand, rest);
        if !odd {
            return Ok(operand);
        }
        let span = Span::new(start, operand.span.end);
        Ok(Arith { kind: ArithKind::Neg(Box::new(operand)), span })
    }

    fn arith_primary(&mut self) -> PResult<Arith> {
        let start = self.span().start;
        let kind = match self.peek().clone() {
            Tok::Num(n) => {
                self.bump();
                ArithKind::Num(n)
            }
            Tok::Kw(Kw::Len) => {
                self.bump();
                ArithKind::Len
            }
            Tok::Kw(Kw::Proto(proto)) if self.peek_at(1) == &Tok::Punct(Punct::LBracket) => {
                self.bump();
                self.bump();
                self.enter()?;
                let offset = self.arith_bin(0)?;
                let size = if self.peek() == &Tok::Punct(Punct::Colon) {
                    self.bump();
                    let span = self.span();
                    match self.expect_num("`:` in a packet access")? {
                        1 => 1,
                        2 => 2,
                        4 => 4,
                        n => {
                            return Err(ParseError::new(
                                span,
                                format!("data size must be 1, 2 or 4, not {n}"),
                            ))
                        }
                    }
                } else {
                    1
                };
                self.expect_punct(Punct::RBracket, "`]` (or `:SIZE]`) to close the packet access")?;
                self.leave();
                return Ok(Arith {
                    kind: ArithKind::Load { proto, offset: Box::new(offset), size },
                    span: Span::new(start, self.prev_end()),
                });
            }
            Tok::Punct(Punct::LParen) => {
                let redundant = self.skip_redundant_parens();
                self.bump();
                self.enter()?;
                let inner = self.arith_at()?;
                self.expect_punct(Punct::RParen, "`)` or an arithmetic operator")?;
                self.close_redundant_parens(redundant)?;
                self.leave();
                return Ok(inner);
            }
            _ => {
                return Err(
                    self.unexpected("a number, `len`, a packet access like `ip[0]`, `-` or `(`")
                )
            }
        };
        Ok(Arith { kind, span: Span::new(start, self.prev_end()) })
    }
}

/// `first` followed by the operators of one precedence-climbing loop. When `first` is a
/// chain itself (`(a + b) * c`), the operators extend it: a chain means its left-to-right
/// fold, so the tree is the same whether or not the inner chain was parenthesised (and
/// `((a + b) * c)`, as the tree prints, reads back as the tree).
fn chain(first: Arith, mut rest: Vec<(BinOp, Arith)>) -> Arith {
    let Some((_, last)) = rest.last() else {
        return first;
    };
    let span = first.span.to(last.span);
    let kind = match first.kind {
        ArithKind::Chain { first: inner, rest: mut before } => {
            before.append(&mut rest);
            ArithKind::Chain { first: inner, rest: before }
        }
        kind => ArithKind::Chain { first: Box::new(Arith { kind, span: first.span }), rest },
    };
    Arith { kind, span }
}

/// Moves a primitive's span start back to cover its head.
fn relabel_start(mut e: Expr, start: usize) -> Expr {
    e.span.start = e.span.start.min(start);
    e
}

/// Of two failed readings, the one that got further explains the input better.
fn furthest(a: ParseError, b: ParseError) -> ParseError {
    if b.span.start > a.span.start {
        b
    } else {
        a
    }
}
