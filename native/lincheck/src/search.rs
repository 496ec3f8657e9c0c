//! The witness search over one partition (see the crate docs), and the rules that cut it.
//!
//! A depth-first walk in invoke order over a doubly linked list of call and return events: a call may be
//! linearized while no pending return precedes it in the list, and a pending return met in the walk undoes
//! the last linearized call.  The cache holds (linearized set, state) pairs keyed by a 64-bit Zobrist hash of
//! the set.  Three rules cut the walk; none can make it invent a witness, since every answer is still a
//! sequence of legal steps that respects real time (the caller replays the one a Result shows through the
//! Python model):
//!
//! 1. Twins: indeterminate calls with the same op code and arguments are interchangeable (neither returns,
//!    and the one invoked first can stand in for the later anywhere), so they are linearized in invoke order.
//! 2. Dead values (only for partitions without cas): a value that begins no value a read returns can never
//!    be read again until a write replaces it (appends only grow it), so all such values are one state,
//!    `DEAD`.  This merges the orders of appends that went wrong in the cache and stops their strings from
//!    growing.
//! 3. Look-ahead (the same partitions): after each step, the first unlinearized reads in the list (at most
//!    `MAX_ASKS`, among its first `MAX_SEEN` events) must still be reachable: the state begins the value the
//!    read returns, or some unlinearized write invoked before the read returns has a value that begins it
//!    (appends only extend a value, and a write invoked after the read returns must follow it).  Otherwise
//!    the step is undone at once.

use crate::{FxMap, FxSet};

pub(crate) const NOP: u8 = 0; // always legal, state unchanged (a definite failure the model keeps)
pub(crate) const READ: u8 = 1; // legal iff the state is a
pub(crate) const WRITE: u8 = 2; // state := a
pub(crate) const APPEND: u8 = 3; // state := state + a (strings)
pub(crate) const CAS_OK: u8 = 4; // legal iff the state is a; state := b
pub(crate) const CAS_FAIL: u8 = 5; // legal iff the state is not a
pub(crate) const CAS_ANY: u8 = 6; // an indeterminate cas: always legal; state := b if it is a

const DEAD: u32 = u32::MAX; // every value that begins no value read (rule 2)
const NIL: usize = usize::MAX;
const NO_TWIN: u32 = u32::MAX;
const MAX_ASKS: usize = 8;
const MAX_SEEN: usize = 64;

/// Interned values: the search only compares ids.
///
/// In a plain partition (rule 2) a state is a prefix of the sorted, distinct values reads return, kept as
/// (k, l, hi): its length l and the block reads[k..hi] of the values that begin with it (k the first, so
/// equal prefixes get one id), or DEAD.  An append then narrows the block by comparing only its own
/// characters, never copying or hashing the whole value (kv values grow to tens of kilobytes), and "the
/// state begins read value v" is k <= v < hi.  Elsewhere (cas) values are interned strings.
struct Values<'a> {
    ids: FxMap<String, u32>,
    text: Vec<String>,
    concat: FxMap<(u32, u32), u32>,
    plain: bool,
    reads: Vec<&'a str>,               // plain: the distinct values reads return, sorted
    prefixes: Vec<(u32, u32, u32)>,    // plain: (k, l, hi) per state id
    prefix_ids: FxMap<(u32, u32), u32>, // plain: (k, l) -> state id
}

impl Values<'_> {
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.text.len() as u32;
        self.ids.insert(s.to_owned(), id);
        self.text.push(s.to_owned());
        id
    }

    /// A value as a state: its interned id, or in a plain partition its prefix state (DEAD if it begins no
    /// value read).
    fn state_of(&mut self, t: &str) -> u32 {
        if !self.plain {
            return self.intern(t);
        }
        let b = t.as_bytes();
        let k = self.reads.partition_point(|r| r.as_bytes() < b);
        if k == self.reads.len() || !self.reads[k].as_bytes().starts_with(b) {
            return DEAD;
        }
        let hi = k + self.reads[k..].partition_point(|r| r.as_bytes().starts_with(b));
        self.prefix(k as u32, b.len() as u32, hi as u32)
    }

    fn prefix(&mut self, k: u32, l: u32, hi: u32) -> u32 {
        let next = self.prefixes.len() as u32;
        let id = *self.prefix_ids.entry((k, l)).or_insert(next);
        if id == next {
            self.prefixes.push((k, l, hi));
        }
        id
    }

    /// State s followed by the interned text v (memoised).
    fn append(&mut self, s: u32, v: u32) -> u32 {
        if s == DEAD {
            return DEAD;
        }
        if let Some(&id) = self.concat.get(&(s, v)) {
            return id;
        }
        let id = if self.plain {
            let (k, l, hi) = self.prefixes[s as usize];
            let piece = self.text[v as usize].as_bytes();
            // the reads of the block all share the state's l bytes, and in sorted order their next |piece|
            // bytes never decrease: those equal to the piece are one run
            let block = &self.reads[k as usize..hi as usize];
            let lo = block.partition_point(|r| window(r, l as usize, piece.len()) < piece);
            let up = block.partition_point(|r| window(r, l as usize, piece.len()) <= piece);
            if lo == up {
                DEAD
            } else {
                let (lo, up, l2) = (k + lo as u32, k + up as u32, l + piece.len() as u32);
                self.prefix(lo, l2, up)
            }
        } else {
            let joined = format!("{}{}", self.text[s as usize], self.text[v as usize]);
            self.intern(&joined)
        };
        self.concat.insert((s, v), id);
        id
    }

    /// Does state x begin the value of read state v (plain partitions only)?
    fn begins(&self, x: u32, v: u32) -> bool {
        if x == DEAD || v == DEAD {
            return false;
        }
        let (k, _, hi) = self.prefixes[x as usize];
        let (kv, _, _) = self.prefixes[v as usize];
        k <= kv && kv < hi
    }

    fn step(&mut self, code: u8, a: u32, b: u32, s: u32) -> Option<u32> {
        match code {
            NOP => Some(s),
            READ => (s == a).then_some(s),
            WRITE => Some(a),
            APPEND => Some(self.append(s, a)),
            CAS_OK => (s == a).then_some(b),
            CAS_FAIL => (s != a).then_some(s),
            CAS_ANY => Some(if s == a { b } else { s }),
            _ => None,
        }
    }
}

