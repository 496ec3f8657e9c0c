//! `kv_witnesses`: the fast path of the checker for a kv history, read straight from the `Op` objects.
//!
//! It does what `pair_ops`, `build_calls`, `partition_calls` and `_native._encode_kv` do together in Python
//! (pair each invoke with its process's next completion, drop or keep failed calls, one partition per key in
//! order of first appearance, each call spelled as an op code over strings), then runs `search` on each
//! partition.  Anything that Python would treat differently from the plain case -- a value that is not a dict
//! with a str key, a non-str argument, an unknown f, a completion without an invoke, a time that is not a
//! finite number -- makes it answer None, and the checker takes its general path, which stays the reference.

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyLong, PyString, PyType};
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

/// The fields `read_pairs` reads, in this order.
const FIELDS: [&str; 5] = ["process", "type", "time", "f", "value"];
const PROCESS: usize = 0;
const TYPE: usize = 1;
const TIME: usize = 2;
const F: usize = 3;
const VALUE: usize = 4;

/// CPython's `PyMemberDescrObject` (Include/cpython/descrobject.h; pyo3-ffi 0.22 types its second field as a
/// `PyGetSetDef`, which it is not).
#[repr(C)]
struct MemberDescr {
    common: ffi::PyDescrObject,
    member: *mut ffi::PyMemberDef,
}

extern "C" {
    /// CPython's attribute lookup along a type's MRO (what `PyObject_GenericGetAttr` asks first); borrowed.
    fn _PyType_Lookup(tp: *mut ffi::PyTypeObject, name: *mut ffi::PyObject) -> *mut ffi::PyObject;
}

/// Where the fields sit in the objects of one type whose instances keep them in `__slots__` (a
/// `dataclass(slots=True)` such as `checker.history.Op`): reading a slot at its offset is what
/// `PyObject_GetAttr` ends up doing for such a type, without the name lookup, the descriptor call and its
/// function calls (those were about a fifth of `kv_witnesses` on long histories).
struct Slots {
    tp: *mut ffi::PyTypeObject,
    offsets: [isize; 5],
}

impl Slots {
    /// The offsets of `FIELDS` in the instances of `tp`, or None unless getattr on them would just read those
    /// slots: the generic attribute lookup, and each field a member descriptor of an object slot that raises
    /// AttributeError when unset (`T_OBJECT_EX`, which `__slots__` makes) found on the type.
    fn of(py: Python<'_>, tp: *mut ffi::PyTypeObject) -> Option<Slots> {
        // SAFETY: tp is the type of a live object (the caller holds a reference to that object), and the GIL is
        // held; _PyType_Lookup returns a borrowed reference the type keeps alive, read before any Python code.
        unsafe {
            if (*tp).tp_getattro.map(|f| f as *const ()) != Some(ffi::PyObject_GenericGetAttr as *const ()) {
                return None;
            }
            let mut offsets = [0isize; 5];
            for (out, name) in offsets.iter_mut().zip(FIELDS) {
                let name = PyString::intern_bound(py, name);
                let descr = _PyType_Lookup(tp, name.as_ptr());
                if descr.is_null() || ffi::Py_TYPE(descr) != std::ptr::addr_of_mut!(ffi::PyMemberDescr_Type) {
                    return None;
                }
                let member = (*(descr as *mut MemberDescr)).member;
                if member.is_null() || (*member).type_code != ffi::Py_T_OBJECT_EX || (*member).offset <= 0 {
                    return None;
                }
                *out = (*member).offset;
            }
            Some(Slots { tp, offsets })
        }
    }
}

/// An op as the readers first see it (`Reader::head`).
enum Head {
    Client { process: i64, kind: u8, time: f64 },
    Nemesis,
    NotPlain,
}

/// Reads the fields of ops: straight from the slots for objects of the type last seen (see `Slots`), by
/// getattr for anything else (another type, an unset slot: the getattr then raises as Python would).
struct Reader<'py> {
    py: Python<'py>,
    slots: Option<Slots>,
    seen: Option<Bound<'py, PyType>>, // the type `slots` was worked out for, held so that it outlives them
    names: [Bound<'py, PyString>; 5],
}

impl<'py> Reader<'py> {
    fn new(py: Python<'py>) -> Self {
        let names = FIELDS.map(|n| PyString::intern_bound(py, n));
        Reader { py, slots: None, seen: None, names }
    }

    /// Called once per op, before `field`: works out the slots of a type not seen last.
    fn visit(&mut self, op: &Bound<'py, PyAny>) {
        let tp = op.get_type();
        if !self.seen.as_ref().is_some_and(|seen| seen.is(&tp)) {
            self.slots = Slots::of(self.py, tp.as_type_ptr());
            self.seen = Some(tp);
        }
    }

