//! `register_witness`: the fast path of the checker for a register history, read straight from the `Op`s.
//!
//! It does what `pair_ops`, `build_calls` and `_native._encode_register` do together in Python for the
//! `register` and `cas-register` models (one partition: they do not partition), then runs `search`.  Values
//! are spelled as text, `nil` for None and decimal for an int (equal texts exactly when the values are
//! equal).  Anything else -- a value that is neither None nor exactly an int (or an int beyond 64 bits), a cas
//! argument that is not a pair, an unknown f, a completion without an invoke, a time that is not a finite
//! number -- makes it answer None, and the checker takes its general path, which stays the reference.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyLong, PyTuple};

use crate::kv_history::{packed, read_pairs, FAIL, INFO};
use crate::search::{search, CAS_ANY, CAS_FAIL, CAS_OK};
use crate::{NOP, READ, WRITE};

/// A value as the search spells it: None as "nil", an exact int in decimal; None for anything else.
fn spelled(x: &Bound<'_, PyAny>) -> Option<String> {
    if x.is_none() {
        return Some("nil".to_owned());
    }
    if !x.is_exact_instance_of::<PyLong>() {
        return None;
    }
    x.extract::<i64>().ok().map(|v| v.to_string())
}

/// The two members of a cas argument (a list or tuple of two); None if it is not one.
fn cas_pair<'py>(x: &Bound<'py, PyAny>) -> Option<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    if let Ok(l) = x.downcast::<PyList>() {
        return (l.len() == 2).then(|| Some((l.get_item(0).ok()?, l.get_item(1).ok()?))).flatten();
    }
    let t = x.downcast::<PyTuple>().ok()?;
    (t.len() == 2).then(|| Some((t.get_item(0).ok()?, t.get_item(1).ok()?))).flatten()
}

/// register_witness(ops, init, cas, nil_read_any, drop_fails, per_call, base)
///     -> None | (found, order, steps, cache entries, pairs)
///
/// found: whether the search linearized the history (order, steps and cache entries are then its witness);
/// pairs: invoke position and completion position (or -1) of each call id, two i64s per call; order and
/// pairs come packed (see `kv_history::packed`).  None: the history is not the plain case (see the module
/// docs).  `init` is the initial value spelled as above.
#[pyfunction]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
pub fn register_witness<'py>(
    py: Python<'py>, ops: &Bound<'py, PyList>, init: String, cas: bool, nil_read_any: bool, drop_fails: bool,
    per_call: u64, base: u64,
) -> PyResult<Option<(bool, Bound<'py, PyBytes>, u64, usize, Bound<'py, PyBytes>)>> {
    let Some((recs, pairs)) = read_pairs(py, ops)? else { return Ok(None) };
    let n = pairs.len();
    let (mut codes, mut first, mut second) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut call_t, mut ret_t) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut kept: Vec<i64> = Vec::with_capacity(2 * n);
    for &(i, c) in &pairs {
        let inv = &recs[i];
        let comp = c.map(|c| &recs[c]);
        let ctype = comp.map_or(INFO, |c| c.kind);
        if ctype == FAIL && drop_fails {
            continue;
        }
        let mut input = inv.value.clone().expect("an invoke's value");
        let mut out = None; // the completion's value (ok completions only)
        let ret = match comp {
            Some(c) if ctype != INFO => {
                if c.time.is_nan() {
                    return Ok(None);
                }
                if let Some(o) = c.value.as_ref() {
                    if input.is_none() {
                        input = o.clone();
                    }
                    out = Some(o);
                }
                c.time
            }
            _ => f64::INFINITY,
        };
        let f = match &inv.f {
            Some(f) => f.to_str()?,
            None => "",
        };
        let spelled_op = match f {
            "read" => match out {
                None => Some((NOP, String::new(), String::new())), // failed or indeterminate
                Some(o) if o.is_none() && nil_read_any => Some((NOP, String::new(), String::new())),
                Some(o) => spelled(o).map(|v| (READ, v, String::new())),
            },
            "write" if ctype == FAIL => Some((NOP, String::new(), String::new())),
            "write" => spelled(&input).map(|v| (WRITE, v, String::new())),
            // as _encode_register: a failed cas needs only its expected value spelled
            "cas" if cas => cas_pair(&input).and_then(|(a, b)| match ctype {
                FAIL => Some((CAS_FAIL, spelled(&a)?, String::new())),
                INFO => Some((CAS_ANY, spelled(&a)?, spelled(&b)?)),
                _ => Some((CAS_OK, spelled(&a)?, spelled(&b)?)),
            }),
            _ => None,
        };
        let Some((code, a, b)) = spelled_op else { return Ok(None) };
        if inv.time.is_nan() {
            return Ok(None);
        }
        codes.push(code);
        first.push(a);
        second.push(b);
        call_t.push(inv.time);
        ret_t.push(ret);
        kept.push(inv.pos as i64);
        kept.push(comp.map_or(-1, |c| c.pos as i64));
    }
    if codes.is_empty() {
        return Ok(None);
    }
    let max_steps = per_call * codes.len() as u64 + base;
    let kept = packed(py, &kept, i64::to_ne_bytes)?;
    Ok(Some(match search(&init, &codes, &first, &second, &call_t, &ret_t, max_steps, None) {
        Some((order, steps, cache)) => (true, packed(py, &order, u32::to_ne_bytes)?, steps, cache, kept),
        None => (false, packed(py, &[], u32::to_ne_bytes)?, 0, 0, kept),
    }))
}
