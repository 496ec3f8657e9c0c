//! The pass's maps hash with rustc's Fx scheme (the `rustc-hash` crate): their keys are 64-bit integers and
//! interned ids from the history, and std's SipHash was the larger part of a map lookup.

pub type FxBuild = rustc_hash::FxBuildHasher;
pub type FxMap<K, V> = rustc_hash::FxHashMap<K, V>;
pub type FxSet<K> = rustc_hash::FxHashSet<K>;
