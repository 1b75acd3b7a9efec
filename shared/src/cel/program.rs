//! A compiled CEL expression and its evaluation under the cost limit.

use std::sync::Arc;

use cel::Context;
use cel::common::ast::IdedExpr;
use cel::common::types::{CelBool, CelString};
use cel::common::value::{FromVal, Val};

use super::CelError;
use super::activation::{Activation, to_json};
use super::cost::{self, Meter, PER_CALL_LIMIT};
use super::library;

/// A compiled expression, shareable between threads and evaluated any number of times.
#[derive(Debug, Clone)]
pub struct Program {
    inner: Arc<Compiled>,
}

#[derive(Debug)]
struct Compiled {
    source: String,
    /// The parsed expression, instrumented to charge the cost meter.
    expr: IdedExpr,
    /// The variables the expression names, sorted.
    variables: Vec<String>,
}

impl Program {
    /// Parses `expr` (macros expanded) with Kubernetes' CEL library.
    pub fn compile(expr: &str) -> Result<Program, CelError> {
        let parsed = library::env()
            .compile(expr)
            .map_err(|e| CelError::Compile(e.to_string()))?;
        let mut variables: Vec<String> = parsed
            .references()
            .variables()
            .into_iter()
            .map(str::to_string)
            .collect();
        variables.sort();
        variables.dedup();
        Ok(Program {
            inner: Arc::new(Compiled {
                source: expr.to_string(),
                expr: cost::instrument(parsed.expression()),
                variables,
            }),
        })
    }

    /// The source the program was compiled from.
    pub fn source(&self) -> &str {
        &self.inner.source
    }

    /// Whether the expression names variable `name` (`oldSelf` makes a transition rule).
    pub fn references(&self, name: &str) -> bool {
        self.inner
            .variables
            .binary_search_by(|v| v.as_str().cmp(name))
            .is_ok()
    }

    /// Evaluates to JSON, within [`PER_CALL_LIMIT`].
    pub fn eval(&self, vars: &Activation<'_>) -> Result<serde_json::Value, CelError> {
        self.eval_within(vars, PER_CALL_LIMIT).map(|(v, _)| v)
    }

    /// Evaluates to a bool (a validation rule); any other result is an error.
    pub fn eval_bool(&self, vars: &Activation<'_>) -> Result<bool, CelError> {
        self.eval_bool_within(vars, PER_CALL_LIMIT).map(|(v, _)| v)
    }

    /// Evaluates to a string (a `messageExpression`); any other result is an error.
    pub fn eval_string(&self, vars: &Activation<'_>) -> Result<String, CelError> {
        self.eval_string_within(vars, PER_CALL_LIMIT)
            .map(|(v, _)| v)
    }

    /// [`Program::eval`] with a cost limit of `limit`; also returns the cost spent.
    pub fn eval_within(
        &self,
        vars: &Activation<'_>,
        limit: u64,
    ) -> Result<(serde_json::Value, u64), CelError> {
        self.run(vars, limit, to_json)
    }

    /// [`Program::eval_bool`] with a cost limit of `limit`; also returns the cost spent.
    pub fn eval_bool_within(
        &self,
        vars: &Activation<'_>,
        limit: u64,
    ) -> Result<(bool, u64), CelError> {
        self.run(vars, limit, |v| typed(v, "bool", |b: &CelBool| *b.inner()))
    }

    /// [`Program::eval_string`] with a cost limit of `limit`; also returns the cost spent.
    pub fn eval_string_within(
        &self,
        vars: &Activation<'_>,
        limit: u64,
    ) -> Result<(String, u64), CelError> {
        self.run(vars, limit, |v| {
            typed(v, "string", |s: &CelString| s.inner().to_string())
        })
    }

    fn run<T>(
        &self,
        vars: &Activation<'_>,
        limit: u64,
        convert: impl FnOnce(&dyn Val) -> Result<T, CelError>,
    ) -> Result<(T, u64), CelError> {
        let mut ctx = Context::with_env(library::env());
        ctx.set_variable_resolver(vars);
        let meter = Meter::start(limit);
        let result = cel::Value::resolve_val(&self.inner.expr, &ctx);
        let Some(spent) = meter.spent() else {
            return Err(CelError::CostLimit);
        };
        drop(meter);
        let value = result.map_err(|e| CelError::Eval(describe(&e)))?;
        convert(value.as_ref()).map(|v| (v, spent))
    }
}

/// `v` as a CEL `C` (a `want`) converted by `f`, or the error that it is of another type.
fn typed<'b, 'v, C: FromVal<'b, 'v> + 'b, T>(
    v: &'b (dyn Val + 'v),
    want: &'static str,
    f: impl FnOnce(&C) -> T,
) -> Result<T, CelError> {
    v.downcast_ref::<C>().map(f).ok_or_else(|| CelError::Type {
        want,
        got: v.get_type().name().to_string(),
    })
}

/// An evaluation error in cel-go's words where they differ (`no such key: x`, `division by
/// zero`), so messages read as upstream's.
fn describe(e: &cel::ExecutionError) -> String {
    use cel::ExecutionError as E;
    match e {
        E::NoSuchKey(k) => format!("no such key: {k}"),
        E::DivisionByZero(_) => "division by zero".to_string(),
        E::RemainderByZero(_) => "modulus by zero".to_string(),
        E::Overflow(..) => "integer overflow".to_string(),
        E::NoSuchOverload(o) => format!("no such overload: {o}"),
        E::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}
