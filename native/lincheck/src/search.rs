//! The witness search over one partition (see the crate docs), and the rules that cut it.
//!
//! A depth-first walk in invoke order over a doubly linked list of call and return events: a call may be
//! linearized while no pending return precedes it in the list, and a pending return met in the walk undoes
//! the last linearized call.  The cache holds (linearized set, state) pairs keyed by a 64-bit Zobrist hash of
//! the set.  Five rules cut the walk; none can make it invent a witness, since every answer is still a
//! sequence of legal steps that respects real time (the caller replays the one a Result shows through the
//! Python model):
//!
//! 1. Twins: indeterminate calls with the same op code and arguments are interchangeable (neither returns,
//!    and the one invoked first can stand in for the later anywhere), so they are linearized in invoke order.
//! 2. Dead values (only for partitions without cas): a value that begins no value a read returns can never
//!    be read again until a write replaces it (appends only grow it), so all such values are one state,
//!    `DEAD`.  This merges the orders of appends that went wrong in the cache and stops their strings from
//!    growing.
//! 3. Look-ahead (the same partitions): after each step, the first unlinearized reads in invoke order (at
//!    most `MAX_ASKS`) must still be reachable: the state begins the value the read returns, or some
//!    unlinearized write invoked before the read returns has a value that begins it (appends only extend a
//!    value, and a write invoked after the read returns must follow it).  Otherwise the step is undone at once.
//! 4. Read-only first: a node with a legal read-only candidate (a read of the state, a failed cas, a no-op)
//!    has that call as its only child.  Moving it to the front of any completion keeps the completion legal:
//!    it changes no state, and every call that returned before it was invoked is already linearized (it is a
//!    candidate).  So when that child fails or is cached, so does the node (the Python search's rule 2).  The
//!    look-ahead is not asked about the child: it has the node's state and the node's linearized writers.
//! 5. Counting look-ahead (rule 3, once the walk strays: after more steps than calls): a read is reachable
//!    only if some base -- the state, or an unlinearized write invoked before the read returns -- begins its
//!    value and the unlinearized appends invoked before it returns hold, character by character, at least the
//!    rest of the value after that base.  A linearized call was invoked before every unlinearized read
//!    returns (nothing invoked after a pending return is a candidate), so the appends still available to a
//!    read are those invoked before it returns minus all linearized ones: two table look-ups and a
//!    subtraction per character.  With a tiny alphabet and an indeterminate write pending forever, rule 3
//!    keeps states (`babab` against a 52-character read) that only dozens more appends than are left could
//!    repair; on issue 19's small-alphabet family this cut the worst walk from 15,000 steps to about 1,500.
//!    Up to `K` distinct characters of the appends are counted (others are ignored, which only weakens the
//!    rule); a read character no append holds must come from the base.

use std::borrow::Cow;

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

/// Interned values: the search only compares ids.
///
/// In a plain partition (rule 2) a state is a prefix of the sorted, distinct values reads return, kept as
/// (k, l, hi): its length l and the block reads[k..hi] of the values that begin with it (k the first, so
/// equal prefixes get one id), or DEAD.  An append then narrows the block by comparing only its own
/// characters, never copying or hashing the whole value (kv values grow to tens of kilobytes), and "the
/// state begins read value v" is k <= v < hi.  Elsewhere (cas) values are interned strings.
struct Values<'a> {
    ids: FxMap<Cow<'a, str>, u32>,
    text: Vec<Cow<'a, str>>,           // the arguments' own text; only cas partitions build values
    concat: FxMap<(u32, u32), u32>,
    plain: bool,
    reads: Vec<&'a str>,               // plain: the distinct values reads return, sorted
    prefixes: Vec<(u32, u32, u32)>,    // plain: (k, l, hi) per state id
    prefix_ids: FxMap<(u32, u32), u32>, // plain: (k, l) -> state id
}

impl<'a> Values<'a> {
    fn intern(&mut self, s: Cow<'a, str>) -> u32 {
        if let Some(&id) = self.ids.get(s.as_ref()) {
            return id;
        }
        let id = self.text.len() as u32;
        self.ids.insert(s.clone(), id);
        self.text.push(s);
        id
    }

