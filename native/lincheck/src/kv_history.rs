//! `kv_witnesses`: the fast path of the checker for a kv history, read straight from the `Op` objects.
//!
//! It does what `pair_ops`, `build_calls`, `partition_calls` and `_native._encode_kv` do together in Python
//! (pair each invoke with its process's next completion, drop or keep failed calls, one partition per key in
//! order of first appearance, each call spelled as an op code over strings), then runs `search` on each
//! partition.  Anything that Python would treat differently from the plain case -- a value that is not a dict
//! with a str key, a non-str argument, an unknown f, a completion without an invoke, a time that is not a
//! finite number -- makes it answer None, and the checker takes its general path, which stays the reference.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyLong, PyString};
use crate::{search, FxMap, APPEND, NOP, READ, WRITE};

/// One partition's calls: key, call ids (in the whole history), codes, arguments, call and return times.
/// The arguments stay the history's own str objects (the search copies each distinct value once).
struct Part<'py> {
    key: String,
    ids: Vec<u32>,
    codes: Vec<u8>,
    args: Vec<Option<Bound<'py, PyString>>>, // None: the empty string
    call_t: Vec<f64>,
    ret_t: Vec<f64>,
}

/// The object as a str when it is exactly a str (Python's `type(x) is str`) with no NUL in it.
fn plain_str<'py>(x: Bound<'py, PyAny>) -> Option<Bound<'py, PyString>> {
    if !x.is_exact_instance_of::<PyString>() {
        return None;
    }
    let s = x.downcast_into::<PyString>().ok()?;
    if s.to_str().ok()?.contains('\0') {
        return None;
    }
    Some(s)
}

pub(crate) const INVOKE: u8 = 0;
pub(crate) const OK: u8 = 1; // any completion type but fail and info, as calls_of_pairs reads it
pub(crate) const FAIL: u8 = 2;
pub(crate) const INFO: u8 = 3;

/// What the reader needs of one client op, read in one visit (a history's ops are read once each: on long
/// histories the objects do not fit in the cache, and a second pass over them cost as much as the first).
pub(crate) struct Rec<'py> {
    pub(crate) pos: usize,
    pub(crate) kind: u8,
    pub(crate) time: f64, // NaN: not a finite number (an error only where it is needed)
    pub(crate) f: Option<Bound<'py, PyString>>, // invokes: f, if a plain str
    pub(crate) value: Option<Bound<'py, PyAny>>, // invokes, and ok completions whose value is used
}