/// The bytes of r from l on, at most n of them.
fn window(r: &str, l: usize, n: usize) -> &[u8] {
    let r = r.as_bytes();
    &r[l..r.len().min(l + n)]
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

/// The event list and what the rules read; slots 2i and 2i+1 are call i's invoke and return, `head` is 2n.
struct Walk<'a> {
    codes: &'a [u8],
    av: Vec<u32>,
    call_t: &'a [f64],
    ret_t: &'a [f64],
    next: Vec<usize>,
    prev: Vec<usize>,
    head: usize,
    done: Vec<bool>,
    twin: Vec<u32>,
    writes: Vec<u32>,     // the WRITE calls by invoke time (rule 3)
    write_at: Vec<u32>,   // per call: its place in `writes` (NO_TWIN: not a write)
    first_open: usize,    // every write before this place in `writes` is linearized
    lookahead: bool,
}

impl Walk<'_> {
    /// Lift call c's invoke and return out of the list.
    fn lift(&mut self, c: usize) {
        for e in [2 * c, 2 * c + 1] {
            let (p, n) = (self.prev[e], self.next[e]);
            self.next[p] = n;
            if n != NIL {
                self.prev[n] = p;
            }
        }
        self.done[c] = true;
        if self.write_at[c] as usize == self.first_open {
            while self.first_open < self.writes.len() && self.done[self.writes[self.first_open] as usize] {
                self.first_open += 1;
            }
        }
    }

    /// Put call c back (the reverse of ``lift``).
    fn unlift(&mut self, c: usize) {
        for e in [2 * c + 1, 2 * c] {
            let (p, n) = (self.prev[e], self.next[e]);
            if n != NIL {
                self.prev[n] = e;
            }
            self.next[p] = e;
        }
        self.done[c] = false;
        if self.write_at[c] != NO_TWIN {
            self.first_open = self.first_open.min(self.write_at[c] as usize);
        }
    }

    /// Rule 3: is some unlinearized read among the first ones in the list unreachable from state s?
    fn doomed(&self, values: &Values<'_>, s: u32) -> bool {
        if !self.lookahead {
            return false;
        }
        let mut e = self.next[self.head];
        let (mut asked, mut seen) = (0, 0);
        while e != NIL && asked < MAX_ASKS && seen < MAX_SEEN {
            let c = e / 2;
            seen += 1;
            if e & 1 == 0 && self.codes[c] == READ {
                asked += 1;
                let v = self.av[c];
                let reachable = values.begins(s, v) || self.rebuilt(values, v, self.ret_t[c]);
                if !reachable {
                    return true;
                }
            }
            e = self.next[e];
        }
        false
    }

    /// Was some unlinearized write whose value begins v invoked no later than `by`?
    fn rebuilt(&self, values: &Values<'_>, v: u32, by: f64) -> bool {
        for k in self.first_open..self.writes.len() {
            let w = self.writes[k] as usize;
            if self.call_t[w] > by {
                return false;
            }
            if !self.done[w] && values.begins(self.av[w], v) {
                return true;
            }
        }
        false
    }
}

