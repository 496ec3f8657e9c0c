//! splitbrain's compiled queue-checker pass: `scan_file(path, max_records)` reads `history.jsonl`, decodes each
//! line (`json`) and runs the pass of `checker/queue/_scan.py` over it (`scan`), without the GIL.
//!
//! It answers `("ok", stats, counts, records, drained)` -- the parts of a `ScanTally`, records as
//! `(code, queue, ops, args)` tuples that `checker/queue/_records.py` words -- or `("fallback", reason)` when
//! the file holds anything it does not model exactly (malformed JSON, a torn last line, a float where an
//! integer belongs, ...).  The caller then runs the Python pass, which stays the reference: everything here
//! is property-tested against it (tests/unit/checker_queue/test_queue_native.py).

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};
use std::fs::File;
use std::io::Read;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

mod fx;
mod json;
mod scan;

use json::{Bail, Interner, Line, Val, R};
use scan::{Arg, Scan, Tally};

const CHUNK: usize = 4 << 20;
const BATCH_LINES: usize = 8192;
const BATCHES_IN_FLIGHT: usize = 4;

/// Decoded lines on their way from the reader thread to the pass: each line's records are in `pairs`.
struct Batch {
    lines: Vec<Line>,
    pairs: Vec<(i64, Val)>,
}

impl Batch {
    fn new() -> Self {
        Batch { lines: Vec::with_capacity(BATCH_LINES), pairs: Vec::new() }
    }
}

/// Run the pass over `path`: one thread reads and decodes lines, this one checks them (the two halves cost
/// about the same, so on two idle CPUs this halves the wall time; the CPU time is the same).
fn run(path: &str, max_records: u64, strs: &mut Interner) -> R<Tally> {
    let (tx, rx) = sync_channel::<R<Batch>>(BATCHES_IN_FLIGHT);
    std::thread::scope(|s| {
        s.spawn(move || {
            if let Err(e) = read_batches(path, strs, &tx) {
                let _ = tx.send(Err(e)); // the pass may have stopped already
            }
        });
        check_batches(rx, max_records) // drops rx before the scope joins the reader: a blocked send then fails
    })
}

fn check_batches(rx: Receiver<R<Batch>>, max_records: u64) -> R<Tally> {
    let mut scan = Scan::new(max_records);
    for batch in rx.iter() {
        let batch = batch?;
        for l in &batch.lines {
            scan.op(l, &batch.pairs).map_err(|b| Bail(format!("line {}: {}", l.lineno, b.0)))?;
        }
    }
    Ok(scan.tally())
}

/// Decode every line of `path` into batches; stops early (Ok) if the pass has stopped listening.
fn read_batches(path: &str, strs: &mut Interner, tx: &SyncSender<R<Batch>>) -> R<()> {
    let mut fh = File::open(path).map_err(|e| Bail(format!("cannot open {path}: {e}")))?;
    let mut buf: Vec<u8> = Vec::with_capacity(2 * CHUNK);
    let mut batch = Batch::new();
    let mut line = Line::new();
    let mut lineno: u64 = 1;
    loop {
        let n = (&mut fh).take(CHUNK as u64).read_to_end(&mut buf)
            .map_err(|e| Bail(format!("cannot read {path}: {e}")))?;
        // whole lines only, except at the end of the file: a last line without a newline is whole or torn,
        // and a torn one (which fails here) only the Python reader tells from a malformed one
        let cut = if n == 0 { buf.len() } else { buf.iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1) };
        let mut at = 0;
        while at < cut {
            let (op, next) = json::read_line(&buf[..cut], at, &mut line, strs, &mut batch.pairs)
                .map_err(|b| Bail(format!("line {lineno}: {}", b.0)))?;
            if op {
                line.lineno = lineno;
                batch.lines.push(line.clone());
                if batch.lines.len() == BATCH_LINES && tx.send(Ok(std::mem::replace(&mut batch, Batch::new()))).is_err() {
                    return Ok(());
                }
            }
            lineno += 1;
            at = next;
        }
        if n == 0 {
            let _ = tx.send(Ok(batch));
            return Ok(());
        }
        buf.drain(..cut);
    }
}

fn val_py(py: Python<'_>, v: Val, strs: &Interner) -> PyObject {
    match v {
        Val::Int(i) => i.into_py(py),
        Val::Str(id) => strs.strs[id as usize].as_ref().into_py(py),
    }
}

fn arg_py(py: Python<'_>, a: &Arg, strs: &Interner) -> PyObject {
    match a {
        Arg::I(i) => i.into_py(py),
        Arg::V(v) => val_py(py, *v, strs),
        Arg::Opt(o) => o.into_py(py),
        Arg::L(l) => PyList::new_bound(py, l).into_py(py),
    }
}

fn tally_py(py: Python<'_>, t: Tally, strs: &Interner) -> PyObject {
    let recs: Vec<PyObject> = t
        .recs
        .iter()
        .map(|r| {
            let ops: PyObject = PyTuple::new_bound(py, &r.ops).into_py(py);
            let args: Vec<PyObject> = r.args.iter().map(|a| arg_py(py, a, strs)).collect();
            (r.code, val_py(py, r.key, strs), ops, PyTuple::new_bound(py, args)).into_py(py)
        })
        .collect();
    ("ok", t.stats, t.counts, recs, t.drained).into_py(py)
}

/// Run the queue pass over `path`: `("ok", stats, counts, records, drained)` or `("fallback", reason)`.
#[pyfunction]
fn scan_file(py: Python<'_>, path: &str, max_records: u64) -> PyObject {
    let mut strs = Interner::default();
    let out = py.allow_threads(|| run(path, max_records, &mut strs));
    match out {
        Ok(t) => tally_py(py, t, &strs),
        Err(Bail(why)) => ("fallback", why).into_py(py),
    }
}

#[pymodule]
fn queuescan_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(scan_file, m)?)?;
    Ok(())
}
