"""Clients: producer, consumer and admin client."""
