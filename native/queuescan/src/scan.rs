//! The queue pass of `checker/queue/_scan.py` (`QueueScan.feed`, then `tally`), step for step, for one whole
//! history (no parts).  Names follow the Python: a value's *row* holds its attempt counts, acknowledged
//! offset, invoke and completion indices and the offset at which a poll first read it; `NONE` marks an absent
//! field.  Anomalies are emitted as `Rec`s in the order the Python pass finds them (the first `max_records`
//! of each type; all are counted), and `checker/queue/_records.py` words them.  Anything the Python pass
//! would do differently from the common shapes (an error, a float offset, a send completing a poll) bails.

use crate::fx::{FxMap, FxSet};
use crate::json::{bail, Field, Kind, Line, Recs, Typ, Val, R};

pub const NONE: i64 = i64::MIN;
/// Offsets are kept within +-2^62 so that `o - 1`, `o + 1` and gap widths never overflow.
const MAX_OFF: i64 = 1 << 62;
const SMALL_GAP: i128 = 64;
const OFF_SLACK: usize = 1 << 12;
const UNKNOWN: u32 = u32::MAX;

struct Row {
    val: Val,
    n_ok: u32,
    n_info: u32,
    n_fail: u32,
    ack_off: i64,
    inv_idx: i64,
    cmp_idx: i64,
    first: i64,
}

struct Gap {
    lo: i64,
    hi: i64,
    kind: &'static str,
    idx: i64,
    consumer: Val,
}

struct Queue {
    name: Val,
    rows: Vec<Row>,
    index: FxMap<Val, u32>,
    offs: Vec<u32>, // offset -> row for 0..len (UNKNOWN: none yet); other offsets in `far`
    far: FxMap<i64, u32>,
    drain_inv: i64,
    extra: Vec<(u32, Vec<(i64, i64)>)>, // row -> [(other offset, op index)], in first-insertion order
    extra_at: FxMap<u32, u32>,
    unacked_seen: FxMap<u32, i64>,
    gaps: Vec<Gap>,
    max_polled: i64,
    max_polled_idx: i64,
    max_acked: Option<(i64, i64)>,
    last_send: FxMap<Val, (i64, i64)>,
    reported: FxSet<(i64, u32)>,
}

impl Queue {
    fn new(name: Val) -> Self {
        Queue {
            name,
            rows: Vec::new(),
            index: FxMap::default(),
            offs: Vec::new(),
            far: FxMap::default(),
            drain_inv: -1,
            extra: Vec::new(),
            extra_at: FxMap::default(),
            unacked_seen: FxMap::default(),
            gaps: Vec::new(),
            max_polled: -1,
            max_polled_idx: -1,
            max_acked: None,
            last_send: FxMap::default(),
            reported: FxSet::default(),
        }
    }

    /// `val`'s row, made on first sight; `inv_idx` (a send's invoke) is kept if no send was seen before.
    fn row(&mut self, val: Val, inv_idx: i64) -> u32 {
        if let Some(&b) = self.index.get(&val) {
            let r = &mut self.rows[b as usize];
            if inv_idx != NONE && r.inv_idx == NONE {
                r.inv_idx = inv_idx;
            }
            return b;
        }
        let b = self.rows.len() as u32;
        self.rows.push(Row { val, n_ok: 0, n_info: 0, n_fail: 0, ack_off: NONE, inv_idx, cmp_idx: NONE, first: NONE });
        self.index.insert(val, b);
        b
    }

    fn off_get(&self, o: i64) -> Option<u32> {
        if 0 <= o && (o as usize) < self.offs.len() {
            let b = self.offs[o as usize];
            return (b != UNKNOWN).then_some(b);
        }
        self.far.get(&o).copied()
    }

