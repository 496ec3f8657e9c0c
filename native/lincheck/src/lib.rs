//! splitbrain's compiled witness search for the linearizability checker.
//!
//! `witness` looks for one linearization of a partition for two tiny models spelled as op codes over interned
//! values: a register (read, write, cas) and a one-key string map (get, put, append).  An indeterminate call
//! returns at +infinity and must be linearized too; the caller only passes ones that are legal in every state
//! (writes, and reads it spells as no-ops), so placing one after every determinate call is always possible
//! and "linearized somewhere" is as good as "taken effect or not".  It is a depth-first search in invoke order over a doubly linked list of call and
//! return events (a call may be linearized while no pending return precedes it in the list), with a cache
//! of (linearized set, state) pairs keyed by a 64-bit Zobrist hash of the set.  It only ever answers "here
//! is a witness" or "none found within the step budget": a hash collision or the budget can make it miss a
//! witness, never invent one, and the caller then runs the Python search, which stays the oracle.

use pyo3::prelude::*;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

mod kv_history;

/// A multiply-rotate hasher (as in rustc's FxHash) for the search's maps: their keys are our own interned
/// values and Zobrist hashes, never attacker-chosen, and with std's SipHash, hashing the long strings that
/// kv appends build (hundreds of bytes) was half of a partition's search time.
#[derive(Default, Clone, Copy)]
pub(crate) struct Fx(u64);

impl Fx {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for Fx {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut buf = [0u8; 8];
            buf[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(buf) ^ ((rest.len() as u64) << 59));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;
type FxSet<K> = HashSet<K, BuildHasherDefault<Fx>>;

pub(crate) const NOP: u8 = 0; // always legal, state unchanged (a definite failure the model keeps)
pub(crate) const READ: u8 = 1; // legal iff the state is a
pub(crate) const WRITE: u8 = 2; // state := a
pub(crate) const APPEND: u8 = 3; // state := state + a (strings)
const CAS_OK: u8 = 4; // legal iff the state is a; state := b
const CAS_FAIL: u8 = 5; // legal iff the state is not a
const CAS_ANY: u8 = 6; // an indeterminate cas: always legal; state := b if it is a

struct Values {
    ids: FxMap<String, u32>,
    text: Vec<String>,
    concat: FxMap<(u32, u32), u32>,
}

impl Values {
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.text.len() as u32;
        self.ids.insert(s.to_owned(), id);
        self.text.push(s.to_owned());
        id
    }

    fn append(&mut self, s: u32, v: u32) -> u32 {
        if let Some(&id) = self.concat.get(&(s, v)) {
            return id;
        }
        let joined = format!("{}{}", self.text[s as usize], self.text[v as usize]);
        let id = self.intern(&joined);
        self.concat.insert((s, v), id);
        id
    }
}

fn step(values: &mut Values, code: u8, a: u32, b: u32, s: u32) -> Option<u32> {
    match code {
        NOP => Some(s),
        READ => (s == a).then_some(s),
        WRITE => Some(a),
        APPEND => Some(values.append(s, a)),
        CAS_OK => (s == a).then_some(b),
        CAS_FAIL => (s != a).then_some(s),
        CAS_ANY => Some(if s == a { b } else { s }),
        _ => None,
    }
}

/// splitmix64: the Zobrist keys, from a fixed seed (the search is deterministic).
fn zobrist(n: usize) -> Vec<u64> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        })
        .collect()
}

