//! The runtime cost limit, so a hostile rule cannot hang the API server.
//!
//! The `cel` crate has no cost tracking, so compiling rewrites the expression to charge a
//! per-thread meter as it runs (upstream's limits are per expression evaluation and per request,
//! and its costs are roughly "one per step, proportional to size for strings and lists"):
//! - every comprehension iteration (`all`, `exists`, `exists_one`, `map`, `filter`) costs 1;
//! - every argument (receiver included) of a function or operator call costs 1, plus one per
//!   element of a list or map, plus one per 10 bytes of a string or bytes value; so work that
//!   grows with the size of the data (joining, splitting, matching, comparing, concatenating)
//!   is charged for that size. Control flow (`&&`, `||`, `?:`, `!`), indexing, `size` and
//!   the conversions (`int`, `string` ...) are not charged beyond their own arguments' steps.
//!
//! The rewrite also points `matches` at the regex module's cached version.
//!
//! An evaluation that goes over its limit fails with `CostLimit`; the meter stays exhausted
//! until the evaluation ends, so every later charge fails at once and the evaluation unwinds.

use std::cell::Cell;

use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr, operators};
use cel::common::types::{CelBytes, CelString};
use cel::common::value::{CowVal, Val};
use cel::{Env, ExecutionError};

/// Upstream's `PerCallLimit`: the cost one evaluation of one expression may spend.
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// Upstream's `RuntimeCELCostBudget`: what all the rules of one object's validation may spend.
pub const RUNTIME_BUDGET: u64 = 10_000_000;

/// The name of the charging function the rewrite inserts; `@` cannot be written in CEL source,
/// so no expression can call or shadow it.
const CHARGE: &str = "@cost";

thread_local! {
    /// What the running evaluation on this thread may still spend; `None` when none runs.
    static REMAINING: Cell<Option<u64>> = const { Cell::new(None) };
    /// Set once the running evaluation went over its limit.
    static EXCEEDED: Cell<bool> = const { Cell::new(false) };
}

/// Calls that cost nothing beyond evaluating their arguments: control flow, the comprehension
/// plumbing, constant-time lookups and conversions.
const FREE_CALLS: &[&str] = &[
    operators::CONDITIONAL,
    operators::LOGICAL_AND,
    operators::LOGICAL_OR,
    operators::LOGICAL_NOT,
    operators::NOT_STRICTLY_FALSE,
    operators::INDEX,
    operators::OPT_INDEX,
    operators::OPT_SELECT,
    operators::NEGATE,
    "size",
    "int",
    "uint",
    "double",
    "bool",
    "dyn",
    "type",
];

/// Registers the charging function on `env`.
pub(crate) fn register(env: &mut Env) -> Result<(), cel::DeclarationError> {
    env.add_overload(
        CHARGE,
        "cost_charge_dyn",
        vec![cel::common::types::DYN_TYPE],
        charge_argument,
    )
}

/// `expr` rewritten to charge the meter as described in the module doc.
pub(crate) fn instrument(expr: &IdedExpr) -> IdedExpr {
    let mut out = expr.clone();
    let mut next_id = max_id(expr) + 1;
    rewrite(&mut out, &[], &mut next_id);
    out
}

fn max_id(e: &IdedExpr) -> u64 {
    let mut max = e.id;
    each_child(e, |c| max = max.max(max_id(c)));
    max
}

fn each_child(e: &IdedExpr, mut f: impl FnMut(&IdedExpr)) {
    match &e.expr {
        Expr::Call(c) => {
            c.target.iter().for_each(|t| f(t));
            c.args.iter().for_each(&mut f);
        }
        Expr::Comprehension(c) => {
            for x in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                f(x);
            }
        }
        Expr::List(l) => l.elements.iter().for_each(f),
        Expr::Map(m) => m.entries.iter().for_each(|e| {
            if let EntryExpr::MapEntry(me) = &e.expr {
                f(&me.key);
                f(&me.value);
            }
        }),
        Expr::Struct(s) => s.entries.iter().for_each(|e| {
            if let EntryExpr::StructField(sf) = &e.expr {
                f(&sf.value);
            }
        }),
        Expr::Select(s) => f(&s.operand),
        _ => {}
    }
}

/// `charge(e)`: evaluates `e`, charges for it, and hands it on unchanged.
fn wrap(e: &mut IdedExpr, next_id: &mut u64) {
    let inner = std::mem::take(e);
    *e = IdedExpr {
        id: *next_id,
        expr: Expr::Call(CallExpr {
            func_name: CHARGE.to_string(),
            target: None,
            args: vec![inner],
        }),
    };
    *next_id += 1;
}

/// Function namespaces (`lists.range(3)`, `optional.of(x)`): a call's target spelling one is
/// part of the function's name, not a value, so it must stay as written.
const NAMESPACES: &[&str] = &[
    "lists", "strings", "math", "sets", "optional", "base64", "cel", "ip",
];

fn names_namespace(e: &IdedExpr) -> bool {
    let mut e = e;
    loop {
        match &e.expr {
            Expr::Ident(name) => return NAMESPACES.contains(&name.as_str()),
            Expr::Select(s) if !s.test => e = &s.operand,
            _ => return false,
        }
    }
}

fn is_ident(e: &IdedExpr, names: &[String]) -> bool {
    matches!(&e.expr, Expr::Ident(n) if names.contains(n))
}