/// The client ops of the history and their (invoke, completion or None) pairs in invoke order, as indices
/// into the ops read; None for a completion without an open invoke, a process that is neither an int nor
/// "nemesis", or a type that is not a plain str.
#[allow(clippy::type_complexity)]
pub(crate) fn read_pairs<'py>(
    py: Python<'py>, ops: &Bound<'py, PyList>,
) -> PyResult<Option<(Vec<Rec<'py>>, Vec<(usize, Option<usize>)>)>> {
    let mut open: FxMap<i64, usize> = FxMap::default();
    let mut recs: Vec<Rec<'py>> = Vec::with_capacity(ops.len());
    let mut pairs: Vec<(usize, Option<usize>)> = Vec::with_capacity(ops.len() / 2 + 1);
    for (pos, op) in ops.iter().enumerate() {
        let process = op.getattr(intern!(py, "process"))?;
        let p: i64 = match process.extract() {
            Ok(p) => p,
            Err(_) => {
                if process.downcast::<PyString>().map(|s| s.to_str().ok() == Some("nemesis")).unwrap_or(false) {
                    continue;
                }
                return Ok(None);
            }
        };
        let typ = op.getattr(intern!(py, "type"))?;
        // the usual type strings are the interned ones: compared by identity before by text
        let kind = if typ.is(intern!(py, "invoke")) {
            INVOKE
        } else if typ.is(intern!(py, "ok")) {
            OK
        } else {
            let Some(typ) = plain_str(typ) else { return Ok(None) };
            match typ.to_str()? {
                "invoke" => INVOKE,
                "fail" => FAIL,
                "info" => INFO,
                _ => OK,
            }
        };
        let time = op.getattr(intern!(py, "time"))?;
        // an int time is read as one (as a float it would be converted through a new float object)
        let time = match time.downcast_exact::<PyLong>().ok().and_then(|t| t.extract::<i64>().ok()) {
            Some(t) if t.unsigned_abs() < 1 << 53 => t as f64,
            _ => match time.extract::<f64>() {
                Ok(t) if t.is_finite() => t,
                _ => f64::NAN,
            },
        };
        if kind == INVOKE {
            let f = plain_str(op.getattr(intern!(py, "f"))?);
            let value = Some(op.getattr(intern!(py, "value"))?);
            open.insert(p, pairs.len());
            pairs.push((recs.len(), None));
            recs.push(Rec { pos, kind, time, f, value });
            continue;
        }
        let Some(i) = open.remove(&p) else { return Ok(None) };
        pairs[i].1 = Some(recs.len());
        // An ok completion's value is read only where it is used: a read's output, or the input of an invoke
        // without one (touching the value object of every completion was a cache miss each on long histories).
        let inv = &recs[pairs[i].0];
        let writes = inv.f.as_ref().is_some_and(|f| matches!(f.to_str(), Ok("put" | "append" | "write" | "cas")));
        let needed = kind == OK && (!writes || inv.value.as_ref().is_some_and(|v| v.is_none()));
        let value = if needed { Some(op.getattr(intern!(py, "value"))?) } else { None };
        recs.push(Rec { pos, kind, time, f: None, value });
    }
    Ok(Some((recs, pairs)))
}

/// Numbers as one bytes object in native byte order, which Python reads through `memoryview(b).cast("I")`
/// (u32) or `.cast("q")` (i64): an int object per number, and a tuple per pair, cost more to build and to
/// free than the whole search of an easy history.
pub(crate) fn packed_u32<'py>(py: Python<'py>, xs: &[u32]) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_bound_with(py, 4 * xs.len(), |buf| {
        for (out, x) in buf.chunks_exact_mut(4).zip(xs) {
            out.copy_from_slice(&x.to_ne_bytes());
        }
        Ok(())
    })
}

/// See `packed_u32`.
pub(crate) fn packed_i64<'py>(py: Python<'py>, xs: &[i64]) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_bound_with(py, 8 * xs.len(), |buf| {
        for (out, x) in buf.chunks_exact_mut(8).zip(xs) {
            out.copy_from_slice(&x.to_ne_bytes());
        }
        Ok(())
    })
}

