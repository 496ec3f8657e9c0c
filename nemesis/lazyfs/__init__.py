"""A lazy file system for the disk nemesis: writes wait in memory until fsync, so a crash can drop them.

:mod:`nemesis.lazyfs.core` is the pure model (one file's durable bytes and pending writes), and
:mod:`nemesis.lazyfs.fs` the FUSE shell (``python -m nemesis.lazyfs mount|crash|status``).  The idea is Jepsen's
LazyFS; this is our own, smaller implementation (docs/nemeses.md, *Disks*)."""
