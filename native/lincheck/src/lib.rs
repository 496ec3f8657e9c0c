//! splitbrain's compiled witness search for the linearizability checker.
//!
//! `witness` looks for one linearization of a partition for two tiny models spelled as op codes over interned
//! values: a register (read, write, cas) and a one-key string map (get, put, append).  An indeterminate call
//! returns at +infinity and must be linearized too; the caller only passes ones that are legal in every state
//! (writes, and reads it spells as no-ops), so placing one after every determinate call is always possible
//! and "linearized somewhere" is as good as "taken effect or not".  The search (`search.rs`: a depth-first
//! walk in invoke order with a (linearized set, state) cache keyed by a Zobrist hash, and rules that cut it)
//! only ever answers "here is a witness" or "none found within the step budget": a hash collision, a rule or
//! the budget can make it miss a witness, never invent one, and the caller then runs the Python search, which
//! stays the oracle.  `kv_witnesses` (`kv_history.rs`) reads a whole kv history straight from its `Op`s.

use pyo3::prelude::*;

mod kv_history;
mod register_history;
mod search;

/// The search's maps hash with rustc's Fx scheme (the `rustc-hash` crate): their keys are our own interned values
/// and Zobrist hashes, never attacker-chosen, and with std's SipHash, hashing the long strings that kv appends
/// build (hundreds of bytes) was half of a partition's search time.
pub(crate) type FxMap<K, V> = rustc_hash::FxHashMap<K, V>;
pub(crate) type FxSet<K> = rustc_hash::FxHashSet<K>;

pub(crate) use search::{search, APPEND, CAS_ANY, NOP, READ, WRITE};

/// witness(init, codes, a, b, call_t, ret_t, max_steps, count_after=None) -> (order, steps, cache_entries) | None
///
/// codes[i]: 0 nop, 1 read a, 2 write a, 3 append a, 4 cas a -> b (ok), 5 cas a failed, 6 cas a -> b with an
/// unknown outcome; values are strings compared exactly (the caller encodes other values so that equal strings
/// mean equal values); ret_t[i] is +inf for an indeterminate call.  count_after: the steps after which the
/// counting look-ahead starts (search.rs, rule 5; None: once the walk has taken more steps than there are
/// calls; the tests pass 0 to hold it to the oracle on small histories).
#[pyfunction]
#[pyo3(signature = (init, codes, a, b, call_t, ret_t, max_steps, count_after=None))]
#[allow(clippy::too_many_arguments)]
fn witness(
    py: Python<'_>, init: String, codes: Vec<u8>, a: Vec<String>, b: Vec<String>, call_t: Vec<f64>,
    ret_t: Vec<f64>, max_steps: u64, count_after: Option<u64>,
) -> PyResult<Option<(Vec<u32>, u64, usize)>> {
    let n = codes.len();
    if a.len() != n || b.len() != n || call_t.len() != n || ret_t.len() != n {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "witness: codes, a, b, call_t and ret_t must have one entry per call; got {n}, {}, {}, {}, {}",
            a.len(), b.len(), call_t.len(), ret_t.len()
        )));
    }
    if let Some(bad) = codes.iter().find(|&&c| c > CAS_ANY) {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "witness: op code {bad} is not one of 0..=6 (nop, read, write, append, cas ok, cas failed, cas ?)"
        )));
    }
    if call_t.iter().any(|t| !t.is_finite()) || ret_t.iter().any(|t| t.is_nan() || *t == f64::NEG_INFINITY) {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "witness: every call_t must be finite and every ret_t finite or +inf (an indeterminate call)",
        ));
    }
    Ok(py.allow_threads(|| search(&init, &codes, &a, &b, &call_t, &ret_t, max_steps, count_after)))
}

#[pymodule]
fn lincheck_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(witness, m)?)?;
    m.add_function(wrap_pyfunction!(kv_history::kv_witnesses, m)?)?;
    m.add_function(wrap_pyfunction!(register_history::register_witness, m)?)?;
    Ok(())
}