    /// Asks the processor to fetch the op 16 places ahead and the time and value objects of the op 8 places
    /// ahead (fetched 8 ops ago), for ops of the type seen last.
    fn prefetch(&self, ops: &Bound<'py, PyList>, pos: usize) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: items are read below the list's current length, under the GIL, so they are live objects; a
        // slot is read only in an object of the type its offsets were worked out for.  Prefetching reads
        // nothing and never faults.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let Some(slots) = &self.slots else { return };
            let n = ffi::PyList_GET_SIZE(ops.as_ptr()) as usize;
            if pos + 16 < n {
                _mm_prefetch::<_MM_HINT_T0>(ffi::PyList_GET_ITEM(ops.as_ptr(), (pos + 16) as isize) as *const i8);
            }
            if pos + 8 < n {
                let ahead = ffi::PyList_GET_ITEM(ops.as_ptr(), (pos + 8) as isize);
                if ffi::Py_TYPE(ahead) == slots.tp {
                    for i in [TIME, VALUE] {
                        let at = (ahead as *const u8).offset(slots.offsets[i]) as *const *const i8;
                        _mm_prefetch::<_MM_HINT_T0>(*at);
                    }
                }
            }
        }
    }

    /// What both readers read first of the op at `pos` in `ops` (visiting it and prefetching ahead): its
    /// process, kind and time, or that it is the nemesis's or not the plain case.
    fn head(&mut self, ops: &Bound<'py, PyList>, pos: usize, op: &Bound<'py, PyAny>) -> PyResult<Head> {
        self.visit(op);
        self.prefetch(ops, pos);
        let process = self.field(op, PROCESS)?;
        let process = match process.extract::<i64>() {
            Ok(p) => p,
            Err(_) if process.downcast::<PyString>().is_ok_and(|s| s.to_str().ok() == Some("nemesis")) => {
                return Ok(Head::Nemesis)
            }
            Err(_) => return Ok(Head::NotPlain),
        };
        let Some(kind) = kind_of(self.py, self.field(op, TYPE)?)? else { return Ok(Head::NotPlain) };
        Ok(Head::Client { process, kind, time: time_of(&self.field(op, TIME)?) })
    }

    fn field(&self, op: &Bound<'py, PyAny>, i: usize) -> PyResult<Bound<'py, PyAny>> {
        if let Some(slots) = &self.slots {
            // SAFETY: op's type is the one `visit` worked the offsets out for (the caller visits each op first),
            // so each offset is that of an object slot inside it; a non-null slot is a live object, and
            // from_borrowed_ptr takes a reference to it at once.
            unsafe {
                if ffi::Py_TYPE(op.as_ptr()) == slots.tp {
                    let at = (op.as_ptr() as *const u8).offset(slots.offsets[i]) as *const *mut ffi::PyObject;
                    let x = *at;
                    if !x.is_null() {
                        return Ok(Bound::from_borrowed_ptr(self.py, x));
                    }
                }
            }
        }
        op.getattr(&self.names[i])
    }
}

/// An op's type as INVOKE, OK, FAIL or INFO (any other text: OK, as `calls_of_pairs` reads it), or None when
/// it is not a plain str.
fn kind_of<'py>(py: Python<'py>, typ: Bound<'py, PyAny>) -> PyResult<Option<u8>> {
    // the usual type strings are the interned ones: compared by identity before by text
    if typ.is(intern!(py, "invoke")) {
        return Ok(Some(INVOKE));
    }
    if typ.is(intern!(py, "ok")) {
        return Ok(Some(OK));
    }
    let Some(typ) = plain_str(typ) else { return Ok(None) };
    Ok(Some(match typ.to_str()? {
        "invoke" => INVOKE,
        "fail" => FAIL,
        "info" => INFO,
        _ => OK,
    }))
}