/// Search one partition; see the module docs.  Returns the calls (indices into the arguments) in a
/// linearization order, the number of steps and the cache size, or None when no witness was found within
/// `max_steps` (or none exists).
pub(crate) fn search<S: AsRef<str>>(
    init: &str, codes: &[u8], a: &[S], b: &[S], call_t: &[f64], ret_t: &[f64], max_steps: u64,
) -> Option<(Vec<u32>, u64, usize)> {
    let n = codes.len();
    let plain = codes.iter().all(|&c| c <= APPEND); // rules 2 and 3 hold for these ops only
    let mut reads: Vec<&str> = Vec::new();
    if plain {
        reads = (0..n).filter(|&i| codes[i] == READ).map(|i| a[i].as_ref()).collect();
        reads.sort_unstable();
        reads.dedup();
    }
    let mut values = Values {
        ids: FxMap::default(), text: Vec::new(), concat: FxMap::default(), plain, reads,
        prefixes: Vec::new(), prefix_ids: FxMap::default(),
    };
    let mut state = values.state_of(init);
    // an append's argument is a text; every other argument is a value as a state
    let av: Vec<u32> = (0..n)
        .map(|i| if codes[i] == APPEND { values.intern(a[i].as_ref()) } else { values.state_of(a[i].as_ref()) })
        .collect();
    let bv: Vec<u32> = b.iter().map(|s| values.state_of(s.as_ref())).collect();
    let mut walk = new_walk(codes, &av, &bv, call_t, ret_t, plain);
    let keys = zobrist(n);
    let mut hash: u64 = 0;
    let mut cache: FxSet<(u64, u32)> = FxSet::default();
    let mut stack: Vec<(usize, u32)> = Vec::new(); // (call, state before it)
    let mut steps: u64 = 0;
    let head = walk.head;
    let mut entry = walk.next[head];
    while walk.next[head] != NIL {
        if entry == NIL {
            return None; // cannot happen: the list ends with a return
        }
        if entry & 1 == 1 {
            // a pending return: the last linearized call must be undone
            let (c, s) = stack.pop()?;
            state = s;
            hash ^= keys[c];
            walk.unlift(c);
            entry = walk.next[2 * c];
            continue;
        }
        let c = entry / 2;
        entry = walk.next[entry];
        if walk.twin[c] != NO_TWIN && !walk.done[walk.twin[c] as usize] {
            continue; // rule 1: its earlier twin first
        }
        let Some(s2) = values.step(codes[c], av[c], bv[c], state) else { continue };
        let h2 = hash ^ keys[c];
        if !cache.insert((h2, s2)) {
            continue;
        }
        walk.lift(c);
        if walk.doomed(&values, s2) {
            walk.unlift(c);
            continue;
        }
        stack.push((c, state));
        state = s2;
        hash = h2;
        entry = walk.next[head];
        steps += 1;
        if steps > max_steps {
            return None;
        }
    }
    let order = stack.iter().map(|&(c, _)| c as u32).collect();
    Some((order, steps, cache.len()))
}

/// The event list in time order (closed intervals: at equal times invokes come first, so a call invoked
/// when another returns is still a candidate before that return), the twins and the writes by invoke time.
fn new_walk<'a>(
    codes: &'a [u8], av: &[u32], bv: &[u32], call_t: &'a [f64], ret_t: &'a [f64], lookahead: bool,
) -> Walk<'a> {
    let n = codes.len();
    let mut events: Vec<(f64, u8, u32)> = Vec::with_capacity(2 * n);
    for i in 0..n {
        events.push((call_t[i], 0, 2 * i as u32));
        events.push((ret_t[i], 1, 2 * i as u32 + 1));
    }
    events.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)).then(x.2.cmp(&y.2)));
    let head = 2 * n;
    let mut next = vec![NIL; 2 * n + 1];
    let mut prev = vec![NIL; 2 * n + 1];
    let mut at = head;
    for &(_, _, e) in &events {
        next[at] = e as usize;
        prev[e as usize] = at;
        at = e as usize;
    }
    // Rule 1: each indeterminate call's twin is the previous one invoked with the same code and arguments.
    let mut twin = vec![NO_TWIN; n];
    let mut last: FxMap<(u8, u32, u32), u32> = FxMap::default();
    for &(_, kind, e) in &events {
        let c = (e / 2) as usize;
        if kind == 0 && ret_t[c] == f64::INFINITY {
            if let Some(t) = last.insert((codes[c], av[c], bv[c]), c as u32) {
                twin[c] = t;
            }
        }
    }
    let writes: Vec<u32> = events
        .iter()
        .filter(|&&(_, kind, e)| kind == 0 && codes[(e / 2) as usize] == WRITE)
        .map(|&(_, _, e)| e / 2)
        .collect();
    let mut write_at = vec![NO_TWIN; n];
    for (k, &w) in writes.iter().enumerate() {
        write_at[w as usize] = k as u32;
    }
    Walk {
        codes, av: av.to_vec(), call_t, ret_t, next, prev, head, done: vec![false; n], twin, writes, write_at,
        first_open: 0, lookahead,
    }
}