    /// Offset `o` (not known before) holds row `b`: dense table for offsets near the known ones.
    fn off_put(&mut self, o: i64, b: u32) {
        let n = self.offs.len();
        if 0 <= o && (o as usize) < n {
            self.offs[o as usize] = b;
        } else if o >= 0 && (o as usize) < 2 * n + OFF_SLACK {
            let grow = (o as usize + 1 - n).max(n / 2 + OFF_SLACK);
            self.offs.resize(n + grow, UNKNOWN);
            self.offs[o as usize] = b;
            let moved: Vec<i64> = self.far.keys().copied().filter(|&k| k >= n as i64 && k < (n + grow) as i64).collect();
            for k in moved {
                self.offs[k as usize] = self.far.remove(&k).expect("listed");
            }
        } else {
            self.far.insert(o, b);
        }
    }

    fn known_offsets(&self) -> Vec<i64> {
        let mut v: Vec<i64> = (0..self.offs.len()).filter(|&o| self.offs[o] != UNKNOWN).map(|o| o as i64).collect();
        if !self.far.is_empty() {
            v.extend(self.far.keys().copied());
            v.sort_unstable();
        }
        v
    }

    /// `extra[row].setdefault(off, idx)`, keeping the rows in first-insertion order.
    fn extra_add(&mut self, b: u32, off: i64, idx: i64) {
        let at = match self.extra_at.get(&b) {
            Some(&at) => at as usize,
            None => {
                self.extra_at.insert(b, self.extra.len() as u32);
                self.extra.push((b, Vec::new()));
                self.extra.len() - 1
            }
        };
        let ex = &mut self.extra[at].1;
        if !ex.iter().any(|&(o, _)| o == off) {
            ex.push((off, idx));
        }
    }
}

/// One argument of an anomaly record, for `checker/queue/_records.py`.
pub enum Arg {
    I(i64),
    V(Val),
    Opt(Option<i64>),
    L(Vec<i64>),
}

/// One anomaly record: its builder's code in `_records.BUILDERS`, its queue, its ops and the builder's args.
pub struct Rec {
    pub code: &'static str,
    pub key: Val,
    pub ops: Vec<i64>,
    pub args: Vec<Arg>,
}

enum Open {
    Send { inv: i64, q: u32, row: u32, m: Option<(i64, i64)> },
    Poll { inv: i64, qn: Val, frm: Option<i64>, consumer: Val },
}