/// An op's time as a float, NaN when it is not a finite number (an error only where it is needed).
fn time_of(time: &Bound<'_, PyAny>) -> f64 {
    // an int time is read as one (as a float it would be converted through a new float object)
    match time.downcast_exact::<PyLong>().ok().and_then(|t| t.extract::<i64>().ok()) {
        Some(t) if t.unsigned_abs() < 1 << 53 => t as f64,
        _ => match time.extract::<f64>() {
            Ok(t) if t.is_finite() => t,
            _ => f64::NAN,
        },
    }
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
    let mut reader = Reader::new(py);
    for (pos, op) in ops.iter().enumerate() {
        let (p, kind, time) = match reader.head(ops, pos, &op)? {
            Head::Client { process, kind, time } => (process, kind, time),
            Head::Nemesis => continue,
            Head::NotPlain => return Ok(None),
        };
        if kind == INVOKE {
            let f = plain_str(reader.field(&op, F)?);
            let value = Some(reader.field(&op, VALUE)?);
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
        let value = if needed { Some(reader.field(&op, VALUE)?) } else { None };
        recs.push(Rec { pos, kind, time, f: None, value });
    }
    Ok(Some((recs, pairs)))
}

/// Numbers as one bytes object in native byte order (`bytes`: `u32::to_ne_bytes` or `i64::to_ne_bytes`), which
/// Python reads through `memoryview(b).cast("I")` (u32) or `.cast("q")` (i64): an int object per number, and a
/// tuple per pair, cost more to build and to free than the whole search of an easy history.
pub(crate) fn packed<'py, T: Copy, const N: usize>(
    py: Python<'py>, xs: &[T], bytes: fn(T) -> [u8; N],
) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_bound_with(py, N * xs.len(), |buf| {
        for (out, &x) in buf.chunks_exact_mut(N).zip(xs) {
            out.copy_from_slice(&bytes(x));
        }
        Ok(())
    })
}

/// One partition's answer: key, call ids (packed u32), witness (order packed u32, steps, cache entries) or None.
type PartAnswer<'py> = (String, Bound<'py, PyBytes>, Option<(Bound<'py, PyBytes>, u64, usize)>);

/// An invoke whose completion is not read yet.
struct Opened<'py> {
    pos: usize,
    time: f64, // NaN: not a finite number
    f: Option<Bound<'py, PyString>>, // if a plain str
    value: Bound<'py, PyAny>,
}

/// What a completion brings to its call: position, kind, time and (ok completions whose value is used) value.
struct Completed<'py> {
    pos: usize,
    kind: u8,
    time: f64,
    value: Option<Bound<'py, PyAny>>,
}

/// One call spelled for the search: its key (an index into the keys in the order they were first spelled), op
/// code, argument (None: the empty string), call and return times, invoke and completion positions (or -1).
struct Spelled<'py> {
    key: u32,
    code: u8,
    arg: Option<Bound<'py, PyString>>,
    call: f64,
    ret: f64,
    inv: i64,
    comp: i64,
}

