"""Broker: store, HA replication, registration, server."""