/// One partition's answer: key, call ids (packed u32), witness (order packed u32, steps, cache entries) or None.
type PartAnswer<'py> = (String, Bound<'py, PyBytes>, Option<(Bound<'py, PyBytes>, u64, usize)>);

/// kv_witnesses(ops, init, drop_fails, per_call, base) -> None | (parts, pairs)
///
/// parts: (key, call ids, witness) per partition in order of first appearance, the witness (order, steps,
/// cache entries) or None where the search missed (the checker's general path pre-checks and searches only
/// those); pairs: invoke position and completion position (or -1) of each call id, two i64s per call.  Call
/// ids, orders and pairs come packed (see `packed_u32`).  None: the history is not the plain case (see the
/// module docs).
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn kv_witnesses<'py>(
    py: Python<'py>, ops: &Bound<'py, PyList>, init: String, drop_fails: bool, per_call: u64, base: u64,
) -> PyResult<Option<(Vec<PartAnswer<'py>>, Bound<'py, PyBytes>)>> {
    let Some((recs, pairs)) = read_pairs(py, ops)? else { return Ok(None) };
    let mut parts: Vec<Part<'_>> = Vec::new();
    let mut part_of: FxMap<String, usize> = FxMap::default();
    let mut kept: Vec<i64> = Vec::with_capacity(2 * pairs.len());
    for &(i, c) in &pairs {
        let inv = &recs[i];
        let comp = c.map(|c| &recs[c]);
        let ctype = comp.map_or(INFO, |c| c.kind);
        let mut value = inv.value.clone().expect("an invoke's value");
        let mut out: Option<&Bound<'_, PyAny>> = None; // the completion's value (ok completions only)
        let ret = match comp {
            Some(c) if ctype != INFO => {
                if ctype == FAIL && drop_fails {
                    continue;
                }
                if c.time.is_nan() {
                    return Ok(None);
                }
                if let Some(o) = c.value.as_ref() {
                    if value.is_none() {
                        value = o.clone();
                    }
                    out = Some(o);
                }
                c.time
            }
            _ => f64::INFINITY,
        };
        if !value.is_exact_instance_of::<PyDict>() {
            return Ok(None);
        }
        let value = value.downcast::<PyDict>()?;
        let Some(key) = value.get_item(intern!(py, "key"))? else { return Ok(None) };
        let Some(key) = plain_str(key) else { return Ok(None) };
        let f = match &inv.f {
            Some(f) => f.to_str()?,
            None => "",
        };
        // (code, argument): Some(Some(s)) a str, Some(None) the empty string, None not the plain case
        let (code, arg): (u8, Option<Option<Bound<'_, PyString>>>) = if ctype == FAIL {
            (NOP, Some(None))
        } else if f == "get" {
            match out {
                None => (NOP, Some(None)),
                Some(o) if o.is_exact_instance_of::<PyDict>() => {
                    match o.downcast::<PyDict>()?.get_item(intern!(py, "value"))? {
                        Some(v) => (READ, plain_str(v).map(Some)),
                        None => (READ, None),
                    }
                }
                Some(o) => (READ, plain_str(o.clone()).map(Some)),
            }
        } else if f == "append" || f == "put" {
            let arg = match value.get_item(intern!(py, "value"))? {
                Some(v) => plain_str(v).map(Some),
                None => None,
            };
            (if f == "append" { APPEND } else { WRITE }, arg)
        } else {
            return Ok(None);
        };
        let Some(arg) = arg else { return Ok(None) };
        let call = inv.time;
        if call.is_nan() {
            return Ok(None);
        }
        let key = key.to_str()?;
        let j = match part_of.get(key) {
            Some(&j) => j,
            None => {
                part_of.insert(key.to_owned(), parts.len());
                let key = key.to_owned();
                parts.push(Part { key, ids: vec![], codes: vec![], args: vec![], call_t: vec![], ret_t: vec![] });
                parts.len() - 1
            }
        };
        let part = &mut parts[j];
        part.ids.push((kept.len() / 2) as u32);
        part.codes.push(code);
        part.args.push(arg);
        part.call_t.push(call);
        part.ret_t.push(ret);
        kept.push(inv.pos as i64);
        kept.push(comp.map_or(-1, |c| c.pos as i64));
    }
    if parts.is_empty() {
        return Ok(None);
    }
    let mut found = Vec::with_capacity(parts.len());
    for part in parts {
        let n = part.codes.len();
        let empty = vec![""; n];
        let args: Vec<&str> = part.args.iter().map(|a| a.as_ref().map_or(Ok(""), |s| s.to_str())).collect::<PyResult<_>>()?;
        let max_steps = per_call * n as u64 + base;
        let witness = match search(&init, &part.codes, &args, &empty, &part.call_t, &part.ret_t, max_steps, None) {
            Some((order, steps, cache)) => Some((packed_u32(py, &order)?, steps, cache)),
            None => None,
        };
        found.push((part.key, packed_u32(py, &part.ids)?, witness));
    }
    Ok(Some((found, packed_i64(py, &kept)?)))
}
