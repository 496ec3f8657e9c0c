"""Test targets for the harness itself: a tiny counter service, its workload, and a runnable test."""