/// Search one partition; see the module docs.  Returns the calls (indices into the arguments) in a
/// linearization order and the number of steps, or None when no witness was found within `max_steps`.
pub(crate) fn search<S: AsRef<str>>(
    init: &str, codes: &[u8], a: &[S], b: &[S], call_t: &[f64], ret_t: &[f64], max_steps: u64,
) -> Option<(Vec<u32>, u64, usize)> {
    let n = codes.len();
    let mut values = Values { ids: FxMap::default(), text: Vec::new(), concat: FxMap::default() };
    let mut state = values.intern(init);
    let av: Vec<u32> = a.iter().map(|s| values.intern(s.as_ref())).collect();
    let bv: Vec<u32> = b.iter().map(|s| values.intern(s.as_ref())).collect();
    // Events: 2i is call i's invoke, 2i+1 its return.  Closed intervals: at equal times invokes come first,
    // so a call invoked when another returns is still a candidate before that return.
    let mut events: Vec<(f64, u8, u32)> = Vec::with_capacity(2 * n);
    for i in 0..n {
        events.push((call_t[i], 0, 2 * i as u32));
        events.push((ret_t[i], 1, 2 * i as u32 + 1));
    }
    events.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)).then(x.2.cmp(&y.2)));
    // Doubly linked list over event slots 0..2n, head at slot 2n.
    let head = 2 * n;
    let mut next = vec![usize::MAX; 2 * n + 1];
    let mut prev = vec![usize::MAX; 2 * n + 1];
    let mut at = head;
    for &(_, _, e) in &events {
        next[at] = e as usize;
        prev[e as usize] = at;
        at = e as usize;
    }
    let nil = usize::MAX;
    next[at] = nil;
    let keys = zobrist(n);
    let mut hash: u64 = 0;
    let mut cache: FxSet<(u64, u32)> = FxSet::default();
    let mut stack: Vec<(usize, u32)> = Vec::new(); // (invoke slot, state before it)
    let mut steps: u64 = 0;
    let mut entry = next[head];
    while next[head] != nil {
        if entry == nil {
            return None; // cannot happen: the list ends with a return
        }
        if entry % 2 == 0 {
            let c = entry / 2;
            if let Some(s2) = step(&mut values, codes[c], av[c], bv[c], state) {
                let h2 = hash ^ keys[c];
                if cache.insert((h2, s2)) {
                    stack.push((entry, state));
                    state = s2;
                    hash = h2;
                    // lift the call and its return out of the list
                    let r = entry + 1;
                    next[prev[entry]] = next[entry];
                    if next[entry] != nil {
                        prev[next[entry]] = prev[entry];
                    }
                    next[prev[r]] = next[r];
                    if next[r] != nil {
                        prev[next[r]] = prev[r];
                    }
                    entry = next[head];
                    steps += 1;
                    if steps > max_steps {
                        return None;
                    }
                    continue;
                }
            }
            entry = next[entry];
        } else {
            // a pending return: the last linearized call must be undone
            let (e, s) = stack.pop()?;
            state = s;
            hash ^= keys[e / 2];
            let r = e + 1;
            // put the return back, then the call (the reverse of lifting)
            if next[r] != nil {
                prev[next[r]] = r;
            }
            next[prev[r]] = r;
            if next[e] != nil {
                prev[next[e]] = e;
            }
            next[prev[e]] = e;
            entry = next[e];
        }
    }
    let order = stack.iter().map(|&(e, _)| (e / 2) as u32).collect();
    Some((order, steps, cache.len()))
}

/// witness(init, codes, a, b, call_t, ret_t, max_steps) -> (order, steps, cache_entries) | None
///
/// codes[i]: 0 nop, 1 read a, 2 write a, 3 append a, 4 cas a -> b (ok), 5 cas a failed, 6 cas a -> b with an
/// unknown outcome; values are strings compared exactly (the caller encodes other values so that equal strings
/// mean equal values); ret_t[i] is +inf for an indeterminate call.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn witness(
    py: Python<'_>, init: String, codes: Vec<u8>, a: Vec<String>, b: Vec<String>, call_t: Vec<f64>,
    ret_t: Vec<f64>, max_steps: u64,
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
    Ok(py.allow_threads(|| search(&init, &codes, &a, &b, &call_t, &ret_t, max_steps)))
}

#[pymodule]
fn lincheck_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(witness, m)?)?;
    m.add_function(wrap_pyfunction!(kv_history::kv_witnesses, m)?)?;
    Ok(())
}