/// Rewrites `e` in place; `accus` are the accumulators of the enclosing comprehensions, whose
/// steps (`@result + [x]`, `@result && p`) keep their shape so the interpreter's fast paths for
/// them still apply.
fn rewrite(e: &mut IdedExpr, accus: &[String], next_id: &mut u64) {
    match &mut e.expr {
        Expr::Call(call) => {
            if call.func_name == "matches" {
                call.func_name = super::regex::MATCHES.to_string();
            }
            let touches_accu = call.args.iter().any(|a| is_ident(a, accus));
            let charged = !touches_accu
                && call.func_name != CHARGE
                && !FREE_CALLS.contains(&call.func_name.as_str());
            if let Some(t) = call.target.as_mut() {
                rewrite(t, accus, next_id);
                if charged && !names_namespace(t) {
                    wrap(t, next_id);
                }
            }
            for a in call.args.iter_mut() {
                rewrite(a, accus, next_id);
                if charged {
                    wrap(a, next_id);
                }
            }
        }
        Expr::Comprehension(c) => {
            rewrite(&mut c.iter_range, accus, next_id);
            rewrite(&mut c.accu_init, accus, next_id);
            let mut inner: Vec<String> = accus.to_vec();
            inner.push(c.accu_var.clone());
            rewrite(&mut c.loop_cond, &inner, next_id);
            rewrite(&mut c.loop_step, &inner, next_id);
            rewrite(&mut c.result, &inner, next_id);
            charge_each_iteration(c, next_id);
        }
        Expr::List(l) => l
            .elements
            .iter_mut()
            .for_each(|x| rewrite(x, accus, next_id)),
        Expr::Map(m) => m.entries.iter_mut().for_each(|en| {
            if let EntryExpr::MapEntry(me) = &mut en.expr {
                rewrite(&mut me.key, accus, next_id);
                rewrite(&mut me.value, accus, next_id);
            }
        }),
        Expr::Struct(s) => s.entries.iter_mut().for_each(|en| {
            if let EntryExpr::StructField(sf) = &mut en.expr {
                rewrite(&mut sf.value, accus, next_id);
            }
        }),
        Expr::Select(s) => rewrite(&mut s.operand, accus, next_id),
        _ => {}
    }
}

/// Puts one charge on a part of the comprehension that runs exactly once per iteration,
/// without changing the shapes the interpreter recognises: the loop condition when it is not
/// a constant (`all`, `exists`); else the guard of a conditional step (`filter`,
/// `exists_one`); else the appended item of `@result + [item]` (`map`); else the whole step.
fn charge_each_iteration(c: &mut cel::common::ast::ComprehensionExpr, next_id: &mut u64) {
    if !matches!(c.loop_cond.expr, Expr::Literal(_)) {
        return wrap(&mut c.loop_cond, next_id);
    }
    if let Expr::Call(step) = &mut c.loop_step.expr {
        if step.func_name == operators::CONDITIONAL && step.args.len() == 3 {
            return wrap(&mut step.args[0], next_id);
        }
        if step.func_name == operators::ADD
            && step.args.len() == 2
            && let Expr::List(items) = &mut step.args[1].expr
            && let Some(first) = items.elements.first_mut()
        {
            return wrap(first, next_id);
        }
    }
    wrap(&mut c.loop_step, next_id)
}

/// What an argument costs: 1, plus its length for a list or map, plus a tenth of its bytes
/// for a string or bytes value.
fn argument_cost(v: &dyn Val) -> u64 {
    if let Some(s) = v.downcast_ref::<CelString>() {
        return 1 + s.inner().len() as u64 / 10;
    }
    if let Some(b) = v.downcast_ref::<CelBytes>() {
        return 1 + b.inner().len() as u64 / 10;
    }
    match v.get_type().name() {
        "list" | "map" => {
            1 + v
                .as_sizer()
                .map_or(0, |s| u64::try_from(*s.size().inner()).unwrap_or(0))
        }
        _ => 1,
    }
}

fn charge_argument<'b, 'v>(
    mut args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let arg = args
        .pop()
        .ok_or_else(|| ExecutionError::invalid_argument_count(1, 0))?;
    charge(argument_cost(arg.as_ref()))?;
    Ok(arg)
}

/// Spends `amount` of the running evaluation's budget; fails once it is exhausted. Outside an
/// evaluation (no meter running) nothing is counted.
pub(crate) fn charge(amount: u64) -> Result<(), ExecutionError> {
    REMAINING.with(|r| match r.get() {
        None => Ok(()),
        Some(left) if left >= amount && !EXCEEDED.with(Cell::get) => {
            r.set(Some(left - amount));
            Ok(())
        }
        Some(_) => {
            EXCEEDED.with(|x| x.set(true));
            r.set(Some(0));
            Err(ExecutionError::function_error(
                CHARGE,
                "operation cancelled: actual cost limit exceeded",
            ))
        }
    })
}

/// The meter of one evaluation on this thread; restores the enclosing one (if any) on drop.
pub(crate) struct Meter {
    limit: u64,
    saved: (Option<u64>, bool),
}

impl Meter {
    pub(crate) fn start(limit: u64) -> Meter {
        let saved = (
            REMAINING.with(|r| r.replace(Some(limit))),
            EXCEEDED.with(|x| x.replace(false)),
        );
        Meter { limit, saved }
    }

    /// What the evaluation spent, or `None` if it went over the limit.
    pub(crate) fn spent(&self) -> Option<u64> {
        if EXCEEDED.with(Cell::get) {
            return None;
        }
        let left = REMAINING.with(Cell::get).unwrap_or(self.limit);
        Some(self.limit.saturating_sub(left))
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        REMAINING.with(|r| r.set(self.saved.0));
        EXCEEDED.with(|x| x.set(self.saved.1));
    }
}