/// What the pass found, in the shape of `ScanTally` (stats in its key order).
pub struct Tally {
    pub stats: Vec<(&'static str, i64)>,
    pub counts: Vec<(&'static str, u64)>,
    pub recs: Vec<Rec>,
    pub drained: bool,
}

pub struct Scan {
    queues: Vec<Queue>,
    qidx: FxMap<Val, u32>,
    open: FxMap<Val, Open>,
    cursor: FxMap<(Val, Val), i64>,
    counts: Vec<(&'static str, u64)>,
    recs: Vec<Rec>,
    max_records: u64,
    drained: bool,
    ops: i64,
    attempted: i64,
    polls: i64,
    records_read: i64,
    unpaired: i64,
}

fn val_of(f: Field, what: &str) -> R<Val> {
    match f {
        Field::Val(v) => Ok(v),
        _ => bail!("{what} is not an integer or a string"),
    }
}

fn off_of(f: Field, what: &str) -> R<Option<i64>> {
    match f {
        Field::Absent | Field::Null => Ok(None),
        Field::Val(Val::Int(o)) if (-MAX_OFF..=MAX_OFF).contains(&o) => Ok(Some(o)),
        _ => bail!("{what} is not an integer within +-2^62"),
    }
}

impl Scan {
    pub fn new(max_records: u64) -> Self {
        Scan {
            queues: Vec::new(),
            qidx: FxMap::default(),
            open: FxMap::default(),
            cursor: FxMap::default(),
            counts: Vec::new(),
            recs: Vec::new(),
            max_records,
            drained: false,
            ops: 0,
            attempted: 0,
            polls: 0,
            records_read: 0,
            unpaired: 0,
        }
    }

    fn add(&mut self, type_: &'static str, code: &'static str, key: Val, ops: Vec<i64>, args: Vec<Arg>) {
        let n = match self.counts.iter_mut().find(|(t, _)| *t == type_) {
            Some((_, n)) => {
                *n += 1;
                *n - 1
            }
            None => {
                self.counts.push((type_, 1));
                0
            }
        };
        if n < self.max_records {
            self.recs.push(Rec { code, key, ops, args });
        }
    }

    fn queue_of(&mut self, qn: Val) -> u32 {
        if let Some(&q) = self.qidx.get(&qn) {
            return q;
        }
        let q = self.queues.len() as u32;
        self.queues.push(Queue::new(qn));
        self.qidx.insert(qn, q);
        q
    }

    /// One op of the history (`QueueScan.feed`'s loop body); `pairs` holds its poll records (`l.recs`).
    pub fn op(&mut self, l: &Line, pairs: &[(i64, Val)]) -> R<()> {
        self.ops += 1;
        let f = match l.f {
            None => bail!("an op without \"f\""),
            Some(Kind::Other) => return Ok(()),
            Some(f) => f,
        };
        let idx = match l.index {
            Field::Val(Val::Int(i)) if i != NONE => i,
            _ => bail!("a queue op whose \"index\" is not a 64-bit integer"),
        };
        let t = match l.typ {
            Some(t) if t != Typ::Other => t,
            _ => bail!("a queue op whose \"type\" is not invoke, ok, fail or info"),
        };
        let p = val_of(l.process, "a queue op's \"process\"")?;
        if t == Typ::Invoke && !l.value_obj {
            bail!("a queue invoke whose \"value\" is not an object");
        }
        if t == Typ::Ok && !l.value_present {
            bail!("an ok queue op without \"value\"");
        }
        match (f, t) {
            (Kind::Send, Typ::Invoke) => self.send_invoke(l, idx, p),
            (_, Typ::Invoke) => {
                let qn = val_of(l.queue, "a poll's queue")?;
                let frm = off_of(l.offset, "a poll's offset")?;
                let consumer = if l.consumer == Field::Absent { p } else { val_of(l.consumer, "a poll's consumer")? };
                self.open.insert(p, Open::Poll { inv: idx, qn, frm, consumer });
                Ok(())
            }
            _ => self.complete(l, f, t, idx, p, pairs),
        }
    }

    fn send_invoke(&mut self, l: &Line, idx: i64, p: Val) -> R<()> {
        let qn = val_of(l.queue, "a send's queue")?;
        let val = val_of(l.value, "a send's value")?;
        let q = self.queue_of(qn);
        self.attempted += 1;
        let qu = &mut self.queues[q as usize];
        let row = qu.row(val, idx);
        self.open.insert(p, Open::Send { inv: idx, q, row, m: qu.max_acked });
        Ok(())
    }

    fn complete(&mut self, l: &Line, f: Kind, t: Typ, idx: i64, p: Val, pairs: &[(i64, Val)]) -> R<()> {
        let inv = match self.open.remove(&p) {
            None => {
                self.unpaired += 1;
                return Ok(());
            }
            Some(inv) => inv,
        };
        match (f, inv) {
            (Kind::Send, Open::Send { inv, q, row, m }) => match t {
                Typ::Ok => {
                    let off = if l.value_obj { off_of(l.offset, "an ok send's offset")? } else { None };
                    self.send_ok(idx, p, (inv, q, row, m), off);
                }
                Typ::Fail => self.queues[q as usize].rows[row as usize].n_fail += 1,
                _ => self.queues[q as usize].rows[row as usize].n_info += 1,
            },
            (Kind::Send, Open::Poll { .. }) => bail!("op {idx}: a send completes a poll's invoke"),
            (_, Open::Send { .. }) => bail!("op {idx}: a poll completes a send's invoke"),
            (_, Open::Poll { inv, qn, frm, consumer }) => {
                if t == Typ::Info {
                    self.cursor.remove(&(consumer, qn));
                } else if t == Typ::Ok {
                    let recs: &[(i64, Val)] = match (l.value_obj, l.records) {
                        (false, _) | (true, Recs::Absent | Recs::Null) => &[],
                        (true, Recs::List) => &pairs[l.recs.0 as usize..l.recs.1 as usize],
                        (true, Recs::Other) => bail!("op {idx}: a poll's records are not [int, value] pairs"),
                    };
                    for &(o, _) in recs {
                        if !(-MAX_OFF..=MAX_OFF).contains(&o) {
                            bail!("op {idx}: a record offset beyond +-2^62");
                        }
                    }
                    self.polls += 1;
                    self.records_read += self.poll_ok(f, (inv, qn, frm, consumer), idx, recs) as i64;
                }
            }
        }
        Ok(())
    }

    fn poll_ok(&mut self, f: Kind, inv: (i64, Val, Option<i64>, Val), idx: i64, recs: &[(i64, Val)]) -> usize {
        let (inv_idx, qn, frm, consumer) = inv;
        let q = self.queue_of(qn) as usize;
        if f == Kind::Drain {
            self.drained = true;
            if inv_idx > self.queues[q].drain_inv {
                self.queues[q].drain_inv = inv_idx;
            }
        }
        let ckey = (consumer, qn);
        if recs.is_empty() {
            if let Some(frm) = frm {
                self.cursor.insert(ckey, frm - 1);
            }
            return 0;
        }
        let start = frm.or_else(|| self.cursor.get(&ckey).map(|c| c + 1));
        let last = self.poll_records(q, recs, start, idx, consumer);
        self.cursor.insert(ckey, last);
        recs.len()
    }

    fn poll_records(&mut self, qi: usize, recs: &[(i64, Val)], start: Option<i64>, idx: i64, consumer: Val) -> i64 {
        let first = recs[0].0;
        let key = self.queues[qi].name;
        if let Some(s) = start {
            if first < s {
                let args = vec![Arg::I(s), Arg::I(first), Arg::V(consumer)];
                self.add("nonmonotonic-poll", "nonmonotonic-poll", key, vec![idx], args);
            } else if first > s {
                self.queues[qi].gaps.push(Gap { lo: s - 1, hi: first, kind: "poll-skip", idx, consumer });
            }
        }
        let mut last = first - 1;
        let mut top: Option<i64> = None;
        for &(o, val) in recs {
            let q = &mut self.queues[qi];
            let b = match q.index.get(&val) {
                Some(&b) => b,
                None => q.row(val, NONE),
            };
            match q.off_get(o) {
                None => q.off_put(o, b),
                Some(pb) if pb != b => self.inconsistent(qi, o, pb, b, idx),
                _ => {}
            }
            let q = &mut self.queues[qi];
            let r = &mut q.rows[b as usize];
            if r.first == NONE {
                r.first = o;
                if r.inv_idx == NONE {
                    self.add("unexpected", "unexpected-unsent", key, vec![idx], vec![Arg::I(o), Arg::V(val)]);
                } else if r.n_ok == 0 {
                    q.unacked_seen.insert(b, idx);
                }
            } else if r.first != o {
                q.extra_add(b, o, idx);
            }
            if o != last + 1 {
                if o <= last {
                    self.add("int-nonmonotonic-poll", "int-nonmonotonic-poll", key, vec![idx],
                             vec![Arg::I(last), Arg::I(o)]);
                    top = Some(top.map_or(last, |t| t.max(last)));
                } else {
                    self.queues[qi].gaps.push(Gap { lo: last, hi: o, kind: "int-poll-skip", idx, consumer });
                }
            }
            last = o;
        }
        let hi = top.map_or(last, |t| t.max(last));
        let q = &mut self.queues[qi];
        if hi > q.max_polled {
            q.max_polled = hi;
            q.max_polled_idx = idx;
        }
        last
    }

    /// Offset `off` holds the value of row `old` and now that of row `new`.
    fn inconsistent(&mut self, qi: usize, off: i64, old: u32, new: u32, idx: i64) {
        let q = &mut self.queues[qi];
        if !q.reported.insert((off, new)) {
            return;
        }
        let inv = q.rows[old as usize].inv_idx;
        let ops = if inv != NONE { vec![inv, idx] } else { vec![idx] };
        let args = vec![Arg::I(off), Arg::V(q.rows[old as usize].val), Arg::V(q.rows[new as usize].val)];
        let key = q.name;
        self.add("inconsistent-offsets", "inconsistent-offsets", key, ops, args);
    }

    fn send_ok(&mut self, idx: i64, p: Val, inv: (i64, u32, u32, Option<(i64, i64)>), off: Option<i64>) {
        let (inv_idx, qi, b, m) = inv;
        let qi = qi as usize;
        let q = &mut self.queues[qi];
        let r = &mut q.rows[b as usize];
        r.n_ok += 1;
        let off = match off {
            None => {
                if r.cmp_idx == NONE {
                    r.cmp_idx = idx;
                }
                return;
            }
            Some(o) => o,
        };
        match q.off_get(off) {
            None => q.off_put(off, b),
            Some(pb) if pb != b => self.inconsistent(qi, off, pb, b, idx),
            _ => {}
        }
        let q = &mut self.queues[qi];
        let r = &mut q.rows[b as usize];
        if r.ack_off == NONE {
            r.ack_off = off;
            r.cmp_idx = idx;
        }
        let (key, val) = (q.name, r.val);
        let last = q.last_send.get(&p).copied();
        match (last, m) {
            (Some(l), _) if off < l.0 => {
                let args = vec![Arg::I(l.0), Arg::I(off), Arg::V(val), Arg::V(p)];
                self.add("nonmonotonic-send", "nonmonotonic-send", key, vec![l.1, inv_idx, idx], args);
            }
            (_, Some(m)) if off < m.0 => {
                let args = vec![Arg::I(m.0), Arg::I(off), Arg::V(val)];
                self.add("nonmonotonic-send-realtime", "nonmonotonic-send-realtime", key, vec![m.1, inv_idx, idx],
                         args);
            }
            _ => {}
        }
        let q = &mut self.queues[qi];
        q.last_send.insert(p, (off, idx));
        if q.max_acked.is_none_or(|ma| off > ma.0) {
            q.max_acked = Some((off, idx));
        }
    }

    /// Finish the pass (`QueueScan.tally`): classify every sent value and resolve the gaps.
    pub fn tally(mut self) -> Tally {
        for inv in self.open.values() {
            if let Open::Send { q, row, .. } = inv {
                self.queues[*q as usize].rows[*row as usize].n_info += 1;
            }
        }
        let (mut ack, mut fail, mut info) = (0i64, 0i64, 0i64);
        for q in &self.queues {
            for r in &q.rows {
                ack += r.n_ok as i64;
                fail += r.n_fail as i64;
                info += r.n_info as i64;
            }
        }
        let mut sum = Summary::default();
        for qi in 0..self.queues.len() {
            self.classify(qi, &mut sum);
            self.duplicates(qi, &mut sum);
            self.resolve_gaps(qi);
        }
        let drained_queues = self.queues.iter().filter(|q| q.drain_inv >= 0).count() as i64;
        let stats = vec![
            ("ops", self.ops), ("attempted", self.attempted), ("acknowledged", ack), ("failed", fail),
            ("indeterminate", info), ("polls", self.polls), ("records_read", self.records_read),
            ("unpaired_completions", self.unpaired), ("delivered", sum.delivered), ("duplicated", sum.duplicated),
            ("recovered", sum.recovered), ("unseen", sum.unseen), ("unseen_after_drain", sum.unseen_after_drain),
            ("queues", self.queues.len() as i64), ("drained_queues", drained_queues),
        ];
        Tally { stats, counts: self.counts, recs: self.recs, drained: self.drained }
    }

    fn classify(&mut self, qi: usize, sum: &mut Summary) {
        let mut delivered = 0;
        for b in 0..self.queues[qi].rows.len() {
            let q = &self.queues[qi];
            let (key, max_polled, max_polled_idx) = (q.name, q.max_polled, q.max_polled_idx);
            let r = &q.rows[b];
            if r.inv_idx == NONE {
                continue; // polled but never sent: reported as unexpected when it was read
            }
            let (o, val, inv, cmp) = (r.first, r.val, r.inv_idx, r.cmp_idx);
            if r.n_ok > 0 {
                let ack = r.ack_off;
                if o == NONE {
                    if ack != NONE && ack < max_polled {
                        let args = vec![Arg::I(ack), Arg::V(val), Arg::I(max_polled)];
                        self.add("lost-write", "lost-write", key, vec![inv, cmp, max_polled_idx], args);
                    } else {
                        self.unseen(qi, b, sum);
                    }
                    continue;
                }
                delivered += 1;
                if ack != NONE && ack != o {
                    self.queues[qi].extra_add(b as u32, ack, cmp);
                }
            } else if o != NONE {
                delivered += 1;
                if r.n_info > 0 {
                    sum.recovered += 1;
                } else {
                    let poll_idx = q.unacked_seen.get(&(b as u32)).copied().unwrap_or(max_polled_idx);
                    self.add("unexpected", "unexpected-failed", key, vec![inv, poll_idx], vec![Arg::I(o), Arg::V(val)]);
                }
            }
        }
        sum.delivered += delivered;
    }

    fn duplicates(&mut self, qi: usize, sum: &mut Summary) {
        let q = &self.queues[qi];
        let mut found = Vec::new();
        for (b, ex) in &q.extra {
            let r = &q.rows[*b as usize];
            if r.inv_idx == NONE || r.n_info > 0 || r.n_ok == 0 {
                continue; // unexpected values are reported as such; info sends are never duplicates
            }
            let mut offsets: Vec<i64> = ex.iter().map(|&(o, _)| o).chain([r.first]).collect();
            offsets.sort_unstable();
            offsets.dedup();
            if offsets.len() > r.n_ok as usize {
                let mut idxs: Vec<i64> = ex.iter().map(|&(_, i)| i).collect();
                idxs.sort_unstable();
                idxs.dedup();
                let ops: Vec<i64> = [r.inv_idx].into_iter().chain(idxs).collect();
                found.push((ops, vec![Arg::I(r.n_ok as i64), Arg::L(offsets), Arg::V(r.val)]));
            }
        }
        let key = q.name;
        for (ops, args) in found {
            sum.duplicated += 1;
            self.add("duplicate", "duplicate", key, ops, args);
        }
    }

    /// An acknowledged send no poll read: bad only if a drain of its queue began after the acknowledgement.
    fn unseen(&mut self, qi: usize, b: usize, sum: &mut Summary) {
        sum.unseen += 1;
        let q = &self.queues[qi];
        let r = &q.rows[b];
        let ack = (r.ack_off != NONE).then_some(r.ack_off);
        let (key, val, inv, cmp, drain_inv) = (q.name, r.val, r.inv_idx, r.cmp_idx, q.drain_inv);
        if cmp < drain_inv {
            sum.unseen_after_drain += 1;
            let args = vec![Arg::Opt(ack), Arg::V(val), Arg::I(drain_inv)];
            self.add("unseen", "unseen-after-drain", key, vec![inv, cmp, drain_inv], args);
        } else {
            self.add("unseen", "unseen", key, vec![inv, cmp], vec![Arg::Opt(ack), Arg::V(val)]);
        }
    }

    fn resolve_gaps(&mut self, qi: usize) {
        let gaps = std::mem::take(&mut self.queues[qi].gaps);
        let mut known: Option<Vec<i64>> = None;
        for g in gaps {
            let q = &self.queues[qi];
            let mut missing = Vec::new();
            if (g.hi as i128) - (g.lo as i128) <= SMALL_GAP {
                missing.extend((g.lo + 1..g.hi).filter(|&o| q.off_get(o).is_some()).take(10));
            } else {
                let k = known.get_or_insert_with(|| q.known_offsets());
                let i = k.partition_point(|&o| o <= g.lo);
                missing.extend(k[i..].iter().copied().take_while(|&o| o < g.hi).take(10));
            }
            if !missing.is_empty() {
                let args = vec![Arg::L(missing), Arg::I(g.lo), Arg::I(g.hi), Arg::V(g.consumer)];
                self.add(g.kind, g.kind, q.name, vec![g.idx], args);
            }
        }
    }
}

#[derive(Default)]
struct Summary {
    delivered: i64,
    duplicated: i64,
    recovered: i64,
    unseen: i64,
    unseen_after_drain: i64,
}