    /// A value as a state: its interned id, or in a plain partition its prefix state (DEAD if it begins no
    /// value read).
    fn state_of(&mut self, t: &'a str) -> u32 {
        if !self.plain {
            return self.intern(Cow::Borrowed(t));
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
            self.intern(Cow::Owned(joined))
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

fn read_only(code: u8) -> bool {
    matches!(code, NOP | READ | CAS_FAIL)
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
    rnext: Vec<usize>,    // the unlinearized reads in invoke order (a list headed by slot n)
    rprev: Vec<usize>,
    lookahead: bool,
    budget: Option<Budget>,
}

/// Rule 5's counts: characters of the tracked alphabet (index `K` counts those no append holds).
const K: usize = 7;
type Counts = [u32; K + 1];

struct Budget {
    used: Counts,              // the characters of the linearized appends
    puts: Option<Puts>,        // the writes by value, when they have at most G distinct values
    adds: Vec<Counts>,         // per call: an append's characters (zero for other calls)
    before: Vec<Counts>,       // per read call: the characters of the appends invoked no later than it returns
    spell: Vec<Vec<Counts>>,   // per read value (its place in Values.reads): character counts of each prefix
}

/// Writes grouped by value (at most G distinct values that begin some read value).
const G: usize = 16;
struct Puts {
    group: Vec<u8>,            // per call: its group (u8::MAX: not a write, or a value no read begins with)
    len: [u32; G],             // per group: the length of its value
    used: [u32; G],            // per group: its linearized writes
    before: Vec<[u32; G]>,     // per read call: per group, its writes invoked no later than the read returns
    bases: Vec<u32>,           // per read value: the mask of the groups whose value begins it
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
        if self.codes[c] == READ {
            let (p, n) = (self.rprev[c], self.rnext[c]);
            self.rnext[p] = n;
            if n != NIL {
                self.rprev[n] = p;
            }
        }
        if let Some(b) = self.budget.as_mut() {
            if self.codes[c] == APPEND {
                for i in 0..=K {
                    b.used[i] += b.adds[c][i];
                }
            } else if let Some(p) = b.puts.as_mut() {
                if p.group[c] != u8::MAX {
                    p.used[p.group[c] as usize] += 1;
                }
            }
        }
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
        if self.codes[c] == READ {
            let (p, n) = (self.rprev[c], self.rnext[c]);
            if n != NIL {
                self.rprev[n] = c;
            }
            self.rnext[p] = c;
        }
        if let Some(b) = self.budget.as_mut() {
            if self.codes[c] == APPEND {
                for i in 0..=K {
                    b.used[i] -= b.adds[c][i];
                }
            } else if let Some(p) = b.puts.as_mut() {
                if p.group[c] != u8::MAX {
                    p.used[p.group[c] as usize] -= 1;
                }
            }
        }
        if self.write_at[c] != NO_TWIN {
            self.first_open = self.first_open.min(self.write_at[c] as usize);
        }
    }

    /// Rule 3: is some unlinearized read among the first ones in the list unreachable from state s?
    fn doomed(&self, values: &Values<'_>, s: u32) -> bool {
        if !self.lookahead {
            return false;
        }
        let mut c = self.rnext[self.codes.len()];
        let mut asked = 0;
        while c != NIL && asked < MAX_ASKS {
            {
                asked += 1;
                let v = self.av[c];
                let reachable = match &self.budget {
                    Some(b) => self.affordable(values, b, s, c),
                    None => values.begins(s, v) || self.rebuilt(values, v, self.ret_t[c]),
                };
                if !reachable {
                    return true;
                }
            }
            c = self.rnext[c];
        }
        false
    }

    /// Rule 5: can read c still be made legal from state s, counting characters?  Some base (the state, or
    /// an unlinearized write invoked before c returns) must begin c's value, and the unlinearized appends
    /// invoked before c returns must hold the characters of the rest of it.  Every linearized call was
    /// invoked before c returns (c is not linearized yet), so those appends are all of them minus `used`.
    fn affordable(&self, values: &Values<'_>, b: &Budget, s: u32, c: usize) -> bool {
        let v = self.av[c];
        let (r, _, _) = values.prefixes[v as usize];
        // a base of length l fits when its prefix of the value already holds at least `least` of each
        // character: the value's count minus what the available appends can still supply
        let spell = &b.spell[r as usize];
        let (full, have) = (&spell[spell.len() - 1], &b.before[c]);
        let mut least = [0; K + 1];
        for i in 0..=K {
            least[i] = full[i].saturating_sub(have[i].saturating_sub(b.used[i]));
        }
        let fits = |l: u32| {
            let row = &spell[l as usize];
            let mut ok = true;
            for i in 0..=K {
                ok &= row[i] >= least[i];
            }
            ok
        };
        if values.begins(s, v) && fits(values.prefixes[s as usize].1) {
            return true;
        }
        if let Some(p) = &b.puts {
            let mut m = p.bases[r as usize];
            while m != 0 {
                let g = m.trailing_zeros() as usize;
                m &= m - 1;
                if p.before[c][g] > p.used[g] && fits(p.len[g]) {
                    return true;
                }
            }
            return false;
        }
        let by = self.ret_t[c];
        for k in self.first_open..self.writes.len() {
            let w = self.writes[k] as usize;
            if self.call_t[w] > by {
                return false;
            }
            if !self.done[w] && values.begins(self.av[w], v) && fits(values.prefixes[self.av[w] as usize].1) {
                return true;
            }
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

/// Undo linearized calls back to the last one that was a choice (forced ones had no other child, so they go
/// too), restoring the state and hash before it; the entry after it is where the search goes on (None: the
/// stack ran out, no linearization).
fn backtrack(stack: &mut Vec<(usize, u32, bool)>, walk: &mut Walk<'_>, keys: &[u64], state: &mut u32,
             hash: &mut u64) -> Option<usize> {
    loop {
        let (c, s, forced) = stack.pop()?;
        *state = s;
        *hash ^= keys[c];
        walk.unlift(c);
        if !forced {
            return Some(walk.next[2 * c]);
        }
    }
}

/// Search one partition; see the module docs.  Returns the calls (indices into the arguments) in a
/// linearization order, the number of steps and the cache size, or None when no witness was found within
/// `max_steps` (or none exists).  Rule 5 starts after `count_after` steps (None: more steps than calls).
#[allow(clippy::too_many_arguments)]
pub(crate) fn search<'a, S: AsRef<str>>(
    init: &'a str, codes: &[u8], a: &'a [S], b: &'a [S], call_t: &[f64], ret_t: &[f64], max_steps: u64,
    count_after: Option<u64>,
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
        ids: FxMap::with_capacity_and_hasher(n, Default::default()), text: Vec::with_capacity(n),
        concat: FxMap::with_capacity_and_hasher(n, Default::default()), plain, reads,
        prefixes: Vec::with_capacity(n), prefix_ids: FxMap::with_capacity_and_hasher(n, Default::default()),
    };
    let mut state = values.state_of(init);
    // an append's argument is a text; every other argument is a value as a state
    // (values repeat: each distinct one is looked up once; only a cas has a second argument)
    let mut memo: FxMap<&str, u32> = FxMap::with_capacity_and_hasher(n, Default::default());
    let mut av: Vec<u32> = Vec::with_capacity(n);
    let mut bv: Vec<u32> = vec![0; n];
    for i in 0..n {
        let t = a[i].as_ref();
        av.push(if codes[i] == APPEND {
            values.intern(Cow::Borrowed(t))
        } else {
            *memo.entry(t).or_insert_with(|| values.state_of(t))
        });
        if codes[i] >= CAS_OK {
            let t = b[i].as_ref();
            bv[i] = *memo.entry(t).or_insert_with(|| values.state_of(t));
        }
    }
    let mut walk = new_walk(codes, &av, &bv, call_t, ret_t, plain);
    // Rule 5 pays only where the walk strays (an easy history takes about one step per call): its tables are
    // built once the walk has taken more steps than there are calls
    let lazy = count_after.unwrap_or(n as u64 + 64);
    let mut tried = lazy == 0;
    if tried && plain {
        walk.budget = new_budget(&values, codes, &av, call_t, ret_t, &walk.done);
    }
    let keys = zobrist(n);
    let mut hash: u64 = 0;
    let mut cache: FxSet<(u64, u32)> = FxSet::with_capacity_and_hasher(2 * n, Default::default());
    let mut stack: Vec<(usize, u32, bool)> = Vec::new(); // (call, state before it, forced: its node had no other child)
    let mut steps: u64 = 0;
    let head = walk.head;
    let mut entry = walk.next[head];
    let mut fresh = true; // a node not yet scanned for a legal read-only call
    while walk.next[head] != NIL {
        if fresh {
            fresh = false;
            // Rule 4: a legal read-only candidate is the node's only child.
            let mut e = walk.next[head];
            let mut forced = NIL;
            while e != NIL && e & 1 == 0 {
                let c = e / 2;
                if read_only(codes[c]) && (walk.twin[c] == NO_TWIN || walk.done[walk.twin[c] as usize])
                    && values.step(codes[c], av[c], bv[c], state).is_some() {
                    forced = c;
                    break;
                }
                e = walk.next[e];
            }
            if forced != NIL {
                let c = forced;
                let h2 = hash ^ keys[c];
                // (the look-ahead is not asked again: the state and the linearized writers are the node's)
                if !cache.insert((h2, state)) {
                    // the node has no other child: undo the call that led to it
                    entry = backtrack(&mut stack, &mut walk, &keys, &mut state, &mut hash)?;
                    continue;
                }
                walk.lift(c);
                stack.push((c, state, true));
                hash = h2;
                fresh = true;
                steps += 1;
                if steps > max_steps {
                    return None;
                }
                continue;
            }
            entry = walk.next[head];
        }
        if entry == NIL {
            return None; // cannot happen: the list ends with a return
        }
        if entry & 1 == 1 {
            // a pending return: the last linearized call must be undone (and the one before a forced call)
            entry = backtrack(&mut stack, &mut walk, &keys, &mut state, &mut hash)?;
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
        stack.push((c, state, false));
        state = s2;
        hash = h2;
        fresh = true;
        steps += 1;
        if steps > max_steps {
            return None;
        }
        if steps >= lazy && plain && !tried {
            tried = true;
            walk.budget = new_budget(&values, codes, &av, call_t, ret_t, &walk.done);
        }
    }
    let order = stack.iter().map(|&(c, _, _)| c as u32).collect();
    Some((order, steps, cache.len()))
}

/// Rule 5's tables, or None when the read values are too long in all to tabulate.
fn new_budget(
    values: &Values<'_>, codes: &[u8], av: &[u32], call_t: &[f64], ret_t: &[f64], done: &[bool],
) -> Option<Budget> {
    const MAX_ROWS: usize = 1 << 17;
    if values.reads.iter().map(|r| r.len() + 1).sum::<usize>() > MAX_ROWS {
        return None;
    }
    let n = codes.len();
    let mut slot = [K as u8; 256];
    let mut tracked = 0;
    for i in 0..n {
        if codes[i] == APPEND {
            for &ch in values.text[av[i] as usize].as_bytes() {
                if slot[ch as usize] == K as u8 {
                    slot[ch as usize] = if tracked < K { tracked += 1; tracked as u8 - 1 } else { K as u8 + 1 };
                }
            }
        }
    }
    let count = |text: &[u8], out: &mut Counts| {
        for &ch in text {
            let i = slot[ch as usize] as usize;
            if i <= K {
                out[i] += 1;
            }
        }
    };
    let mut adds = vec![[0; K + 1]; n];
    let mut appends: Vec<usize> = Vec::new();
    for i in 0..n {
        if codes[i] == APPEND {
            count(values.text[av[i] as usize].as_bytes(), &mut adds[i]);
            appends.push(i);
        }
    }
    appends.sort_by(|&x, &y| call_t[x].total_cmp(&call_t[y]));
    let mut sums = vec![[0; K + 1]; appends.len() + 1];
    for (j, &i) in appends.iter().enumerate() {
        for r in 0..=K {
            sums[j + 1][r] = sums[j][r] + adds[i][r];
        }
    }
    let mut before = vec![[0; K + 1]; n];
    for i in 0..n {
        if codes[i] == READ {
            before[i] = sums[appends.partition_point(|&x| call_t[x] <= ret_t[i])];
        }
    }
    let spell = values
        .reads
        .iter()
        .map(|r| {
            let mut rows = vec![[0; K + 1]; r.len() + 1];
            for (j, &ch) in r.as_bytes().iter().enumerate() {
                rows[j + 1] = rows[j];
                let i = slot[ch as usize] as usize;
                if i <= K {
                    rows[j + 1][i] += 1;
                }
            }
            rows
        })
        .collect();
    let mut puts = new_puts(values, codes, av, call_t, ret_t);
    let mut used = [0; K + 1];
    for i in (0..n).filter(|&i| done[i]) {
        for r in 0..=K {
            used[r] += adds[i][r];
        }
        if let Some(p) = puts.as_mut() {
            if p.group[i] != u8::MAX {
                p.used[p.group[i] as usize] += 1;
            }
        }
    }
    Some(Budget { used, puts, adds, before, spell })
}

/// The writes grouped by value for rule 5, or None when they have more than G distinct values.
fn new_puts(values: &Values<'_>, codes: &[u8], av: &[u32], call_t: &[f64], ret_t: &[f64]) -> Option<Puts> {
    let n = codes.len();
    let mut ids: Vec<u32> = Vec::new();
    let mut group = vec![u8::MAX; n];
    for i in 0..n {
        if codes[i] == WRITE && av[i] != DEAD {
            let g = match ids.iter().position(|&x| x == av[i]) {
                Some(g) => g,
                None => {
                    if ids.len() == G {
                        return None;
                    }
                    ids.push(av[i]);
                    ids.len() - 1
                }
            };
            group[i] = g as u8;
        }
    }
    let mut len = [0; G];
    for (g, &id) in ids.iter().enumerate() {
        len[g] = values.prefixes[id as usize].1;
    }
    let mut bases = vec![0u32; values.reads.len()];
    for (g, &id) in ids.iter().enumerate() {
        let (k, _, hi) = values.prefixes[id as usize];
        for m in &mut bases[k as usize..hi as usize] {
            *m |= 1 << g;
        }
    }
    let mut writes: Vec<usize> = (0..n).filter(|&i| group[i] != u8::MAX).collect();
    writes.sort_by(|&x, &y| call_t[x].total_cmp(&call_t[y]));
    let mut sums = vec![[0u32; G]; writes.len() + 1];
    for (j, &i) in writes.iter().enumerate() {
        sums[j + 1] = sums[j];
        sums[j + 1][group[i] as usize] += 1;
    }
    let mut before = vec![[0u32; G]; n];
    for i in 0..n {
        if codes[i] == READ {
            before[i] = sums[writes.partition_point(|&x| call_t[x] <= ret_t[i])];
        }
    }
    Some(Puts { group, len, used: [0; G], before, bases })
}

/// A time as a u64 in the same order (f64::total_cmp's).
fn sortable(t: f64) -> u64 {
    let b = t.to_bits();
    if b >> 63 == 0 { b | 1 << 63 } else { !b }
}

/// The event list in time order (closed intervals: at equal times invokes come first, so a call invoked
/// when another returns is still a candidate before that return), the twins and the writes by invoke time.
fn new_walk<'a>(
    codes: &'a [u8], av: &[u32], bv: &[u32], call_t: &'a [f64], ret_t: &'a [f64], lookahead: bool,
) -> Walk<'a> {
    let n = codes.len();
    // invokes and returns each sorted by (time, call) (invokes usually come sorted), then merged, an invoke
    // first at equal times
    let by_time = |t: &[f64]| {
        let mut v: Vec<(u64, u32)> = (0..n).map(|i| (sortable(t[i]), i as u32)).collect();
        if !v.windows(2).all(|w| w[0] <= w[1]) {
            v.sort_unstable();
        }
        v
    };
    let (calls, rets) = (by_time(call_t), by_time(ret_t));
    let mut events: Vec<(f64, u8, u32)> = Vec::with_capacity(2 * n);
    let (mut i, mut j) = (0, 0);
    while i < n || j < n {
        if j == n || (i < n && calls[i].0 <= rets[j].0) {
            events.push((call_t[calls[i].1 as usize], 0, 2 * calls[i].1));
            i += 1;
        } else {
            events.push((ret_t[rets[j].1 as usize], 1, 2 * rets[j].1 + 1));
            j += 1;
        }
    }
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
    let mut rnext = vec![NIL; n + 1];
    let mut rprev = vec![NIL; n + 1];
    let mut at = n;
    for &(_, kind, e) in &events {
        let c = (e / 2) as usize;
        if kind == 0 && codes[c] == READ {
            rnext[at] = c;
            rprev[c] = at;
            at = c;
        }
    }
    let mut write_at = vec![NO_TWIN; n];
    for (k, &w) in writes.iter().enumerate() {
        write_at[w as usize] = k as u32;
    }
    Walk {
        codes, av: av.to_vec(), call_t, ret_t, next, prev, head, done: vec![false; n], twin, writes, write_at,
        first_open: 0, lookahead, budget: None, rnext, rprev,
    }
}
