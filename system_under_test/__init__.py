"""The cluster under test: a Raft-replicated controller quorum and replicated brokers."""