/// A call by invoke order: still open, spelled, or dropped (a failed call under the drop policy).
enum Slot<'py> {
    Open(Opened<'py>),
    Done(Spelled<'py>),
    Dropped,
}

/// The keys spelled so far, each with its index.
#[derive(Default)]
struct Keys {
    index: FxMap<String, u32>,
    names: Vec<String>,
}

/// A call spelled as `partition_calls` and `_native.encode` would (see the module docs), or None when it is
/// not the plain case; `comp`: its completion, None for an invoke never completed.
fn spell<'py>(
    py: Python<'py>, inv: Opened<'py>, comp: Option<Completed<'py>>, drop_fails: bool, keys: &mut Keys,
) -> PyResult<Option<Slot<'py>>> {
    let ctype = comp.as_ref().map_or(INFO, |c| c.kind);
    let comp_pos = comp.as_ref().map_or(-1, |c| c.pos as i64);
    let mut value = inv.value;
    let mut out: Option<Bound<'py, PyAny>> = None; // the completion's value (ok completions only)
    let ret = match comp {
        Some(c) if ctype != INFO => {
            if ctype == FAIL && drop_fails {
                return Ok(Some(Slot::Dropped));
            }
            if c.time.is_nan() {
                return Ok(None);
            }
            if let Some(o) = c.value {
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
    let (code, arg): (u8, Option<Option<Bound<'py, PyString>>>) = if ctype == FAIL {
        (NOP, Some(None))
    } else if f == "get" {
        match out {
            None => (NOP, Some(None)),
            Some(o) if o.is_exact_instance_of::<PyDict>() => match o.downcast::<PyDict>()?.get_item(intern!(py, "value"))? {
                Some(v) => (READ, plain_str(v).map(Some)),
                None => (READ, None),
            },
            Some(o) => (READ, plain_str(o).map(Some)),
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
    if inv.time.is_nan() {
        return Ok(None);
    }
    let key = key.to_str()?;
    let key = match keys.index.get(key) {
        Some(&k) => k,
        None => {
            let k = keys.names.len() as u32;
            keys.index.insert(key.to_owned(), k);
            keys.names.push(key.to_owned());
            k
        }
    };
    Ok(Some(Slot::Done(Spelled { key, code, arg, call: inv.time, ret, inv: inv.pos as i64, comp: comp_pos })))
}

/// kv_witnesses(ops, init, drop_fails, per_call, base) -> None | (parts, pairs)
///
/// parts: (key, call ids, witness) per partition in order of first appearance, the witness (order, steps,
/// cache entries) or None where the search missed (the checker's general path pre-checks and searches only
/// those); pairs: invoke position and completion position (or -1) of each call id, two i64s per call.  Call
/// ids, orders and pairs come packed (see `packed`).  None: the history is not the plain case (see the
/// module docs).
///
/// Each call is spelled when its completion is read (an invoke never completed, at the end), while its
/// invoke's objects are still in the cache: spelling the calls in a second pass over the invokes touched
/// every invoke's value, key and argument objects a second time, and on long histories those were cache
/// misses again (about 40% of the rest of the reader).
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn kv_witnesses<'py>(
    py: Python<'py>, ops: &Bound<'py, PyList>, init: String, drop_fails: bool, per_call: u64, base: u64,
) -> PyResult<Option<(Vec<PartAnswer<'py>>, Bound<'py, PyBytes>)>> {
    let mut open: FxMap<i64, usize> = FxMap::default(); // process -> its open call's slot
    let mut slots: Vec<Slot<'py>> = Vec::with_capacity(ops.len() / 2 + 1);
    let mut keys = Keys::default();
    let mut reader = Reader::new(py);
    for (pos, op) in ops.iter().enumerate() {
        let (p, kind, time) = match reader.head(ops, pos, &op)? {
            Head::Client { process, kind, time } => (process, kind, time),
            Head::Nemesis => continue,
            Head::NotPlain => return Ok(None),
        };
        if kind == INVOKE {
            let f = plain_str(reader.field(&op, F)?);
            let value = reader.field(&op, VALUE)?;
            open.insert(p, slots.len());
            slots.push(Slot::Open(Opened { pos, time, f, value }));
            continue;
        }
        let Some(i) = open.remove(&p) else { return Ok(None) };
        let Slot::Open(inv) = std::mem::replace(&mut slots[i], Slot::Dropped) else {
            unreachable!("an open process's slot is open")
        };
        // An ok completion's value is read only where it is used: a read's output, or the input of an invoke
        // without one (touching the value object of every completion was a cache miss each on long histories).
        let writes = inv.f.as_ref().is_some_and(|f| matches!(f.to_str(), Ok("put" | "append" | "write" | "cas")));
        let needed = kind == OK && (!writes || inv.value.is_none());
        let value = if needed { Some(reader.field(&op, VALUE)?) } else { None };
        match spell(py, inv, Some(Completed { pos, kind, time, value }), drop_fails, &mut keys)? {
            Some(slot) => slots[i] = slot,
            None => return Ok(None),
        }
    }
    for slot in slots.iter_mut() {
        if matches!(slot, Slot::Open(_)) {
            let Slot::Open(inv) = std::mem::replace(slot, Slot::Dropped) else { unreachable!() };
            match spell(py, inv, None, drop_fails, &mut keys)? {
                Some(spelled) => *slot = spelled,
                None => return Ok(None),
            }
        }
    }
    // Partitions in order of their key's first appearance in invoke order, call ids in invoke order.
    let mut part_of: Vec<u32> = vec![u32::MAX; keys.names.len()];
    let mut parts: Vec<Part<'_>> = Vec::new();
    let mut kept: Vec<i64> = Vec::with_capacity(2 * slots.len());
    for slot in slots {
        let Slot::Done(call) = slot else { continue };
        let k = call.key as usize;
        if part_of[k] == u32::MAX {
            part_of[k] = parts.len() as u32;
            let key = std::mem::take(&mut keys.names[k]);
            parts.push(Part { key, ids: vec![], codes: vec![], args: vec![], call_t: vec![], ret_t: vec![] });
        }
        let part = &mut parts[part_of[k] as usize];
        part.ids.push((kept.len() / 2) as u32);
        part.codes.push(call.code);
        part.args.push(call.arg);
        part.call_t.push(call.call);
        part.ret_t.push(call.ret);
        kept.push(call.inv);
        kept.push(call.comp);
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
            Some((order, steps, cache)) => Some((packed(py, &order, u32::to_ne_bytes)?, steps, cache)),
            None => None,
        };
        found.push((part.key, packed(py, &part.ids, u32::to_ne_bytes)?, witness));
    }
    Ok(Some((found, packed(py, &kept, i64::to_ne_bytes)?)))
}
